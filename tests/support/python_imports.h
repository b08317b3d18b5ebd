// Skips the calling test when the venv's Python lacks what it needs (tests that run Python
// torch: ENS_PYTHON in CMakeLists.txt). Exit 77: ctest reports the test skipped, never passed.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

#include "process_harness.h"
#include "temp_dir.h"

namespace ens::testing {

// Returns when `python` can `import <modules>` (e.g. "torch, numpy"); else says so and exits 77.
inline void SkipUnlessPythonImports(const std::string& python, const std::string& modules) {
  TempDir d;
  if (Run({python, "-c", "import " + modules}, d.path()).code == 0) return;
  std::fprintf(stderr, "SKIPPED: %s cannot import %s (run scripts/setup)\n", python.c_str(), modules.c_str());
  std::_Exit(77);
}

}  // namespace ens::testing
