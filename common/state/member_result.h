// MemberResult: what a finished member left on disk, as the supervisor and ensemblectl read it.
//
// The worker writes a member directory (see run_layout.h), or a pack's files
// (pack_results.h), to <dir>.tmp and renames it into place once every file is durable (one
// syncfs per pack), so a member that exists is complete. Its files are read through
// member_view.h, whichever layout holds them.
// metrics.json keys (all numbers unless said): member (string), round, index, seed,
// generation, train_rows, val_rows, epochs_run, best_epoch, best_val_loss, holdout_rmse and
// holdout_mae (regression; several targets: the means over the targets of
// holdout_rmse_per_target and holdout_mae_per_target, which are listed too) or
// holdout_accuracy, holdout_nll and holdout_brier (classification), seconds, rss_kb_before,
// rss_kb_after, rss_kb_peak, threads, device (string). A member of a fused pack (K > 1) adds
// pack_size, pack_position and the pack's own seconds: pack_train_seconds (the training loop),
// pack_prepare_seconds (splits, directories, pack file) and pack_outputs_seconds (the pack's
// model, then the members' modules, predictions and files); `seconds` is the pack's / K.
// A member with early_stopping.refit (config.h) adds epochs_chosen, search_epochs,
// search_best_val_loss, search_val_rows, refit_rows and length_rule (string); its epochs_run
// and history are the refit's, train_rows and val_rows its search's split.
// Pure functions; thread-safe.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/base/status.h"

namespace ens {

struct MemberResult {
  std::string name;
  nlohmann::json metrics;
  std::vector<float> holdout_pred;
  std::vector<float> pool_pred;
};

// Reads metrics.json and both prediction files (member_view.h); checks the prediction counts.
StatusOr<MemberResult> LoadMemberResult(const std::string& member_dir, size_t holdout_rows,
                                        size_t pool_rows);
// A member's raw little-endian float32 file (member_view.h: its own, or its pack's span);
// `expected` count is checked. Errors name the path.
StatusOr<std::vector<float>> ReadFloats(const std::string& path, size_t expected);
std::string FloatsToBytes(const std::vector<float>& v);

}  // namespace ens
