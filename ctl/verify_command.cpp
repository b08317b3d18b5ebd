// ensemblectl verify: retrains recorded members alone, each in a fresh ensemble-worker
// process, from the run's recorded dataset generation, and compares every checkpoint tensor
// bit for bit (ensemble-worker compare) and the predictions byte for byte.
#include <unistd.h>

#include <algorithm>

#include <cstdio>
#include <filesystem>
#include <iostream>

#include "common/atomic_file.h"
#include "common/exit_codes.h"
#include "common/journal.h"
#include "common/logging.h"
#include "common/protocol.h"
#include "common/run_layout.h"
#include "common/seed.h"
#include "ctl/commands.h"

namespace ens::ctl {
namespace {

using json = nlohmann::json;

std::string WorkerBinary() {
  const char* env = std::getenv("ENSEMBLED_WORKER");
  return env ? env : SelfDir() + "/ensemble-worker";
}

json ReadMemberRecord(const std::string& path) {
  auto text = ReadFile(path);
  return text.ok() ? json::parse(*text, nullptr, false) : json();
}

// Rebuilds the task a member was trained with from its member.json. A pack-mate that failed
// (no directory) is rebuilt from `verified`'s record of its pack (member.json "pack_members").
StatusOr<TaskSpec> RecordedTask(const RunLayout& layout, int round, const std::string& name,
                                const std::string& verified, const std::string& out_dir) {
  std::string path = layout.MemberDir(round, name) + "/member.json";
  json m = ReadMemberRecord(path);
  std::string verified_path = layout.MemberDir(round, verified) + "/member.json";
  json rec = ReadMemberRecord(verified_path);
  // Only a missing record: a corrupt one is reported as such below.
  if (!PathExists(path) && name != verified && rec.is_object() && rec.contains("pack_members") &&
      rec["pack_members"].is_array()) {
    for (const auto& pm : rec["pack_members"])
      if (pm.is_object() && pm.value("name", "") == name) {
        m = rec;  // the pack's shared fields (generation, rows, ...) with the mate's own
        m["spec"] = pm.value("spec", json());
        m["index"] = pm.value("index", 0);
        m["seed"] = pm.value("seed", uint64_t{0});
        path = verified_path + " (pack_members: " + name + ")";
      }
  }
  if (m.is_null()) return Status::NotFound(path + ": missing");
  TaskSpec t;
  if (!m.is_object() || !m.contains("spec")) return Status::Corruption(path + ": not a member record");
  Status s = MemberFromJson(m["spec"], &t.member);
  if (!s.ok()) return Status::Corruption(path + ": " + s.message());
  t.task_id = "verify-r" + std::to_string(round) + "-" + name;
  t.round = round;
  t.member_index = m.value("index", 0);
  t.seed = m.value("seed", uint64_t{0});
  t.generation = m.value("generation", uint64_t{0});
  t.rows = m.value("rows", uint64_t{0});
  t.excluded_file = m.value("excluded_file", "");
  t.threads = m.value("threads", 1);
  t.data_dir = std::filesystem::absolute(layout.DataDir()).string();
  t.out_dir = out_dir;
  return t;
}

// The members `name` was trained with, in pack order ([name] when it was not packed).
std::vector<std::string> PackOf(const RunLayout& layout, int round, const std::string& name) {
  auto text = ReadFile(layout.MemberDir(round, name) + "/member.json");
  json m = text.ok() ? json::parse(*text, nullptr, false) : json();
  std::vector<std::string> out;
  if (m.is_object() && m.contains("pack") && m["pack"].is_array())
    for (const auto& n : m["pack"])
      if (n.is_string()) out.push_back(n.get<std::string>());
  if (out.empty()) out.push_back(name);
  return out;
}

// "equal", or what differs first.
std::string CompareMember(const std::string& recorded, const std::string& fresh, const std::string& scratch,
                          bool* equal) {
  *equal = false;
  std::string out_file = scratch + "/compare.json";
  (void)RunAndWait({WorkerBinary(), "compare", recorded + "/checkpoint.pt", fresh + "/checkpoint.pt"}, out_file);
  auto text = ReadFile(out_file);
  json r = text.ok() ? json::parse(*text, nullptr, false) : json();
  if (r.is_discarded() || !r.is_object() || !r.contains("equal")) return "cannot compare checkpoints";
  if (!r["equal"].get<bool>()) {
    std::string diff = r["max_abs_diff"].is_number() ? std::to_string(r["max_abs_diff"].get<double>()) : "shape";
    return "tensor " + r.value("tensor", "?") + " differs (max abs diff " + diff + ")";
  }
  for (const char* f : {"holdout_pred.f32", "pool_pred.f32"}) {
    auto a = ReadFile(recorded + "/" + f), b = ReadFile(fresh + "/" + f);
    if (!a.ok() || !b.ok() || *a != *b) return std::string(f) + " differs";
  }
  *equal = true;
  return "equal";
}

}  // namespace

int Verify(const std::string& state_dir, int round, const std::string& member, int sample) {
  RunLayout layout(state_dir);
  auto recs = ReadJournal(layout.JournalFile());
  if (!recs.ok()) {
    std::cerr << "ensemblectl verify: " << recs.status().message() << "\n";
    return exit_code::kPermanentFailure;
  }
  RunProgress p = ReplayJournal(*recs);
  if (p.committed.empty()) {
    std::cerr << "ensemblectl verify: no round of " << state_dir << " is committed yet\n";
    return exit_code::kPermanentFailure;
  }
  if (round < 0) round = p.committed.back().value("round", 0);
  if (round >= static_cast<int>(p.committed.size())) {
    std::cerr << "ensemblectl verify: round " << round << " is not committed\n";
    return exit_code::kUsage;
  }
  auto summary = ReadFile(layout.SummaryFile(round));
  if (!summary.ok()) {
    std::cerr << "ensemblectl verify: " << summary.status().message() << "\n";
    return exit_code::kPermanentFailure;
  }
  std::vector<std::string> names;
  json summary_json = json::parse(*summary, nullptr, false);
  if (summary_json.is_discarded() || !summary_json["members"].is_array()) {
    std::cerr << "ensemblectl verify: " << layout.SummaryFile(round) << ": not a round summary\n";
    return exit_code::kPermanentFailure;
  }
  for (const auto& m : summary_json["members"]) names.push_back(m.value("member", ""));
  if (!member.empty()) {
    if (std::find(names.begin(), names.end(), member) == names.end()) {
      std::cerr << "ensemblectl verify: round " << round << " has no member '" << member << "'\n";
      return exit_code::kUsage;
    }
    names = {member};
  } else if (sample > 0 && sample < static_cast<int>(names.size())) {
    SeededRng rng(SplitMix64(static_cast<uint64_t>(round)));  // a fixed, repeatable sample
    for (size_t i = 0; i < static_cast<size_t>(sample); ++i) std::swap(names[i], names[i + rng.Below(names.size() - i)]);
    names.resize(static_cast<size_t>(sample));
  }
  char tmpl[] = "/tmp/ensemblectl-verify-XXXXXX";
  if (!::mkdtemp(tmpl)) {
    std::perror("mkdtemp");
    return exit_code::kTransientFailure;
  }
  std::string scratch = tmpl;
  ::setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", 1);
  int mismatches = 0;
  std::printf("%-10s %6s  %s\n", "member", "round", "result");
  for (const auto& name : names) {
    // A packed member is retrained with its whole pack (its bits depend on the pack).
    std::vector<std::string> group = PackOf(layout, round, name);
    std::string result;
    bool equal = false;
    std::vector<std::string> argv = {WorkerBinary(), "train-one"};
    if (group.size() > 1) argv.push_back("--pack");
    for (const auto& g : group) {
      auto task = RecordedTask(layout, round, g, name, scratch + "/" + name + "/" + g);
      if (!task.ok()) {
        result = task.status().message();
        break;
      }
      ::setenv("OMP_NUM_THREADS", std::to_string(task->threads).c_str(), 1);
      std::string task_file = scratch + "/" + name + "-" + g + ".task.json";
      (void)WriteFileAtomic(task_file, TaskToJson(*task).dump());
      argv.insert(argv.end(), {"--task", task_file});
    }
    if (result.empty()) {
      int rc = RunAndWait(argv, scratch + "/train.out");
      // A failing pack-mate (it failed in the run too) makes the exit non-zero; the verified
      // member is still comparable when its directory was written.
      const std::string fresh = scratch + "/" + name + "/" + name;
      bool written = PathExists(fresh + "/member.json");
      result = rc == 0 || (group.size() > 1 && written)
                   ? CompareMember(layout.MemberDir(round, name), fresh, scratch, &equal)
                   : "retraining failed (ensemble-worker exit " + std::to_string(rc) + ")";
    }
    mismatches += !equal;
    std::printf("%-10s %6d  %s%s\n", name.c_str(), round, result.c_str(),
                group.size() > 1 ? (" (pack of " + std::to_string(group.size()) + ")").c_str() : "");
    std::fflush(stdout);
  }
  (void)RemoveTree(scratch);
  std::printf("%zu member(s) checked, %d mismatch(es)\n", names.size(), mismatches);
  return mismatches ? exit_code::kVerifyMismatch : exit_code::kOk;
}

}  // namespace ens::ctl
