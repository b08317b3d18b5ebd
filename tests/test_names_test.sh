#!/usr/bin/env bash
# Every Catch2 test case must be one that ctest really runs. catch_discover_tests passes the
# names through a CMake list: a ';' splits a name, and an unclosed '[' (or a ']') stops the
# splitting, gluing the names that follow into one. Either way the registered name selects no
# test case, Catch runs nothing and exits 0, and ctest counts a pass for tests that never ran.
# This fails, naming them, when any TEST_CASE name holds ';', '[' or ']'.
set -uo pipefail
cd "$(dirname "$0")"
bad=$(grep -n 'TEST_CASE("[^"]*[][;]' ./*.cpp)
if [[ -n "$bad" ]]; then
  echo "TEST_CASE names with ';', '[' or ']' (ctest would never run them; use ' - ', '..' instead):"
  echo "$bad"
  exit 1
fi
echo "$(grep -c 'TEST_CASE(' ./*.cpp | awk -F: '{s+=$2} END {print s}') test case names checked: none holds ';', '[' or ']'"
