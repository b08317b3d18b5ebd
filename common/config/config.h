// Config: one JSON file (comments allowed) drives a run.
//
// ParseConfig validates the whole document and reports *every* problem as
// "<JSON pointer>: <message>" (e.g. "/members/variants/1/layers/0/units: must be >= 1").
// Unknown keys are errors, so a typo never passes silently. Every field below states its
// default; configs/example.json documents the same keys for users.
// Plain data, no invariants beyond what ParseConfig checks. Thread-compatible.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/config/gpu_selection.h"
#include "common/config/member_options.h"
#include "common/state/retention.h"
#include "common/config/run_options.h"
#include "common/base/status.h"

namespace ens {

struct LayerSpec {
  int units = 0;                      // REQUIRED, >= 1
  // relu | tanh | sigmoid | swish | gelu | linear. Default: relu
  Activation activation = Activation::kRelu;
  double dropout = 0.0;               // [0, 1). Default: 0
};

struct EarlyStoppingSpec {
  bool enabled = false;                 // Default: false
  Monitor monitor = Monitor::kValLoss;  // val_loss | val_mae | val_mse. Default: val_loss
  int patience = 10;                    // >= 0. Default: 10
  double min_delta = 0.0;               // >= 0. Default: 0
  bool restore_best = true;             // Default: true
  // refit: the training length is chosen by the data. Early stopping on the validation rows
  // picks an epoch count (the epoch of the least monitored value, restore_best or not), then
  // the member trains again from its first weights on all its rows (validation ones
  // included) for that many epochs: what it keeps. Both parts are its own seeded work, so
  // the result is the same bits alone or in any pack. Needs enabled; not with warm_start.
  // Metrics: epochs_chosen, search_epochs, search_best_val_loss, refit_rows, length_rule.
  bool refit = false;                   // Default: false
};

// model: what a member is. "mlp": the built-in network the other member keys describe.
// "command": a program of the user's, run by the worker in its slot (worker/models/command_member.h,
// README "Command members"); of the other member keys only name, seed_offset, split and
// validation_split apply to it.
// "torchscript": the user's module (torch.jit.script, then save) whose forward maps
// [batch, features] to [batch, outputs] (worker/models/script_model.h); every member key but layers
// and dropout applies. Never fused into a pack.
struct ModelSpec {
  ModelKind kind = ModelKind::kMlp;       // mlp | command | torchscript. Default: mlp
  std::vector<std::string> argv;          // command: REQUIRED, program then arguments (no shell)
  double timeout_s = 3600.0;              // command: > 0, per attempt. Default: 3600
  std::vector<std::string> predict_argv;  // command: the prediction hook; empty = predict unsupported
  std::string path;                       // torchscript: REQUIRED, the saved module (relative: to the config)
  // torchscript: member = parameters of dimension >= 2 drawn by the member's initializer from
  // its init seed, the others zeroed; file = the file's weights. Default: member
  ScriptInit init = ScriptInit::kMember;
  std::string path_at;                    // where "path" was written (a JSON pointer); not serialised
};

// Everything needed to build and train one member. Pure data: the same spec, seed and
// dataset generation give the same bits.
struct MemberSpec {
  std::string name;                         // Default: "m<index>" (3 digits)
  std::vector<LayerSpec> layers;            // hidden layers; output layer (1 unit, linear) implied
  // glorot_uniform | he_uniform | lecun_normal. Default: glorot_uniform
  Initializer initializer = Initializer::kGlorotUniform;
  double l1 = 0.0;                          // L1 on kernels. Default: 0
  double l2 = 0.0;                          // L2 on kernels. Default: 0
  // regression: mse | mae | huber | gaussian_nll (a mean and a variance per row: every member
  // of the run, or none), default mse; classification: cross_entropy (its default)
  LossKind loss = LossKind::kMse;
  double huber_delta = 1.0;                 // > 0. Default: 1.0
  double label_smoothing = 0.0;             // classification, [0, 1). Default: 0
  // adam | adamw | sgd. Default: adam
  OptimizerKind optimizer = OptimizerKind::kAdam;
  double lr = 1e-3;                         // > 0. Default: 0.001
  double weight_decay = 0.0;                // adamw/sgd. Default: 0 (adamw: 0.01)
  double momentum = 0.0;                    // sgd only. Default: 0
  int epochs = 50;                          // >= 1. Default: 50
  int batch_size = 32;                      // >= 1. Default: 32
  EarlyStoppingSpec early_stopping;
  SplitKind split = SplitKind::kRandom;     // random | bootstrap. Default: random
  double validation_split = 0.2;            // [0, 1); 0: no early stopping. Default: 0.2
  // Adversarial training (fast gradient sign, Goodfellow et al.; the deep-ensembles paper's):
  // each step also trains on the batch moved by eps x (each feature's range over the member's
  // training rows) in the direction of the loss gradient's sign; loss = clean + adversarial.
  // >= 0; 0: off. Default: 0
  double adversarial_eps = 0.0;
  uint64_t seed_offset = 0;                 // added to the member index before seed mixing. Default: 0
  ModelSpec model;                          // Default: {"kind": "mlp"}
  // Round r+1 starts from this member's round-r weights and optimizer state (when it has them:
  // it succeeded in round r), with warm_start_epochs as its epoch budget; round 0 starts cold.
  // mlp and torchscript members. Default: false
  bool warm_start = false;
  int warm_start_epochs = 0;                // >= 1. Default: epochs
};

// resources.slurm: workers as Slurm pilot jobs (orchestrator/workers/slurm_executor.h).
struct SlurmSpec {
  std::string partition;           // "" = the cluster's default partition
  int workers = 2;                 // pilot jobs, one worker each, >= 1. Default: 2
  int gpus_per_worker = 1;         // --gres=gpu:N; 0 = CPU-only (no --gres). Default: 1
  int cpus_per_worker = 0;         // --cpus-per-task; 0 = threads_per_worker. Default: 0
  int mem_per_worker_mb = 0;       // --mem; 0 = the partition's default. Default: 0
  std::string time_limit;          // --time (Slurm syntax, e.g. "1-00:00:00"); "" = partition default
  std::vector<std::string> sbatch_args;  // added to every sbatch, one argument each (no shell)
  std::string listen = "0.0.0.0";  // where the supervisor listens for its workers (an IP address)
  int port = 0;                    // 0 = any free port
  std::string advertise_host;      // how workers reach the supervisor; "" = this host's name
};

struct ResourcesSpec {
  // "auto" | "none" | a count (the first usable ones; under `ensembled serve` any free ones of
  // the daemon's) | a list of GPU indices or UUIDs (common/config/gpu_selection.h). Default: "auto"
  GpuSelection gpus;
  int workers_per_gpu = 1;       // >= 1. Default: 1
  int cpu_workers = 2;           // workers when no GPU is used, >= 1. Default: 2
  int threads_per_worker = 1;    // intra-op threads of every task, >= 1. Default: 1
  // Retired (2026-12-07): accepted and ignored. It replayed PackStep's steps as CUDA graphs; the
  // lane kernel trains those members in one launch a window. Default: false
  bool cuda_graphs = false;
  // > 0: the run uses this many GB (2^30 bytes) of each of its GPUs, not the whole GPU. Its
  // workers on one GPU share it (each worker's CUDA caching allocator is capped at its part,
  // and a worker whose reserve passes its part is recycled); under `ensembled serve`, runs with
  // such shares are packed onto the same GPUs while their shares fit the GPU's memory
  // (orchestrator/serve/run_queue.h). Needs the GPUs' memory (NVML). Default: 0 (whole GPUs)
  double gpu_memory_gb = 0;
  ExecutorKind executor = ExecutorKind::kLocal;  // local | slurm. Default: local
  SlurmSpec slurm;                               // used when executor is "slurm"
};

struct DataSpec {
  DataSource source = DataSource::kSynthetic;  // a name of kDataSourceNames (run_options.h). Default: synthetic
  // synthetic (Friedman #1, deterministic from the run seed)
  int synthetic_features = 10;       // >= 5. Default: 10
  double synthetic_noise = 1.0;      // >= 0. Default: 1.0
  int initial_rows = 200;            // >= 1. Default: 200
  int pool_rows = 2000;              // >= 0. Default: 2000
  int holdout_rows = 1000;           // >= 1. Default: 1000
  // csv: header line; feature_columns default to all but the target
  std::string train_path;            // csv/npy: training rows (npy: <path>.x.npy/<path>.y.npy or x_path/y_path)
  std::string pool_path;             // optional candidate pool (same columns)
  std::string holdout_path;          // optional; else holdout_fraction of train
  std::vector<std::string> feature_columns;  // Default: every column but the targets
  // csv: REQUIRED, the target columns: the file's "target_column" (one target) or
  // "target_columns" (one or more, regression: the members predict them all). npy: y's
  // columns are the targets (TargetCountProblem below).
  std::vector<std::string> target_columns;
  std::string x_path, y_path;        // npy: REQUIRED (float32/float64, C order)
  std::string pool_x_path, pool_y_path;
  double holdout_fraction = 0.2;     // used when no holdout file. (0,1). Default: 0.2
};

struct MutationSpec {
  // none | append_from_pool | query_by_committee | command. Default: none
  MutationPolicyKind policy = MutationPolicyKind::kNone;
  int k = 0;                     // rows per round, >= 1 for pool policies. Default: 0
  std::vector<std::string> argv; // command: program and arguments, no shell
  double timeout_s = 60.0;       // command: > 0. Default: 60
  // query_by_committee: how a pool row's disagreement is scored (common/scoring/committee_score.h):
  // std (regression, and classification: mean over classes of the probabilities' std) |
  // entropy | bald (classification) | epistemic (gaussian_nll members: the std of their means).
  // Default (set by the config reader, from the task): std for regression, bald for
  // classification, epistemic for gaussian_nll
  CommitteeScore score = CommitteeScore::kStd;
  // query_by_committee: the k rows with the highest score (top), or k rows both uncertain and
  // spread out in the standardised input features (diverse; orchestrator/run/diverse_batch.h).
  // Default: top
  BatchMode batch = BatchMode::kTop;
};

struct RoundsSpec {
  int count = 1;                              // >= 1. Default: 1
  // stop when the ensemble's holdout error is below this: RMSE (regression), the fraction
  // misclassified (classification). Default: none
  std::optional<double> stop_below_error;
};

// When a worker process is replaced by a fresh one (a clean exit after it reported, then a
// respawn). Recycling never loses, repeats or changes a task; it bounds memory growth of
// long runs however libraries behave. A limit of 0 is off.
struct RecycleSpec {
  int after_tasks = 1000;             // tasks per worker process, >= 0. Default: 1000
  double rss_mb = 0;                  // resident set after a task, MiB, >= 0. Default: 0 (off)
  double rss_growth_pct = 25;         // RSS above the RSS after the process's first task, %. Default: 25
  double gpu_reserved_mb = 0;         // CUDA caching allocator reserve after a task, MiB. Default: 0 (off)
};

// How operators and tools reach a running daemon.
struct ServiceSpec {
  // Unix socket for ensemblectl (0600). "" = $RUNTIME_DIRECTORY/<run_name>.sock under systemd,
  // else <state_dir>/control.sock. Default: ""
  std::string control_socket;
  int http_port = 0;                    // Prometheus /metrics and the status page; 0 = off. Default: 0
  std::string http_bind = "127.0.0.1";  // loopback unless you mean it. Default: "127.0.0.1"
  std::string log_file;                 // optional rotating log file (10 MiB x 3). Default: "" (stderr only)
};

struct Config {
  std::string run_name = "ensembled";    // [A-Za-z0-9_.-]{1,64}. Default: "ensembled"
  std::string state_dir;                 // REQUIRED (relative paths: to the config file's folder)
  uint64_t run_seed = 0;                 // Default: 0
  // regression | classification (the target column holds class labels: common/config/class_list.h).
  // Default: regression
  TaskKind task = TaskKind::kRegression;
  ResourcesSpec resources;
  DataSpec data;
  std::vector<MemberSpec> members;       // resolved: explicit list + count x variants
  MutationSpec mutation;
  RoundsSpec rounds;
  RecycleSpec recycle;
  ServiceSpec service;
  double heartbeat_timeout_s = 60.0;     // > 0. Default: 60
  int max_task_attempts = 3;             // >= 1. Default: 3
  int min_members = 0;                   // members that must succeed for a round to commit; 0 = all. Default: 0
  double stop_timeout_s = 300.0;         // SIGTERM: how long running tasks may finish, > 0. Default: 300
  // Members per fused pack (orchestrator/run/pack_plan.h): 0 = "auto" (compatible members
  // together, at most kAutoPackMaxMembers = 512), 1 = no packing. Default: "auto"
  int pack_size = 0;
  bool save_checkpoints = true;          // false: no checkpoint.pt (predict/verify then unavailable). Default: true
  // Where a fused pack's members' results go (common/state/pack_results.h): true ("packs"), one pack
  // directory of a few files for all its members; false ("members"), a directory of six files
  // a member (for scripts of a user's own that open member directories). Members trained
  // alone always have their directory. Default: "packs"
  bool pack_results = true;
  // Which committed rounds keep their predictions and checkpoints (common/state/retention.h).
  // Default: every round
  RetentionSpec retention;
};

// Parses and validates text (JSON with // and /* */ comments). `origin` names the source
// in messages (a file path). `base_dir` resolves relative paths. On failure the Status
// message lists every error, one "<pointer>: <message>" per line.
StatusOr<Config> ParseConfig(const std::string& text, const std::string& origin,
                             const std::string& base_dir);
// Reads and parses a file; a missing/unreadable file names the path.
StatusOr<Config> LoadConfigFile(const std::string& path);
// Every error found, each as {pointer, message}; empty when valid.
struct ConfigError {
  std::string pointer;
  std::string message;
};
std::vector<ConfigError> ValidateConfigText(const std::string& text, const std::string& base_dir,
                                            Config* out);

// Why a run of this config cannot train `targets` regression targets at once, or "" when it
// can: several targets are for regression members that ensembled trains (no classification,
// no gaussian_nll head, no command member). Says where the targets come from as `source`.
std::string TargetCountProblem(const Config& c, int targets, const std::string& source);

// Serialisation of one member (used in task messages and checkpoints). Options are written
// by their names in member_options.h; MemberFromJson rejects an unknown name.
nlohmann::json MemberToJson(const MemberSpec& m);
Status MemberFromJson(const nlohmann::json& j, MemberSpec* out);

// The normalised config: every key of the file format with its value after defaults, member
// expansion (members as an explicit "list") and path resolution. Valid config text itself;
// equal configs give equal JSON. Recorded at run start (orchestrator/run/config_change.h).
nlohmann::json ConfigToJson(const Config& c);

}  // namespace ens
