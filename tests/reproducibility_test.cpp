// A member's bits depend only on (member spec, seed, dataset generation): not on the number
// of workers, which worker ran it, what that worker process trained before, or the pack it
// trained in (ensemblectl verify retrains packed members alone).
#include <catch2/catch.hpp>

#include <map>

#include <nlohmann/json.hpp>

#include "common/ipc/protocol.h"
#include "common/state/run_layout.h"
#include "support/env_spawn.h"
#include "support/process_harness.h"
#include "support/temp_dir.h"

namespace ens {
namespace {

using json = nlohmann::json;
using namespace ens::testing;

// pack_size "auto" packs the members of each variant into one fused pack with 1 worker and
// spreads them over the workers with 3: the bits must not depend on it.
std::string Config(const std::string& state_dir, int workers, const std::string& pack_size = "\"auto\"") {
  return R"({"run_name": "repro", "state_dir": ")" + state_dir + R"(", "run_seed": 5, "pack_size": )" + pack_size + R"(,
    "resources": {"gpus": "none", "cpu_workers": )" + std::to_string(workers) + R"(, "threads_per_worker": 1},
    "data": {"synthetic": {"initial_rows": 160, "pool_rows": 200, "holdout_rows": 100}},
    "members": {"defaults": {"epochs": 8, "batch_size": 16,
                             "layers": [{"units": 12, "dropout": 0.1}, {"units": 8}]},
                "count": 5,
                "variants": [{"split": "random"}, {"split": "bootstrap", "optimizer": "adamw"}]},
    "mutation": {"policy": "append_from_pool", "k": 30},
    "rounds": {"count": 2}})";
}

const char* kMembers[] = {"m000", "m001", "m002", "m003", "m004"};

// "equal" or what differs, via ensemble-worker compare (bitwise) and the raw predictions.
std::string Compare(const std::string& a, const std::string& b, const std::string& scratch) {
  auto r = Run({BinaryPath("ensemble-worker"), "compare", a, b}, scratch);  // each directory's checkpoint
  if (r.code != 0) return "checkpoint: " + r.out + r.err;
  // Each member's own directory, or its span of its pack's files (member_view.h).
  for (const char* f : {"holdout_pred.f32", "pool_pred.f32"}) {
    const std::string x = ReadMemberText(a + "/" + f);
    if (x.empty()) return std::string(f) + ": missing in " + a;
    if (x != ReadMemberText(b + "/" + f)) return f;
  }
  return "equal";
}

TEST_CASE("one worker and three workers produce bitwise identical members", "[reproducibility][bits]") {
  TempDir tmp;
  for (int workers : {1, 3}) {
    std::string cfg = tmp / ("w" + std::to_string(workers) + ".json");
    WriteText(cfg, Config(tmp / ("state" + std::to_string(workers)), workers));
    auto r = Run({BinaryPath("ensembled"), "run", "--config", cfg}, tmp.path());
    INFO(r.out << r.err);
    REQUIRE(r.code == 0);
  }
  RunLayout one(tmp / "state1"), three(tmp / "state3");
  for (int round : {0, 1})
    for (const char* m : kMembers) {
      INFO("round " << round << " member " << m);
      CHECK(Compare(one.MemberDir(round, m), three.MemberDir(round, m), tmp.path()) == "equal");
    }
  // The two members of a pair differ from each other, so "equal" above is not vacuous.
  CHECK(Compare(one.MemberDir(0, "m000"), one.MemberDir(0, "m002"), tmp.path()) != "equal");

  // One pair of runs for both checks (SECTIONs would run the pair again for each): verify on the
  // untouched run first, then on one altered.
  {  // ensemblectl verify passes on the untouched run
    auto v = Run({BinaryPath("ensemblectl"), "verify", "--state-dir", tmp / "state1", "--all"}, tmp.path());
    INFO(v.out << v.err);
    CHECK(v.code == 0);
    CHECK(v.out.find("5 member(s) checked, 0 mismatch(es)") != std::string::npos);
    CHECK(v.out.find("(trained in a pack of 3, packs/r1-m000-a1.json)") != std::string::npos);
  }
  {  // ensemblectl verify names the member and tensor of an altered checkpoint
    // m002 given a directory of its own (read before its pack's files): its files as they
    // are, but m000's weights.bin.
    const std::string m002 = one.MemberDir(1, "m002");
    std::map<std::string, std::string> files;
    for (const char* f : kMemberFiles) files[f] = ReadMemberText(m002 + "/" + f);
    files["weights.bin"] = ReadMemberText(one.MemberDir(1, "m000") + "/weights.bin");
    // Its record says it trained on CUDA with PackStep: verify, retraining on the CPU (in lanes),
    // says why it may differ. Had the lane kernel trained it there, nothing excuses a difference.
    json metrics = json::parse(files["metrics.json"]);
    REQUIRE(metrics["engine"] == "lanes");
    metrics["device"] = "cuda";
    std::filesystem::create_directories(m002);
    auto write = [&] {
      files["metrics.json"] = metrics.dump();
      for (const auto& [f, bytes] : files) {
        INFO(f);
        REQUIRE_FALSE(bytes.empty());
        WriteText(m002 + "/" + f, bytes);
      }
    };
    write();
    auto lanes = Run({BinaryPath("ensemblectl"), "verify", "--state-dir", tmp / "state1", "--round", "1"}, tmp.path());
    INFO(lanes.out << lanes.err);
    CHECK(lanes.code == 3);
    CHECK(lanes.out.find("m002            1  tensor layer0_weight differs") != std::string::npos);
    CHECK(lanes.out.find("trained on cuda") == std::string::npos);
    metrics["engine"] = "pack_step";
    write();
    auto v = Run({BinaryPath("ensemblectl"), "verify", "--state-dir", tmp / "state1", "--round", "1"}, tmp.path());
    INFO(v.out << v.err);
    CHECK(v.code == 3);
    CHECK(v.out.find("m002            1  tensor layer0_weight differs") != std::string::npos);
    CHECK(v.out.find("; trained on cuda, retrained on cpu: bits are promised on one device model only") !=
          std::string::npos);
    CHECK(v.out.find("m000            1  equal (trained in a pack of 3, packs/r1-m000-a1.json)") != std::string::npos);
  }
}

TEST_CASE("a worker that trained another member first gives the same bits as a fresh one", "[reproducibility][bits]") {
  TempDir tmp;
  WriteText(tmp / "cfg.json", Config(tmp / "state", 2, "1"));
  auto r = Run({BinaryPath("ensembled"), "run", "--config", tmp / "cfg.json"}, tmp.path());
  REQUIRE(r.code == 0);
  RunLayout layout(tmp / "state");
  // Tasks rebuilt from the recorded member.json files of round 1.
  auto task_for = [&](const std::string& name, const std::string& out_dir) {
    json m = json::parse(ReadText(layout.MemberDir(1, name) + "/member.json"));
    TaskSpec t;
    REQUIRE(MemberFromJson(m["spec"], &t.member).ok());
    t.task_id = "t-" + name;
    t.round = 1;
    t.member_index = m["index"];
    t.seed = m["seed"];
    t.generation = m["generation"];
    t.rows = m["rows"];
    t.lane_predictions = m["task"].value("lane_predictions", false);  // the forward it predicted with
    t.threads = 1;
    t.data_dir = layout.DataDir();
    t.out_dir = out_dir;
    std::string file = tmp / (name + "-" + std::to_string(std::hash<std::string>{}(out_dir)) + ".json");
    WriteText(file, TaskToJson(t).dump());
    return file;
  };
  std::string other = task_for("m001", tmp / "seq/m001");
  std::string after = task_for("m000", tmp / "seq/m000");
  std::string alone = task_for("m000", tmp / "alone/m000");
  auto seq = Run({BinaryPath("ensemble-worker"), "train-one", "--task", other, "--task", after}, tmp.path());
  INFO(seq.err);
  REQUIRE(seq.code == 0);
  auto fresh = Run({BinaryPath("ensemble-worker"), "train-one", "--task", alone}, tmp.path());
  REQUIRE(fresh.code == 0);
  CHECK(Compare(tmp / "seq/m000", tmp / "alone/m000", tmp.path()) == "equal");
  CHECK(Compare(tmp / "seq/m000", layout.MemberDir(1, "m000"), tmp.path()) == "equal");
  CHECK(Compare(tmp / "seq/m001", tmp / "seq/m000", tmp.path()) != "equal");
}

// A member file holds only its member: x_mean, x_std, y_mean and y_std saved as views into a
// pack's storage would carry every pack-mate's statistics (288 B for a pack of 8 where alone
// has 36 B), so the file would differ from the lone member's and grow with the pack.
TEST_CASE("a packed member's weights.bin is byte for byte that of the same member trained alone",
          "[reproducibility][bits]") {
  TempDir tmp;
  for (const char* pack : {"8", "1"}) {
    WriteText(tmp / (std::string("p") + pack + ".json"), R"({"run_name": "files", "state_dir": ")" +
              tmp / (std::string("p") + pack) + R"(", "run_seed": 9, "pack_size": )" + pack + R"(,
      "resources": {"gpus": "none", "cpu_workers": 1, "threads_per_worker": 1},
      "data": {"synthetic": {"initial_rows": 100, "pool_rows": 40, "holdout_rows": 50}},
      "members": {"defaults": {"epochs": 2, "layers": [{"units": 8}]}, "count": 8}})");
    auto r = Run({BinaryPath("ensembled"), "run", "--config", tmp / (std::string("p") + pack + ".json")}, tmp.path());
    INFO(r.out << r.err);
    REQUIRE(r.code == 0);
  }
  RunLayout packed(tmp / "p8"), alone(tmp / "p1");
  const json metrics = json::parse(ReadMemberText(packed.MemberDir(0, "m003") + "/metrics.json"));
  REQUIRE(metrics.value("pack_size", 0) == 8);  // really trained in one pack of 8
  for (const char* m : {"m000", "m003", "m007"}) {
    INFO("member " << m);
    for (const char* f : {"weights.bin", "holdout_pred.f32", "pool_pred.f32"}) {
      INFO("file " << f);
      const std::string a = ReadMemberText(packed.MemberDir(0, m) + "/" + f), b = ReadText(alone.MemberDir(0, m) + "/" + f);
      CHECK_FALSE(a.empty());
      CHECK(a.size() == b.size());
      CHECK((a == b));
    }
  }
}

}  // namespace
}  // namespace ens
