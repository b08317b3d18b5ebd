# The Python package's own tests (python/tests, docs/python.md) as one ctest test: pytest under
# the venv's interpreter (ENSEMBLED_PYTHON, set by scripts/build), run from the source folder,
# on the programs of this build folder (ENSEMBLED_BUILD_DIR). Skipped (exit 77) when that
# interpreter cannot import pytest; the tests skip what they cannot run (no torch: the exported
# module; no matplotlib: the plots; no pandas: the frames) and say so.
# Included from CMakeLists.txt inside if(ENSEMBLED_BUILD_TESTS).
if(NOT ENSEMBLED_PYTHON)
  message(STATUS "python_package_test: not registered (ENSEMBLED_PYTHON is not set)")
  return()
endif()
add_test(NAME python_package_test
         COMMAND ${ENSEMBLED_PYTHON} ${CMAKE_SOURCE_DIR}/python/tests/run_pytest.py
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(python_package_test PROPERTIES
                     ENVIRONMENT "ENSEMBLED_BUILD_DIR=${CMAKE_BINARY_DIR};MPLBACKEND=Agg;PYTHONDONTWRITEBYTECODE=1"
                     SKIP_RETURN_CODE 77 TIMEOUT 600)
