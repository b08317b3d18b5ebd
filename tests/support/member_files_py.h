// Python for test scripts that read a member's files as a user's own script would, whichever
// results_layout wrote them: examples/member_files.py (round_members, member_bytes, member_json).
#pragma once

#include <string>

namespace ens::testing {

// A prelude that imports examples/member_files.py's functions by name.
inline std::string MemberFilesPy() {
  return std::string("import sys\nsys.path.insert(0, \"") + ENS_SOURCE_DIR +
         "/examples\")\nfrom member_files import round_members, member_bytes, member_json\n";
}

}  // namespace ens::testing
