// ScriptModelCheck: a config's TorchScript members, checked before anything trains.
//
// Each distinct model path is loaded and run on a zero batch [2, features] by
// `ensemble-worker check-model` (ensembled and ensemblectl never load libtorch themselves):
// a missing file, a file that is not a TorchScript module, a forward that fails or an output
// of the wrong width is a ConfigError at the member's model.path pointer (config.h: path_at).
// `ensemblectl validate-config` and `ensembled run` (before round 0, local executor) use it.
// Blocking (one worker start per path, seconds). Thread-compatible.
#pragma once

#include <string>
#include <vector>

#include "common/config/config.h"

namespace ens {

// One error per failing path. Empty when there are no TorchScript members. `outputs`: the
// width the members must output (RunHead::OutputWidth; 0, a classification whose classes are
// not known yet: any width).
std::vector<ConfigError> CheckScriptModels(const std::vector<MemberSpec>& members, int features, int outputs,
                                           const std::string& worker_binary);

}  // namespace ens
