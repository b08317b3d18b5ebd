// Protocol: the messages between the supervisor and its workers.
//
// Every message is one JSON object, at most kMaxMessageBytes, with
//   "v": kProtocolVersion, "type": one of the names below, "slot": worker slot (int >= 0).
// Worker -> supervisor (over the worker's own WorkerChannel, common/ipc/worker_channel.h):
//   ready     {pid, rss_kb}                      after the worker mapped nothing yet but is up;
//                                                rss_kb optional (default 0): its RSS once up
//   heartbeat {pid, task_id, epoch, rss_kb, phase, gpu_reserved_kb}  in every phase of a task
//                                                (setup, training, evaluating, predicting, writing),
//                                                at most every --heartbeat-ms; phase optional,
//                                                default training; gpu_reserved_kb optional (a GPU
//                                                worker's own allocator reservation), default 0
//   done      {pid, task_id, metrics{...}, recycle}          results are on disk before this is sent
//   failed    {pid, task_id, error, permanent, recycle}      permanent: retrying cannot help
//   (recycle: optional bool, default false: this worker exits 0 right after the report)
//   unusable  {pid, error}                       instead of ready: this worker cannot work where it
//                                                was placed (its GPU is not what CUDA sees), and a
//                                                new process would not either; it exits 78 next
// Supervisor -> worker (the same channel):
//   task      {task}                             see TaskSpec
//   pack      {pack_file}                        a fused pack: the file holds {"tasks": [TaskSpec...]}
//                                                (too big for one message); one done/failed per task
//   shutdown  {}                                 finish nothing more, exit 0
// Decode validates everything; a message that fails is rejected with the reason and
// never acted on. Pure functions. Thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/config/config.h"
#include "common/base/status.h"

namespace ens {

inline constexpr int kProtocolVersion = 1;
inline constexpr size_t kMaxMessageBytes = 8192;

// One member training task: everything a worker needs, nothing it must look up.
struct TaskSpec {
  std::string task_id;       // "r<round>-<member name>"
  int round = 0;
  int member_index = 0;
  uint64_t seed = 0;         // MemberSeed(run_seed, member_index, round)
  uint64_t generation = 0;   // dataset generation the task trains on
  uint64_t rows = 0;         // train rows of that generation (a prefix of the segment)
  std::string data_dir;      // where train.bin / holdout.bin / pool.bin live
  std::string out_dir;       // final member directory (written via <out_dir>.tmp + rename)
  std::string excluded_file; // "" or raw uint64 row ids dropped from this generation
  int attempt = 1;
  int threads = 1;           // intra-op threads for this task
  bool save_checkpoint = true;  // false: no checkpoint.pt (config save_checkpoints)
  // false: the member is already journaled and trains again only because its pack is re-run
  // (a packed member's bits depend on the whole pack); the worker writes nothing for it and
  // leaves its member directory untouched. Optional on the wire, default true.
  bool publish = true;
  // 0: regression (one output); else classification into this many classes (class_list.h).
  // Optional on the wire, default 0.
  int classes = 0;
  // "" or the train_state.pt of this member's previous round that it starts from (warm_start:
  // its weights and optimizer state). Optional on the wire, default "".
  std::string warm_from;
  // A pack of K > 1 writes its members' results as one pack directory (config results_layout
  // "packs": common/state/pack_results.h) instead of a member directory each. Read from the pack's
  // first task. Optional on the wire, default false (a directory a member).
  bool pack_results = false;
  // true: a member the lane kernel takes (lane_fit.h) predicts with the lane kernel's forward
  // (model.h UseLaneForward); false: through its layers' GEMMs, as every member did before
  // 2026-12-08. The supervisor sets it on every task it makes; a member.json recorded before
  // has none, so verify retrains such a member to the predictions it recorded. Optional on the
  // wire, default false.
  bool lane_predictions = false;
  MemberSpec member;
};

// What a busy worker is doing; its heartbeats say so. Each phase beats at least once per
// member or batch it handles, so a long phase is never silent (and a hung one is).
enum class TaskPhase { kSetup, kTraining, kEvaluating, kPredicting, kWriting };
inline constexpr std::array<std::string_view, 5> kTaskPhaseNames{"setup", "training", "evaluating", "predicting",
                                                                 "writing"};
constexpr std::span<const std::string_view> NamesOf(TaskPhase) { return kTaskPhaseNames; }

enum class MessageType { kReady, kHeartbeat, kDone, kFailed, kTask, kPack, kShutdown, kUnusable };
const char* MessageTypeName(MessageType t);

struct Message {
  MessageType type = MessageType::kReady;
  int slot = 0;
  int64_t pid = 0;
  std::string task_id;       // heartbeat, done, failed
  int epoch = 0;             // heartbeat
  int64_t rss_kb = 0;        // heartbeat
  int64_t gpu_reserved_kb = 0;  // heartbeat: the worker's CUDA caching allocator reservation
  TaskPhase phase = TaskPhase::kTraining;  // heartbeat
  nlohmann::json metrics;    // done: object
  std::string error;         // failed, unusable
  bool permanent = false;    // failed
  bool recycle = false;      // done, failed: the worker exits after this report
  std::string recycle_reason;  // done, failed: why (optional, for logs)
  TaskSpec task;             // task
  std::string pack_file;     // pack
};

std::string EncodeMessage(const Message& m);
// Rejects: oversize, non-JSON, wrong version, unknown type, missing/mistyped fields.
StatusOr<Message> DecodeMessage(std::string_view bytes);

nlohmann::json TaskToJson(const TaskSpec& t);
Status TaskFromJson(const nlohmann::json& j, TaskSpec* out);
// A member record's (member.json) "task" and "spec": the task without its member, and the
// member, each written once. TaskOfMemberRecord reads it back, also from records written
// before 2026-12-05, whose "task" carries the member too. The record must have a "task".
void SetMemberRecordTask(const TaskSpec& t, nlohmann::json* record);
Status TaskOfMemberRecord(const nlohmann::json& record, TaskSpec* out);

// A pack file: {"specs": [member spec without its name...], "tasks": [task...]}, each task a
// TaskSpec without its member, plus "member_name" and "member_spec" (its spec's index in
// "specs"): a pack of thousands of members writes and validates its few distinct specs once.
// A task holding its own "member" (pack files before 2026-12-07) is read too. Every task and
// spec is validated; errors name the file and the JSON pointer.
std::string PackFileText(const std::vector<TaskSpec>& tasks);
StatusOr<std::vector<TaskSpec>> ParsePackFile(const std::string& text, const std::string& path);

}  // namespace ens
