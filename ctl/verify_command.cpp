// ensemblectl verify: retrains recorded members alone, each in a fresh ensemble-worker
// process, from the run's recorded dataset generation, and compares every checkpoint tensor
// bit for bit (ensemble-worker compare) and the predictions byte for byte. A command member
// reruns its program and has its predictions compared. A member trained
// in a fused pack is retrained alone too: the worker's training is pack-invariant, so alone
// it must give the same bits.
#include <unistd.h>

#include <algorithm>

#include <cstdio>
#include <filesystem>
#include <iostream>

#include "common/base/atomic_file.h"
#include "common/base/cublas_workspace.h"
#include "common/base/exit_codes.h"
#include "common/state/member_view.h"
#include "common/ipc/protocol.h"
#include "common/state/run_layout.h"
#include "common/base/seed.h"
#include "ctl/commands.h"

namespace ens::ctl {
namespace {

using json = nlohmann::json;

// A member file (member_view.h: its own, or its record in its pack) or any other JSON file.
json ReadJson(const std::string& path) {
  auto text = ReadMemberFile(path);
  return text.ok() ? json::parse(*text, nullptr, false) : json();
}

// The task of an old member.json (written before it recorded "task"), field by field.
Status TaskFromFields(const json& m, const std::string& path, TaskSpec* t) {
  if (!m.contains("spec")) return Status::Corruption(path + ": not a member record");
  Status s = MemberFromJson(m["spec"], &t->member);
  if (!s.ok()) return Status::Corruption(path + ": " + s.message());
  t->member_index = m.value("index", 0);
  t->seed = m.value("seed", uint64_t{0});
  t->generation = m.value("generation", uint64_t{0});
  t->rows = m.value("rows", uint64_t{0});
  t->excluded_file = m.value("excluded_file", "");
  t->threads = m.value("threads", 1);
  return Status::Ok();
}

// The task `name` of `round` was trained with, from its member.json ("task": the exact
// TaskSpec; older records: rebuilt from their fields), set up to retrain it into `out_dir`.
StatusOr<TaskSpec> RecordedTask(const RunLayout& layout, int round, const std::string& name,
                                const std::string& out_dir) {
  const std::string path = MemberFiles(layout.MemberDir(round, name)).Member();
  if (!MemberFileExists(path)) return Status::NotFound(path + ": missing");
  json m = ReadJson(path);
  if (!m.is_object()) return Status::Corruption(path + ": not a member record");
  TaskSpec t;
  if (m.contains("task")) {
    Status s = TaskOfMemberRecord(m, &t);
    if (!s.ok()) return Status::Corruption(path + ": " + s.message());
    if (t.member.name != name || t.round != round)
      return Status::Corruption(path + ": its task is member " + t.member.name + " of round " +
                                std::to_string(t.round) + ", not " + name + " of round " + std::to_string(round));
  } else {
    Status s = TaskFromFields(m, path, &t);
    if (!s.ok()) return s;
    t.round = round;
  }
  t.task_id = "verify-r" + std::to_string(round) + "-" + name;
  t.attempt = 1;
  t.publish = true;
  // A checkpoint is needed to compare tensors; saving one does not change the training.
  t.save_checkpoint = true;
  t.out_dir = out_dir;
  // The run's data as it is now, so a moved or copied state directory verifies too. The
  // supervisor writes the excluded-rows file into the data directory, so it moves with it.
  const std::string data_dir = std::filesystem::absolute(layout.DataDir()).string();
  t.data_dir = data_dir;
  if (!t.excluded_file.empty())
    t.excluded_file = data_dir + "/" + std::filesystem::path(t.excluded_file).filename().string();
  if (!t.warm_from.empty() && round > 0) {
    t.warm_from = MemberFiles(std::filesystem::absolute(layout.MemberDir(round - 1, name)).string()).TrainState();
    if (!MemberFileExists(t.warm_from))
      return Status::NotFound(t.warm_from + ": missing, and member " + name + " of round " + std::to_string(round) +
                              " warm-started from it (retention removes it once round " + std::to_string(round) +
                              " is not kept; pinning a round keeps its predecessor's train state only from then on)");
  }
  return t;
}

// What verifying one member found, and the line that says so.
struct Verdict {
  enum Kind { kEqual, kDiffers, kNotCompared } kind = kNotCompared;
  std::string text;
};

// "" for a member trained alone; else " (trained in a pack of N, <pack file>)" from the pack
// file member.json refers to (older records: metrics' pack_size), saying when that file is
// missing or does not list the member; for one that differs and was recorded before
// pack-invariant training (no "task" in member.json), why it may.
std::string PackNote(const std::string& member_dir, const std::string& name, Verdict::Kind kind) {
  json member = ReadJson(MemberFiles(member_dir).Member());
  json metrics = ReadJson(MemberFiles(member_dir).Metrics());
  std::string note;
  if (member.is_object() && member.contains("pack") && member["pack"].is_object()) {
    const json& ref = member["pack"];
    const std::string file = ref.value("file", "");
    // Shown relative to the round directory (the file's own path is relative to the member's).
    const std::string shown = file.rfind("../../", 0) == 0 ? file.substr(6) : file;
    note = " (trained in a pack of " + std::to_string(ref.value("size", 0)) + ", " + shown;
    // Lexically: a packed member has no directory to walk up from.
    json pack = ReadJson(std::filesystem::path(member_dir + "/" + file).lexically_normal().string());
    bool listed = false;
    if (pack.is_object() && pack.contains("members") && pack["members"].is_array())
      for (const auto& m : pack["members"]) listed = listed || (m.is_object() && m.value("member", "") == name);
    if (!pack.is_object()) note += ": missing or unreadable";
    else if (!listed) note += ": does not list this member";
  } else {
    int size = metrics.is_object() ? metrics.value("pack_size", 1) : 1;
    if (size <= 1) return "";
    note = " (trained in a pack of " + std::to_string(size);
  }
  if (kind == Verdict::kDiffers && member.is_object() && !member.contains("task"))
    note += " by an older worker whose packed bits depended on the pack";
  return note + ")";
}

// Whether the member's recorded spec is a command member (model kind "command").
bool IsCommandMember(const std::string& member_dir) {
  json m = ReadJson(MemberFiles(member_dir).Member());
  MemberSpec spec;
  return m.is_object() && m.contains("spec") && MemberFromJson(m["spec"], &spec).ok() &&
         TraitsOf(spec.model.kind).program;
}

// The predictions byte for byte.
Verdict ComparePredictions(const std::string& recorded, const std::string& fresh) {
  const MemberFiles r(recorded), f(fresh);
  for (auto [a_path, b_path] : {std::pair{r.HoldoutPred(), f.HoldoutPred()}, std::pair{r.PoolPred(), f.PoolPred()}}) {
    auto a = ReadMemberFile(a_path), b = ReadMemberFile(b_path);
    if (!a.ok() || !b.ok() || *a != *b)
      return {Verdict::kDiffers, a_path.substr(a_path.rfind('/') + 1) + " differs"};
  }
  return {Verdict::kEqual, "equal"};
}

// Checkpoint tensors bit for bit, then the predictions byte for byte. A command member has
// no checkpoint of ours: its predictions are what is compared (whether the program gives the
// same bits again is the program's business).
Verdict CompareMember(const std::string& recorded, const std::string& fresh, const std::string& scratch) {
  if (IsCommandMember(recorded)) {
    Verdict v = ComparePredictions(recorded, fresh);
    if (v.kind == Verdict::kEqual) v.text = "equal (command member: predictions compared)";
    return v;
  }
  std::string out_file = scratch + "/compare.json";
  // `compare` exits non-zero when the checkpoints differ, too: its JSON answer is what counts.
  // Without one, its exit status says why.
  const int code =
      RunAndWait({WorkerBinary(), "compare", MemberFiles(recorded).StoredCheckpoint(), MemberFiles(fresh).StoredCheckpoint()},
                 out_file);
  json r = ReadJson(out_file);
  if (r.is_discarded() || !r.is_object() || !r.contains("equal"))
    return {Verdict::kNotCompared, "cannot compare checkpoints: ensemble-worker compare " +
                                       (code < 0 ? "was killed by signal " + std::to_string(-code)
                                                 : "exited " + std::to_string(code)) + " without an answer"};
  if (!r["equal"].get<bool>()) {
    std::string diff = r["max_abs_diff"].is_number() ? std::to_string(r["max_abs_diff"].get<double>()) : "shape";
    return {Verdict::kDiffers, "tensor " + r.value("tensor", "?") + " differs (max abs diff " + diff + ")"};
  }
  Verdict v = ComparePredictions(recorded, fresh);
  const json blocked = r.value("blocked", json());
  if (v.kind == Verdict::kDiffers && blocked.is_array() && blocked.size() == 2 && blocked[0] == false &&
      blocked[1] == true)
    v.text += " while every tensor is equal: the recorded checkpoint predates batch-independent predictions "
              "(its forward did not run in fixed blocks, so its predictions depended on the batch's shape)";
  return v;
}

// Why a member that differs may differ, when its records say: it was trained on another device
// than the one it was retrained on (bits are promised per device model), or in a pack on CUDA
// (packed = alone is promised on the CPU only). "" when they do not, and "" for a member the
// lane kernel trained both times: its bits are promised on every device and in every pack.
std::string DeviceNote(const std::string& recorded, const std::string& fresh) {
  json a = ReadJson(MemberFiles(recorded).Metrics()), b = ReadJson(MemberFiles(fresh).Metrics());
  const std::string was = a.is_object() ? a.value("device", "") : "", now = b.is_object() ? b.value("device", "") : "";
  if (a.is_object() && b.is_object() && a.value("engine", "") == "lanes" && b.value("engine", "") == "lanes") return "";
  if (!was.empty() && !now.empty() && was != now)
    return "; trained on " + was + ", retrained on " + now + ": bits are promised on one device model only";
  if (was == "cuda" && a.value("pack_size", 1) > 1)
    return "; trained in a pack on cuda: packed = alone is promised on the CPU only (ARCHITECTURE.md)";
  return "";
}

// Retrains `name` alone (one train-one task) under `scratch` and compares it with the
// recorded member.
Verdict VerifyMember(const RunLayout& layout, int round, const std::string& name, const std::string& scratch) {
  const std::string recorded = layout.MemberDir(round, name), fresh = scratch + "/" + name;
  // Checked first: retraining is the slow part, and without a checkpoint nothing compares.
  if (!MemberFileExists(MemberFiles(recorded).StoredCheckpoint()) && !IsCommandMember(recorded))
    return {Verdict::kNotCompared,
            recorded + ": no checkpoint (checkpoints are written only with save_checkpoints true)"};
  auto task = RecordedTask(layout, round, name, fresh);
  if (!task.ok()) return {Verdict::kNotCompared, task.status().message()};
  const std::string task_file = scratch + "/" + name + ".task.json";
  Status s = WriteFileAtomic(task_file, TaskToJson(*task).dump());
  if (!s.ok()) return {Verdict::kNotCompared, s.message()};
  ::setenv("OMP_NUM_THREADS", std::to_string(task->threads).c_str(), 1);
  int rc = RunAndWait({WorkerBinary(), "train-one", "--task", task_file}, scratch + "/train.out");
  if (rc != 0) return {Verdict::kNotCompared, "retraining failed (ensemble-worker exit " + std::to_string(rc) + ")"};
  Verdict v = CompareMember(recorded, fresh, scratch);
  if (v.kind == Verdict::kDiffers) v.text += DeviceNote(recorded, fresh);
  return v;
}

// The members to verify: `member` alone, else `sample` of them chosen repeatably, else all.
std::vector<std::string> Selected(std::vector<std::string> names, int round, int sample) {
  if (sample > 0 && sample < static_cast<int>(names.size())) {
    SeededRng rng(SplitMix64(static_cast<uint64_t>(round)));  // a fixed, repeatable sample
    for (size_t i = 0; i < static_cast<size_t>(sample); ++i) std::swap(names[i], names[i + rng.Below(names.size() - i)]);
    names.resize(static_cast<size_t>(sample));
  }
  return names;
}

}  // namespace

int Verify(const std::string& state_dir, int round, const std::string& member, int sample) {
  auto committed = FindCommittedRound(state_dir, round);
  if (!committed.ok()) {
    std::cerr << "ensemblectl verify: " << committed.status().message() << "\n";
    return RoundErrorExitCode(committed.status());
  }
  round = committed->round;
  std::vector<std::string> names = committed->members;
  if (!member.empty()) {
    if (std::find(names.begin(), names.end(), member) == names.end()) {
      std::cerr << "ensemblectl verify: round " << round << " has no member '" << member << "'\n";
      return exit_code::kUsage;
    }
    names = {member};
  } else {
    names = Selected(std::move(names), round, sample);
  }
  char tmpl[] = "/tmp/ensemblectl-verify-XXXXXX";
  if (!::mkdtemp(tmpl)) {
    std::perror("mkdtemp");
    return exit_code::kTransientFailure;
  }
  std::string scratch = tmpl;
  ::setenv(kCublasWorkspaceVariable, kCublasWorkspaceConfig, 1);
  RunLayout layout(state_dir);
  int mismatches = 0;
  std::printf("%-10s %6s  %s\n", "member", "round", "result");
  for (const auto& name : names) {
    Verdict v = VerifyMember(layout, round, name, scratch);
    mismatches += v.kind != Verdict::kEqual;
    std::printf("%-10s %6d  %s%s\n", name.c_str(), round, v.text.c_str(),
                PackNote(layout.MemberDir(round, name), name, v.kind).c_str());
    std::fflush(stdout);
  }
  (void)RemoveTree(scratch);  // best effort: a leftover scratch dir does not change the verdicts
  std::printf("%zu member(s) checked, %d mismatch(es)\n", names.size(), mismatches);
  return mismatches ? exit_code::kVerifyMismatch : exit_code::kOk;
}

}  // namespace ens::ctl
