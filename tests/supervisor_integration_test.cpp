// End-to-end: the real ensembled, ensemble-worker and ensemblectl binaries on a tiny run.
#include <catch2/catch.hpp>

#include <chrono>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/state/journal.h"
#include "common/state/run_layout.h"
#include "support/process_harness.h"

namespace ens {
namespace {

using json = nlohmann::json;
using namespace ens::testing;

std::string TinyConfig(const std::string& state_dir, const std::string& extra_mutation = "") {
  return R"({
    // two CPU workers, four members, two rounds, tiny model
    "run_name": "itest", "state_dir": ")" + state_dir + R"(", "run_seed": 11,
    "resources": {"gpus": "none", "cpu_workers": 2, "threads_per_worker": 1},
    "data": {"source": "synthetic",
             "synthetic": {"initial_rows": 400, "pool_rows": 600, "holdout_rows": 300}},
    "members": {"defaults": {"epochs": 40, "batch_size": 16, "layers": [{"units": 24}]},
                "count": 4,
                "variants": [{"layers": [{"units": 24, "activation": "tanh"}]},
                             {"layers": [{"units": 16}, {"units": 16}]}]},
    "mutation": )" + (extra_mutation.empty() ? R"({"policy": "query_by_committee", "k": 25})" : extra_mutation) + R"(,
    "rounds": {"count": 2}
  })";
}

struct Observed {
  bool supervisor_maps_torch = true;
  std::set<pid_t> workers;
  int workers_mapping_train_readonly = 0;
  bool any_worker_maps_train_writable = false;
};

// Watches the running supervisor until it exits: its own maps, its children and theirs.
Observed Watch(pid_t sup, const std::string& train_path) {
  Observed o;
  bool saw_sup_maps = false;
  std::set<pid_t> seen_ro;
  for (;;) {
    int status = 0;
    if (::waitpid(sup, &status, WNOHANG) == sup) {
      o.supervisor_maps_torch = !saw_sup_maps || o.supervisor_maps_torch;
      return o;
    }
    std::string maps = MapsOf(sup);
    if (!maps.empty()) {
      bool torch = maps.find("libtorch") != std::string::npos || maps.find("libc10") != std::string::npos;
      o.supervisor_maps_torch = saw_sup_maps ? (o.supervisor_maps_torch || torch) : torch;
      saw_sup_maps = true;
    }
    for (pid_t w : ChildrenOf(sup)) {
      // Only the workers: a sanitized ensembled has other short-lived children (LeakSanitizer's
      // tracer at exit).
      if (ReadText("/proc/" + std::to_string(w) + "/cmdline").find("ensemble-worker") == std::string::npos) continue;
      o.workers.insert(w);
      std::string wm = MapsOf(w);
      size_t at = wm.find(train_path);
      while (at != std::string::npos) {
        size_t bol = wm.rfind('\n', at);
        std::string line = wm.substr(bol == std::string::npos ? 0 : bol + 1, at - bol);
        std::istringstream fields(line);
        std::string range, perms;
        fields >> range >> perms;
        if (perms == "r--s") seen_ro.insert(w);
        if (!perms.empty() && perms[1] == 'w') o.any_worker_maps_train_writable = true;
        at = wm.find(train_path, at + 1);
      }
    }
    o.workers_mapping_train_readonly = static_cast<int>(seen_ro.size());
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

TEST_CASE("a tiny closed loop runs end to end with persistent workers", "[integration]") {
  TempDir tmp;
  std::string state = tmp / "state";
  WriteText(tmp / "cfg.json", TinyConfig(state));
  std::string abs_train = RunLayout::TrainSegment(state + "/data");
  pid_t sup = Spawn({BinaryPath("ensembled"), "run", "--config", tmp / "cfg.json"}, tmp / "out", tmp / "err");
  Observed seen = Watch(sup, abs_train);
  std::string out = ReadText(tmp / "out"), err = ReadText(tmp / "err");
  INFO("stdout:\n" << out << "\nstderr:\n" << err);

  SECTION("the supervisor never maps libtorch; workers map the dataset read-only and shared") {
    CHECK_FALSE(seen.supervisor_maps_torch);
    CHECK(seen.workers.size() == 2);
    CHECK(seen.workers_mapping_train_readonly >= 1);
    CHECK_FALSE(seen.any_worker_maps_train_writable);
  }

  RunLayout layout(state);
  auto recs = ReadJournal(layout.JournalFile());
  REQUIRE(recs.ok());
  RunProgress p = ReplayJournal(*recs);

  SECTION("the journal records both rounds and the run's end") {
    CHECK(p.finished);
    REQUIRE(p.committed.size() == 2);
    CHECK(p.committed[0].trained_rows == 400);
    CHECK(p.committed[0].train_rows == 425);  // query_by_committee added k = 25 rows
    CHECK(p.committed[0].pool_used.size() == 25);
    CHECK(p.committed[1].trained_rows == 425);
    CHECK(p.committed[0].generation == 1);
  }

  SECTION("every member was trained by one of the two original workers in both rounds") {
    std::set<int64_t> pids;
    int done = 0;
    for (const auto& r : *recs) {
      if (r["event"] != "member_done") continue;
      ++done;
      pids.insert(r["pid"].get<int64_t>());
    }
    CHECK(done == 8);
    CHECK(pids.size() >= 1);  // two fused packs per round: one worker may take both
    CHECK(pids.size() <= 2);
    for (int64_t pid : pids) CHECK(seen.workers.count(static_cast<pid_t>(pid)) == 1);
  }

  SECTION("each member directory is complete") {
    for (int round : {0, 1}) {
      for (const char* name : {"m000", "m001", "m002", "m003"}) {
        std::string dir = layout.MemberDir(round, name);
        for (const char* f : {"weights.bin", "member.json", "history.jsonl", "metrics.json", "holdout_pred.f32",
                              "pool_pred.f32"})
          CHECK(std::filesystem::exists(dir + "/" + f));
        CHECK(std::filesystem::file_size(dir + "/holdout_pred.f32") == 300 * sizeof(float));
        json m = json::parse(ReadText(dir + "/metrics.json"));
        CHECK(m["member"] == name);
        CHECK(m["round"] == round);
        CHECK(m["holdout_rmse"].get<double>() > 0);
        CHECK(m["train_rows"].get<int>() + m["val_rows"].get<int>() == (round == 0 ? 400 : 425));
        std::istringstream hist(ReadText(dir + "/history.jsonl"));
        std::string line;
        int epochs = 0;
        while (std::getline(hist, line)) {
          json h = json::parse(line);
          for (const char* k : {"loss", "val_loss", "mae", "mse", "lr", "seconds"}) CHECK(h.contains(k));
          ++epochs;
        }
        CHECK(epochs == m["epochs_run"].get<int>());
      }
      json s = json::parse(ReadText(layout.SummaryFile(round)));
      CHECK(s["members"].size() == 4);
      CHECK(s["ensemble"]["ensemble_rmse"].get<double>() > 0);
    }
    CHECK(std::filesystem::file_size(RunLayout::TrainSegment(layout.DataDir())) >= 4096 + 425 * 11 * 4);
  }

  SECTION("ensemblectl status reads the run state") {
    auto r = Run({BinaryPath("ensemblectl"), "status", "--state-dir", state, "--json"}, tmp.path());
    REQUIRE(r.code == 0);
    json s = json::parse(r.out);
    CHECK(s["rounds_committed"] == 2);
    CHECK(s["finished"] == true);
    CHECK(s["train_rows"] == 425);
  }

  SECTION("ensemblectl predict gives mean and std per row") {
    WriteText(tmp / "in.csv", "x0,x1,x2,x3,x4,x5,x6,x7,x8,x9\n"
                              "0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,0.0\n"
                              "0.9,0.8,0.7,0.6,0.5,0.4,0.3,0.2,0.1,0.0\n");
    auto r = Run({BinaryPath("ensemblectl"), "predict", "--state-dir", state, "--input", tmp / "in.csv"}, tmp.path());
    INFO(r.err);
    REQUIRE(r.code == 0);
    std::istringstream lines(r.out);
    std::string header, l1, l2;
    std::getline(lines, header);
    std::getline(lines, l1);
    std::getline(lines, l2);
    CHECK(header == "row,mean,std");
    CHECK(l1.rfind("0,", 0) == 0);
    CHECK(l2.rfind("1,", 0) == 0);
  }

  SECTION("running a finished run again changes nothing") {
    auto before = ReadText(layout.JournalFile());
    auto r = Run({BinaryPath("ensembled"), "run", "--config", tmp / "cfg.json"}, tmp.path());
    CHECK(r.code == 0);
    CHECK(r.out.find("already finished") != std::string::npos);
    CHECK(ReadText(layout.JournalFile()) == before);
  }
}

TEST_CASE("a failing mutation command stops the run without losing finished members and a fixed one resumes",
          "[integration]") {
  TempDir tmp;
  std::string state = tmp / "state";
  WriteText(tmp / "mutate.sh", "#!/bin/sh\ncat > /dev/null\necho 'not json'\n");
  ::chmod((tmp / "mutate.sh").c_str(), 0700);
  WriteText(tmp / "cfg.json",
            TinyConfig(state, R"({"policy": "command", "argv": [")" + tmp / "mutate.sh" + R"("], "timeout_s": 10})"));
  auto r = Run({BinaryPath("ensembled"), "run", "--config", tmp / "cfg.json"}, tmp.path());
  INFO(r.out << r.err);
  CHECK(r.code == 78);
  CHECK(r.err.find("mutate.sh") != std::string::npos);
  CHECK(r.err.find("not a JSON object") != std::string::npos);
  RunLayout layout(state);
  auto recs = ReadJournal(layout.JournalFile());
  REQUIRE(recs.ok());
  RunProgress p = ReplayJournal(*recs);
  CHECK(p.committed.empty());
  CHECK(p.done.size() == 4);
  auto ckpt_time = std::filesystem::last_write_time(layout.MemberDir(0, "m002") + "/weights.bin");

  // Fixed command: adds one row (10 features + target) and drops train row 3.
  WriteText(tmp / "mutate.sh",
            "#!/bin/sh\ncat > /dev/null\necho '{\"add\": [[0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,14.2]], "
            "\"drop\": [3]}'\n");
  auto r2 = Run({BinaryPath("ensembled"), "run", "--config", tmp / "cfg.json"}, tmp.path());
  INFO(r2.out << r2.err);
  REQUIRE(r2.code == 0);
  recs = ReadJournal(layout.JournalFile());
  REQUIRE(recs.ok());
  p = ReplayJournal(*recs);
  CHECK(p.finished);
  REQUIRE(p.committed.size() == 2);
  CHECK(p.committed[0].train_rows == 401);
  // Round 0's members were not retrained on resume.
  CHECK(std::filesystem::last_write_time(layout.MemberDir(0, "m002") + "/weights.bin") == ckpt_time);
  json m = json::parse(ReadText(layout.MemberDir(1, "m000") + "/metrics.json"));
  CHECK(m["train_rows"].get<int>() + m["val_rows"].get<int>() == 400);  // 401 rows minus the dropped one
}

TEST_CASE("bad input is a clear error naming the place, exit code 78", "[integration]") {
  TempDir tmp;
  SECTION("a config with a typo") {
    WriteText(tmp / "cfg.json", R"({"state_dir": "s", "rounds": {"cuont": 2}})");
    auto r = Run({BinaryPath("ensembled"), "run", "--config", tmp / "cfg.json"}, tmp.path());
    CHECK(r.code == 78);
    CHECK(r.err.find("/rounds/cuont") != std::string::npos);
    auto v = Run({BinaryPath("ensemblectl"), "validate-config", tmp / "cfg.json"}, tmp.path());
    CHECK(v.code == 78);
    CHECK(v.out.find("/rounds/cuont") != std::string::npos);
  }
  SECTION("a missing CSV names the path") {
    WriteText(tmp / "cfg.json", R"({"state_dir": "s", "data": {"source": "csv", "train_path": "nope.csv",
              "target_column": "y"}, "members": {"defaults": {"layers": [{"units": 4}]}, "count": 1}})");
    auto r = Run({BinaryPath("ensembled"), "run", "--config", tmp / "cfg.json"}, tmp.path());
    CHECK(r.code == 78);
    CHECK(r.err.find("nope.csv") != std::string::npos);
  }
  SECTION("a NaN in a CSV names file:line:column") {
    WriteText(tmp / "d.csv", "a,b,y\n1,2,3\n4,nan,6\n");
    WriteText(tmp / "cfg.json", R"({"state_dir": "s", "data": {"source": "csv", "train_path": "d.csv",
              "target_column": "y"}, "members": {"defaults": {"layers": [{"units": 4}]}, "count": 1}})");
    auto r = Run({BinaryPath("ensembled"), "run", "--config", tmp / "cfg.json"}, tmp.path());
    CHECK(r.code == 78);
    CHECK(r.err.find("d.csv:3:2") != std::string::npos);
  }
  SECTION("a dataset too small for its validation split fails the member permanently") {
    WriteText(tmp / "cfg.json", R"({"state_dir": "s", "resources": {"gpus": "none", "cpu_workers": 1},
              "data": {"synthetic": {"initial_rows": 1, "pool_rows": 0, "holdout_rows": 5}},
              "members": {"defaults": {"layers": [{"units": 4}], "epochs": 1}, "count": 1}})");
    auto r = Run({BinaryPath("ensembled"), "run", "--config", tmp / "cfg.json"}, tmp.path());
    CHECK(r.code == 78);
    CHECK(r.err.find("too few for validation_split") != std::string::npos);
  }
}

}  // namespace
}  // namespace ens
