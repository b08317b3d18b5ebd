// RunLayout: where every file of a run lives under state_dir. One source of truth.
//
//   state_dir/
//     run.json                     run id, config digest, feature names (written once)
//     config.json                  the config the run uses, normalised, with epoch and fingerprint
//     journal.jsonl                append-only journal (journal.h)
//     supervisor.lock              flock held by the running supervisor
//     status.json                  live view (workers, progress), rewritten ~1/s while running
//     control.sock                 the run's control socket (unless service.control_socket or
//                                  systemd's RUNTIME_DIRECTORY puts it elsewhere)
//     data/train.bin               dataset segment: training rows, grows by mutation
//     data/holdout.bin             dataset segment: fixed holdout the ensemble is scored on
//     data/pool.bin                dataset segment: candidate pool for mutation
//     data/holdout_x.npy           the holdout's features as float32 [rows, features] (for
//                                  command members and mutation commands; never the targets)
//     data/pool_x.npy              the pool's features, the same way
//     data/slot<N>.pack.json       the pack assigned to worker slot N, while it is (worker_pool.cpp)
//     rounds/r0002/summary.json    ensemble summary of round 2 (after commit)
//     rounds/r0002/packs/<task>-a<attempt>.json   one per trained pack of K > 1 (member.json's "pack")
//     rounds/r0002/packs/<task>-a<attempt>/       results_layout "packs": the pack's members' files
//                                  (members.jsonl, weights.bin, history.jsonl, holdout_pred.f32,
//                                  pool_pred.f32, [train_state.pt]: pack_results.h), in place of
//                                  a member directory each (member_view.h serves them by it)
//     rounds/r0002/mutation/       what a mutation command reads (mutation_view.h):
//         train_row_ids.npy        the table rows round 2 trained on
//         pool_unused_ids.npy      the pool rows no mutation has taken yet
//     rounds/r0002/members/m005/   one member of round 2:
//         weights.bin              weights + normalisation tensors + forward source, no module
//                                  (member_weights.h): a member the worker predicts eagerly (MLP)
//         checkpoint.pt            a TorchScript member's module (torch.jit archive), and every
//                                  member of a state written before weights.bin (2026-12-06)
//         member.json              member spec, seed, generation, rows, norm stats
//         history.jsonl            per epoch: loss, val_loss, mae, mse, val_mae, val_mse, lr, seconds
//         metrics.json             final metrics (MemberMetrics)
//         holdout_pred.f32         raw float32 predictions on holdout rows
//         pool_pred.f32            raw float32 predictions on pool rows
//         train_state.pt           the optimizer's state, for the next round's warm start
//         model/                   a command member's own files (its checkpoint)
//         command.log              a command member's program's output
//       (retention, common/state/retention.h, may remove the predictions, checkpoint, train_state.pt
//        and model/ of rounds outside its window; the rest stays)
//     transport.secret             executor "slurm": the TCP transport's secret (0600)
//     slurm/worker-<token>.sh      executor "slurm": one job script per worker launch
//     slurm/slot<N>-<job>.log      ... and its job's output
//     serve.log                    a run of `ensembled serve`: its output (orchestrator/serve/serve_daemon.h)
// A member directory's files are named by MemberFiles, every other file of a state directory by
// RunLayout: no product code spells one of these names. What is named elsewhere is not a
// run's state: the serve daemon's own files (orchestrator/serve/serve_layout.h), the files a
// command member's program exchanges with its worker (worker/models/command_member.cpp, documented in
// docs/models.md), an ensemblectl command's scratch files, and the user's own data files. The
// tests spell names themselves, as a user's script would. Pure path arithmetic; thread-safe.
#pragma once

#include <cstdint>
#include <string>

namespace ens {

class RunLayout {
 public:
  explicit RunLayout(std::string state_dir) : root_(std::move(state_dir)) {}

  const std::string& root() const { return root_; }
  std::string RunFile() const { return root_ + "/run.json"; }
  std::string ConfigFile() const { return root_ + "/config.json"; }
  std::string JournalFile() const { return root_ + "/journal.jsonl"; }
  std::string LockFile() const { return root_ + "/supervisor.lock"; }
  std::string StatusFile() const { return root_ + "/status.json"; }
  std::string DataDir() const { return root_ + "/data"; }
  std::string RoundDir(int round) const;
  std::string SummaryFile(int round) const { return RoundDir(round) + "/summary.json"; }
  std::string MembersDir(int round) const { return RoundDir(round) + "/members"; }
  std::string MemberDir(int round, const std::string& member_name) const {
    return MembersDir(round) + "/" + member_name;
  }

  std::string SlurmDir() const { return root_ + "/slurm"; }
  // executor "slurm": the TCP transport's shared secret (its workers read it on the shared disk).
  std::string TransportSecret() const { return root_ + "/transport.secret"; }
  std::string SlurmScript(const std::string& token_hex) const { return SlurmDir() + "/worker-" + token_hex + ".sh"; }
  std::string SlurmLog(int slot, const std::string& job) const {
    return SlurmDir() + "/slot" + std::to_string(slot) + "-" + job + ".log";
  }
  std::string ServeLog() const { return root_ + "/serve.log"; }
  std::string ControlSocket() const { return root_ + "/control.sock"; }
  // A fused pack's description, relative to its round's directory (member.json's "pack").
  static std::string PackFile(const std::string& first_task_id, int attempt) {
    return "packs/" + first_task_id + "-a" + std::to_string(attempt) + ".json";
  }
  // A fused pack's results (common/state/pack_results.h), relative to its round's directory.
  static std::string PackResultsDir(const std::string& first_task_id, int attempt) {
    return "packs/" + first_task_id + "-a" + std::to_string(attempt);
  }

  static std::string TrainSegment(const std::string& data_dir) { return data_dir + "/train.bin"; }
  static std::string HoldoutSegment(const std::string& data_dir) { return data_dir + "/holdout.bin"; }
  static std::string PoolSegment(const std::string& data_dir) { return data_dir + "/pool.bin"; }
  static std::string HoldoutFeatures(const std::string& data_dir) { return data_dir + "/holdout_x.npy"; }
  static std::string PoolFeatures(const std::string& data_dir) { return data_dir + "/pool_x.npy"; }
  static std::string SlotPackFile(const std::string& data_dir, int slot) {
    return data_dir + "/slot" + std::to_string(slot) + ".pack.json";
  }
  // A round directory's mutation view (RoundDir(round)/mutation) and its two files.
  static std::string MutationDir(const std::string& round_dir) { return round_dir + "/mutation"; }
  static std::string MutationTrainRowIds(const std::string& round_dir) {
    return MutationDir(round_dir) + "/train_row_ids.npy";
  }
  static std::string MutationPoolUnusedIds(const std::string& round_dir) {
    return MutationDir(round_dir) + "/pool_unused_ids.npy";
  }
  // The train row ids dropped as of `generation` (uint64 each, native order).
  static std::string ExcludedRows(const std::string& data_dir, uint64_t generation);

 private:
  std::string root_;
};

// The files of one member directory (RunLayout::MemberDir, or the "<dir>.tmp" it is written in
// before it is renamed into place); see the layout above.
class MemberFiles {
 public:
  // The names of the files a checkpoint is saved as (in a member directory, and in a pack
  // directory: pack_results.h).
  static constexpr char kCheckpointName[] = "checkpoint.pt";
  static constexpr char kWeightsName[] = "weights.bin";
  // The member's records (in a pack directory: its line of members.jsonl, pack_results.h).
  static constexpr char kMemberName[] = "member.json";
  static constexpr char kMetricsName[] = "metrics.json";
  explicit MemberFiles(std::string dir) : dir_(std::move(dir)) {}
  const std::string& dir() const { return dir_; }
  std::string Checkpoint() const { return dir_ + "/" + kCheckpointName; }
  std::string Weights() const { return dir_ + "/" + kWeightsName; }
  // The member's checkpoint as stored: Weights() where it exists, else Checkpoint() (which may
  // be missing too: save_checkpoints false, or pruned). One stat.
  std::string StoredCheckpoint() const;
  std::string Member() const { return dir_ + "/" + kMemberName; }
  std::string History() const { return dir_ + "/history.jsonl"; }
  std::string Metrics() const { return dir_ + "/" + kMetricsName; }
  std::string HoldoutPred() const { return dir_ + "/holdout_pred.f32"; }
  std::string PoolPred() const { return dir_ + "/pool_pred.f32"; }
  std::string TrainState() const { return dir_ + "/train_state.pt"; }
  // A command member's model folder (ENSEMBLED_MODEL_DIR), its program's own files.
  std::string CommandModel() const { return dir_ + "/model"; }
  // A command member's program's stdout and stderr.
  std::string CommandLog() const { return dir_ + "/command.log"; }

 private:
  std::string dir_;
};

// Stable run id for a state directory: hex of a hash of its absolute path. The same
// state_dir gives the same id after a restart, so stale IPC objects can be found.
std::string RunIdFor(const std::string& absolute_state_dir);

}  // namespace ens
