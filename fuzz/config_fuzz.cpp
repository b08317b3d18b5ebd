// libFuzzer target: config validation (common/config/config.h) on arbitrary bytes.
//
// ValidateConfigText must turn every input into either a Config or a list of errors:
// no crash, no uncaught exception, no sanitizer report. Relative paths resolve against
// "/tmp"; nothing is read from or written to disk.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/config/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  ens::Config config;
  const std::vector<ens::ConfigError> errors = ens::ValidateConfigText(text, "/tmp", &config);
  // Contract: an empty error list means the config was produced, so it has a state_dir.
  if (errors.empty() && config.state_dir.empty()) __builtin_trap();
  return 0;
}
