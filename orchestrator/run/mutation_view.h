// MutationView: what a `command` mutation sees of the run besides the round's numbers.
//
// Before the program runs, the supervisor writes two files into rounds/rNNNN/mutation/:
//   train_row_ids.npy    int64, the table rows the round trained on (every row less the dropped)
//   pool_unused_ids.npy  int64, the pool rows no mutation has taken yet
// and hands the program, as "run" in its stdin JSON and as ENSEMBLED_* variables (README
// "Mutation commands"), where everything is: the state and round directories, round and
// generation, the training table (path and layout: a kSegmentHeaderBytes header, then rows of
// features + targets float32, targets last), the holdout and pool features (.npy), each finished
// member's holdout and pool predictions (raw float32: "<x>_file", "<x>_offset" in bytes and
// "<x>_count" values, since a packed member's are a span of its pack's file; "<x>" alone names
// only a member's own whole file; a value per row and target, or for a
// classification run a probability per class and row, row-major, "classes" naming them; the
// table's target is then the class index; for Gaussian heads a [mean, variance] per row,
// "prediction" says "gaussian"), and the ensemblectl binary, whose
// `predict --round R` scores new candidate rows with this round's members.
// Writes nothing else; O(table rows + pool rows) per round. Thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/base/status.h"

namespace ens {

struct MutationViewInputs {
  std::string state_dir, round_dir, data_dir;   // absolute
  int round = 0;
  uint64_t generation = 0;                      // the generation the round trained on
  uint64_t table_rows = 0;                      // rows of that generation's table
  int features = 0;
  int targets = 1;                              // regression targets per row
  std::vector<std::string> feature_names;
  std::vector<std::string> classes;             // classification: the run's classes; else empty
  bool gaussian = false;                        // Gaussian heads: predictions are [mean, variance] rows
  const std::vector<uint64_t>* dropped = nullptr;   // sorted, unique, each < table_rows
  const std::vector<bool>* pool_used = nullptr;
  std::vector<std::string> member_names, member_dirs;  // the round's finished members
  std::string ctl_binary;                       // ensemblectl
};

struct MutationView {
  nlohmann::json run;                                        // "run" in the stdin JSON
  std::vector<std::pair<std::string, std::string>> env;      // ENSEMBLED_* for the program
};

StatusOr<MutationView> WriteMutationView(const MutationViewInputs& in);

}  // namespace ens
