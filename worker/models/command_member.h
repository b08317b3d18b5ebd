// CommandMember: a member whose model is the user's own program (model.kind "command").
//
// The worker that takes the task runs the program as its child, in the slot's environment
// (CUDA_VISIBLE_DEVICES and the thread limits it inherits), plus the ENSEMBLED_* variables
// (README "Command members" has the table). Contract with the program:
//  - Inputs are plain .npy files (float32, C order): the member's training and validation
//    rows, gathered from the shared table in the member's split order and written to
//    <dir>/input/ (removed once the program is done), and the run's holdout and pool features
//    (data/holdout_x.npy, data/pool_x.npy, written once per run by the supervisor). Copies, not
//    views: a member's rows are a seeded subset (a bootstrap repeats rows), which a view of the
//    table could not express without an index file the program would have to apply itself;
//    and the program can never write into the table every other member reads. The cost is
//    O(member rows x features) of file writes per task.
//  - Outputs go to <dir>/model/ (ENSEMBLED_OUTPUT_DIR, published with the member):
//    holdout_pred.npy and pool_pred.npy, float32 or float64, shape (rows,) or (rows, 1), every
//    value finite; optionally metrics.json (an object, kept under "command" in the member's
//    metrics), history.jsonl (one JSON object per line) and any model files.
//  - The program runs in its own process group with PR_SET_PDEATHSIG: the timeout, a stop or
//    a lost worker kill it. stdout and stderr go to <dir>/command.log (at most
//    kCommandLogBytes; the rest is counted and dropped) and, tagged with the member, to the
//    worker's log (the first kCommandLogLines lines).
//  - When it ends, for any reason, its process group is killed, and every process it left
//    behind that was reparented to the worker (a subreaper) is killed and reaped: nothing it
//    started survives the task.
//  - Outcome: exit 0 with valid outputs is success; exit 78 is a permanent failure; any
//    other exit, a signal or the timeout is transient (retried up to max_task_attempts); a
//    program that cannot be executed, or whose outputs are missing, misshapen or non-finite,
//    is a permanent failure whose message names the program or the file.
// No libtorch here. Not thread-safe (one task at a time per worker).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/state/dataset_segment.h"
#include "common/data/member_rows.h"
#include "common/ipc/protocol.h"
#include "common/base/status.h"

namespace ens {

inline constexpr uint64_t kCommandLogBytes = uint64_t{16} << 20;
inline constexpr int kCommandLogLines = 200;

struct CommandMemberJob {
  const TaskSpec* task = nullptr;
  const DatasetView* train = nullptr;    // the generation's table (features, target last)
  const DatasetView* holdout = nullptr;  // for the member's holdout metrics
  const MemberRows* split = nullptr;
  std::string data_dir;                  // where holdout_x.npy and pool_x.npy are
  uint64_t pool_rows = 0;
  std::string dir;                       // the member's <out_dir>.tmp, already created
  // Called at least every 200 ms while the program runs (heartbeats). May be empty.
  std::function<void()> on_wait;
  // Lines of the program's output for the worker's log, already tagged. Empty: spdlog.
  std::function<void(const std::string&)> on_log;
};

struct CommandMemberResult {
  Status status;
  bool permanent = false;
  nlohmann::json metrics;              // holdout_rmse, holdout_mae, command_seconds, "command": {...}
  std::vector<nlohmann::json> history;  // history.jsonl's objects
  std::vector<float> holdout_pred, pool_pred;
};

CommandMemberResult RunCommandMember(const CommandMemberJob& job);

// The ENSEMBLED_* variables the program gets (name, value), in the README table's order.
std::vector<std::pair<std::string, std::string>> CommandMemberEnvironment(const CommandMemberJob& job);

}  // namespace ens
