// A run config as `ensembled serve` takes it: what `ensemblectl submit` sends and the daemon
// admits, and what `ensemblectl validate-config` checks a config without state_dir as. Pure.
#pragma once

#include <string>
#include <vector>

#include "common/config/config.h"

namespace ens {

// ValidateConfigText's errors, except that a config without state_dir gets
// <state_root>/<run_name>. Empty when valid (then *out is filled).
std::vector<ConfigError> ValidateServedRunConfig(const std::string& text, const std::string& base_dir,
                                                 const std::string& state_root, Config* out);

}  // namespace ens
