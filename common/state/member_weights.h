// MemberWeights: a member's checkpoint without its TorchScript module (weights.bin, run_layout.h).
//
// Building and saving a TorchScript module per member cost most of a member's time outside
// training (issue 52: ~1 ms a member, thousands a round). A member whose forward the worker
// can run eagerly (an MLP: Model::MemberStatements) is saved as this file instead: the same
// spec, tensors and forward source the module would hold. Its callable module is built only
// when someone asks for it (worker/predict/checkpoint.h LoadMember: predict, export, verify,
// `ensemble-worker member-module`), and equals the module that was saved before, buffer for
// buffer and in every prediction bit. A TorchScript member (its own submodule "net") still
// writes checkpoint.pt.
//
// Layout (little-endian, as the machine writes floats):
//   [0, 8)        magic "ENSWGT01"
//   [8, 16)       u64 header length H
//   [16, 16+H)    JSON header: {"spec": the MemberSpec JSON text (the module's "spec"
//                 attribute, byte for byte), "source": the module's whole TorchScript source
//                 (checkpoint.cpp ForwardSource), "tensors": [{"name", "shape": [..]}, ...]}:
//                 the module's buffers in its order, the model's tensors then x_mean, x_std,
//                 y_mean, y_std
//   [16+H, ...)   each tensor's float32 values, row-major, in "tensors" order, nothing between
// No libtorch here: the worker converts tensors (checkpoint.cpp). Thread-safe (no state).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/base/status.h"

namespace ens {

struct StoredTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> values;  // product of shape values
};

struct MemberWeights {
  std::string spec_json;  // the "spec" attribute's text
  std::string source;     // the module's methods (TorchScript source)
  std::vector<StoredTensor> tensors;
};

// The file's bytes.
std::string MemberWeightsBytes(const MemberWeights& weights);
// Parses bytes read from `path` (named in errors). Anything that is not such a file, or is cut
// short, is Corruption.
StatusOr<MemberWeights> ParseMemberWeights(const std::string& bytes, const std::string& path);
// Whether `bytes` start like a weights file (the magic), to tell it from a TorchScript archive.
bool LooksLikeMemberWeights(const std::string& bytes);

}  // namespace ens
