# Installs the service's files (the unit, the tmpfiles.d and sysusers.d snippets, the serve
# config and the example run config), configured at INSTALL time from the prefix being installed
# to: `cmake --install build --prefix /usr` on a build configured for /usr/local gives a unit that
# names /usr/bin/ensembled and /etc/ensembled/serve.json, where the files went.
#
# Run by install(CODE) in CMakeLists.txt, which sets:
#   ENS_SOURCE_DIR, ENS_BINARY_DIR   the trees
#   ENS_SYSCONFDIR    CMAKE_INSTALL_SYSCONFDIR as configured ("etc", or an absolute path)
#   ENS_UNITDIR, ENS_SYSUSERSDIR, ENS_TMPFILESDIR, ENS_DATADIR   relative to the prefix, or absolute
# CMAKE_INSTALL_PREFIX is the install-time prefix; file(INSTALL) prepends DESTDIR itself, the
# existence checks below do it by hand.

set(_prefix "${CMAKE_INSTALL_PREFIX}")
string(REGEX REPLACE "/+$" "" _prefix "${_prefix}")
# sysconfdir by GNUInstallDirs' rule, applied to the prefix installed to.
if(IS_ABSOLUTE "${ENS_SYSCONFDIR}")
  set(_sysconf "${ENS_SYSCONFDIR}")
elseif(_prefix STREQUAL "" OR _prefix STREQUAL "/usr")
  set(_sysconf "/etc")
elseif(_prefix MATCHES "^/opt/(.+)$")
  set(_sysconf "/etc/opt/${CMAKE_MATCH_1}")
else()
  set(_sysconf "${_prefix}/${ENS_SYSCONFDIR}")
endif()

function(_ens_dest var rel)
  if(IS_ABSOLUTE "${rel}")
    set(${var} "${rel}" PARENT_SCOPE)
  else()
    set(${var} "${_prefix}/${rel}" PARENT_SCOPE)
  endif()
endfunction()
_ens_dest(_unitdir "${ENS_UNITDIR}")
_ens_dest(_sysusersdir "${ENS_SYSUSERSDIR}")
_ens_dest(_tmpfilesdir "${ENS_TMPFILESDIR}")
_ens_dest(_datadir "${ENS_DATADIR}")

# The names the .in files use.
set(CMAKE_INSTALL_FULL_BINDIR "${_prefix}/bin")
set(CMAKE_INSTALL_FULL_SYSCONFDIR "${_sysconf}")
# This install's own folder for the configured files: two installs of one build at once (to
# other prefixes or DESTDIRs: tests/unit_file_test.cpp runs two under `ctest -j`) would
# otherwise copy each other's serve.json and unit. Removed at the end.
string(RANDOM LENGTH 16 _tag)
string(SHA1 _tag "$ENV{DESTDIR}|${_prefix}|${_tag}")
set(_out "${ENS_BINARY_DIR}/packaging/install/${_tag}")
file(MAKE_DIRECTORY "${_out}")
configure_file("${ENS_SOURCE_DIR}/packaging/ensembled.service.in" "${_out}/ensembled.service" @ONLY)
configure_file("${ENS_SOURCE_DIR}/packaging/ensembled.tmpfiles.conf.in" "${_out}/tmpfiles/ensembled.conf" @ONLY)
configure_file("${ENS_SOURCE_DIR}/packaging/ensembled.sysusers.conf" "${_out}/sysusers/ensembled.conf" COPYONLY)
# The serve config: configs/serve.json with runs_dir where this install puts runs.d.
file(READ "${ENS_SOURCE_DIR}/configs/serve.json" _serve)
string(REPLACE "\"runs_dir\": \"/etc/ensembled/runs.d\"" "\"runs_dir\": \"${_sysconf}/ensembled/runs.d\""
       _serve "${_serve}")
file(WRITE "${_out}/serve.json" "${_serve}")

file(INSTALL "${_out}/ensembled.service" DESTINATION "${_unitdir}")
file(INSTALL "${_out}/sysusers/ensembled.conf" DESTINATION "${_sysusersdir}")
file(INSTALL "${_out}/tmpfiles/ensembled.conf" DESTINATION "${_tmpfilesdir}")
# Reference copies always; the configs themselves only when there are none yet (a reinstall
# never overwrites an operator's edited config); runs.d, the queue (its owner and mode come from
# the tmpfiles.d snippet).
file(INSTALL "${ENS_SOURCE_DIR}/packaging/ensembled.json" "${_out}/serve.json" DESTINATION "${_datadir}/ensembled")
set(_dir "${_sysconf}/ensembled")
foreach(_pair "ensembled.json|${ENS_SOURCE_DIR}/packaging/ensembled.json" "serve.json|${_out}/serve.json")
  string(REPLACE "|" ";" _pair "${_pair}")
  list(GET _pair 0 _name)
  list(GET _pair 1 _from)
  if(EXISTS "$ENV{DESTDIR}${_dir}/${_name}")
    message(STATUS "Keeping existing: $ENV{DESTDIR}${_dir}/${_name}")
  else()
    file(INSTALL "${_from}" DESTINATION "${_dir}")
  endif()
endforeach()
file(MAKE_DIRECTORY "$ENV{DESTDIR}${_dir}/runs.d")
file(REMOVE_RECURSE "${_out}")
