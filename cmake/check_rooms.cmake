# The house's rooms, checked at configure time (every ./scripts/build configures): a file that
# breaks a rule fails the build with its name, line and the header it includes.
#
# ens_check_rooms(<tree> <rooms, lowest first>): the files of <tree>/<room>/ may include headers
# of their own room and of the rooms listed before it, never of one after it; every file of the
# tree is in a room (orchestrator/main.cpp, above every room, may include any).
#
# ens_check_trees(<trees, lowest first>): a tree (common, worker, orchestrator, ctl) may include
# headers of its own and of the trees before it, never of one after it: common/ includes nothing
# of the worker's or the daemon's.
# The C++ and CUDA sources of <dir> (GLOB_RECURSE when <mode> is RECURSE) into <out>.
function(_ens_sources out dir mode)
  set(globs "${dir}/*.h" "${dir}/*.cpp" "${dir}/*.inc" "${dir}/*.cu")
  if(mode STREQUAL "RECURSE")
    file(GLOB_RECURSE files ${globs})
  else()
    file(GLOB files ${globs})
  endif()
  set(${out} "${files}" PARENT_SCOPE)
endfunction()

# Fails the configure with <title> and the list of violations, if there are any.
function(_ens_fail_on title violations)
  if(violations)
    list(JOIN violations "\n  " text)
    message(FATAL_ERROR "${title}:\n  ${text}")
  endif()
endfunction()

function(ens_check_rooms tree rooms)
  set(violations "")
  list(LENGTH rooms count)
  math(EXPR last "${count} - 1")
  file(GLOB loose "${CMAKE_SOURCE_DIR}/${tree}/*.h" "${CMAKE_SOURCE_DIR}/${tree}/*.cpp" "${CMAKE_SOURCE_DIR}/${tree}/*.inc")
  foreach(file ${loose})
    if(NOT file STREQUAL "${CMAKE_SOURCE_DIR}/orchestrator/main.cpp")
      list(APPEND violations "${file}: in no room (${tree}/<room>/)")
    endif()
  endforeach()
  foreach(i RANGE ${last})
    list(GET rooms ${i} room)
    _ens_sources(files "${CMAKE_SOURCE_DIR}/${tree}/${room}" ONE)
    foreach(file ${files})
      file(STRINGS "${file}" lines REGEX "^#include \"${tree}/")
      foreach(line ${lines})
        string(REGEX MATCH "${tree}/([a-z_]+)/" _ "${line}")
        set(target "${CMAKE_MATCH_1}")
        list(FIND rooms "${target}" j)
        if(target STREQUAL "" OR j EQUAL -1)
          list(APPEND violations "${file}: ${line} (not a room's header)")
        elseif(j GREATER i)
          list(APPEND violations "${file}: ${line} (room ${room} may not include room ${target}, which is above it)")
        endif()
      endforeach()
    endforeach()
  endforeach()
  _ens_fail_on("${tree} rooms (lowest first: ${rooms})" "${violations}")
endfunction()

function(ens_check_trees trees)
  set(violations "")
  list(LENGTH trees count)
  math(EXPR last "${count} - 1")
  foreach(i RANGE ${last})
    list(GET trees ${i} tree)
    _ens_sources(files "${CMAKE_SOURCE_DIR}/${tree}" RECURSE)
    foreach(file ${files})
      file(STRINGS "${file}" lines REGEX "^#include \"[a-z_]+/")
      foreach(line ${lines})
        string(REGEX MATCH "^#include \"([a-z_]+)/" _ "${line}")
        list(FIND trees "${CMAKE_MATCH_1}" j)
        if(j GREATER i)
          list(APPEND violations "${file}: ${line} (${tree}/ may not include ${CMAKE_MATCH_1}/, which is above it)")
        endif()
      endforeach()
    endforeach()
  endforeach()
  _ens_fail_on("trees (lowest first: ${trees})" "${violations}")
endfunction()
