// Fused packs: training is pack-invariant, so a packed run writes the same files as an
// unpacked one with the same bits (checkpoint tensors, predictions, history but its timings),
// each member.json records the exact task its member trained with (and no pack), and every
// packed member verifies equal when retrained alone.
#include <catch2/catch.hpp>

#include <filesystem>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/state/member_view.h"
#include "common/ipc/protocol.h"
#include "common/state/run_layout.h"
#include "support/env_spawn.h"
#include "support/process_harness.h"

namespace ens {
namespace {

using json = nlohmann::json;
using namespace ens::testing;

std::string Config(const std::string& state_dir, const std::string& pack_size, const std::string& layout) {
  return R"({"run_name": "packs", "state_dir": ")" + state_dir + R"(", "run_seed": 21, "pack_size": )" + pack_size + R"(,
    "results_layout": ")" + layout + R"(",
    "resources": {"gpus": "none", "cpu_workers": 2},
    "data": {"synthetic": {"initial_rows": 300, "pool_rows": 200, "holdout_rows": 200}},
    "members": {"defaults": {"epochs": 15, "batch_size": 16, "lr": 0.003, "layers": [{"units": 16, "activation": "tanh"}],
                             "early_stopping": {"enabled": true, "patience": 3}},
                "count": 6,
                "variants": [{"split": "random"}, {"split": "bootstrap", "initializer": "he_uniform"}]},
    "mutation": {"policy": "query_by_committee", "k": 20},
    "rounds": {"count": 2}})";
}

// history.jsonl without each epoch's wall time ("seconds"), the one thing two runs never share.
std::vector<json> HistoryWithoutTimings(const std::string& member_dir) {
  std::vector<json> out;
  std::istringstream in(ReadMemberText(member_dir + "/history.jsonl"));
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    json epoch = json::parse(line);
    epoch.erase("seconds");
    out.push_back(epoch);
  }
  return out;
}

// member.json with its paths cut to their last component: the rest names the state directory.
json WithRunPathsCut(json member) {
  auto cut = [](json& obj, const char* key) {
    if (obj.is_object() && obj.contains(key) && obj[key].is_string())
      obj[key] = std::filesystem::path(obj[key].get<std::string>()).filename().string();
  };
  cut(member, "excluded_file");
  if (member.contains("task"))
    for (const char* key : {"data_dir", "out_dir", "excluded_file"}) cut(member["task"], key);
  return member;
}

TEST_CASE("packed and unpacked runs give bitwise identical members", "[pack][integration]") {
  TempDir tmp;
  // The packed run's results as a directory a member ("members") or a pack directory a pack
  // ("packs": pack_results.h), read back through the members' paths either way (member_view.h).
  const std::string layout = GENERATE(std::string("members"), std::string("packs"));
  INFO("results_layout " << layout);
  for (const char* mode : {"auto", "off"}) {
    WriteText(tmp / (std::string(mode) + ".json"),
              Config(tmp / mode, std::string(mode) == "auto" ? "3" : "1", std::string(mode) == "auto" ? layout : "members"));
    auto r = Run({BinaryPath("ensembled"), "run", "--config", tmp / (std::string(mode) + ".json")}, tmp.path());
    INFO(r.out << r.err);
    REQUIRE(r.code == 0);
  }
  RunLayout packed(tmp / "auto"), plain(tmp / "off");
  std::vector<std::pair<std::string, std::string>> pairs;
  for (int round : {0, 1})
    for (const char* m : {"m000", "m001", "m002", "m003", "m004", "m005"}) {
      const std::string a = packed.MemberDir(round, m), b = plain.MemberDir(round, m);
      INFO(a);
      CHECK(std::filesystem::exists(a) == (layout == "members"));
      for (const char* f : {"weights.bin", "member.json", "history.jsonl", "holdout_pred.f32", "pool_pred.f32"})
        CHECK(MemberFileExists(a + "/" + f));
      json metrics_a = json::parse(ReadMemberText(a + "/metrics.json"));
      json metrics_b = json::parse(ReadText(b + "/metrics.json"));
      CHECK(metrics_a["pack_size"] == 3);  // each variant (its own initializer) is one pack of three
      CHECK(metrics_a.contains("pack_position"));
      // The pack's time outside its loop, split as bench/pack_throughput.py reports it: set-up
      // before the loop, and the members' outputs after it (modules, predictions: never nothing)
      REQUIRE(metrics_a.contains("pack_prepare_seconds"));
      REQUIRE(metrics_a.contains("pack_outputs_seconds"));
      CHECK(metrics_a["pack_prepare_seconds"].get<double>() >= 0.0);
      CHECK(metrics_a["pack_outputs_seconds"].get<double>() > 0.0);
      CHECK(metrics_a["pack_train_seconds"].get<double>() + metrics_a["pack_prepare_seconds"].get<double>() +
                metrics_a["pack_outputs_seconds"].get<double>() <=
            metrics_a["seconds"].get<double>() * 3 + 1e-9);  // within the pack's whole time (seconds = / K)
      CHECK_FALSE(metrics_b.contains("pack_size"));
      CHECK_FALSE(metrics_b.contains("pack_outputs_seconds"));
      CHECK(metrics_a["holdout_rmse"] == metrics_b["holdout_rmse"]);
      // The record names the task and refers to its pack's one shared file (O(1) per member);
      // the member's bits do not depend on the pack.
      json member_a = json::parse(ReadMemberText(a + "/member.json"));
      json member_b = json::parse(ReadText(b + "/member.json"));
      CHECK_FALSE(member_a.contains("pack_members"));
      CHECK_FALSE(member_b.contains("pack"));  // trained alone: no pack file
      REQUIRE(member_a.contains("pack"));
      CHECK(member_a["pack"]["size"] == 3);
      json pack = json::parse(ReadText(std::filesystem::path(a + "/" + member_a["pack"]["file"].get<std::string>()).lexically_normal()));
      REQUIRE(pack["members"].size() == 3);
      const size_t position = member_a["pack"]["position"].get<size_t>();
      CHECK(pack["members"][position]["member"] == m);
      CHECK(pack["round"] == round);
      member_a.erase("pack");
      REQUIRE(member_a.contains("task"));
      CHECK(member_a["task"].value("pack_results", false) == (layout == "packs"));
      member_a["task"].erase("pack_results");  // where its results went, not how it trained
      TaskSpec task;
      Status s = TaskOfMemberRecord(member_a, &task);
      INFO(s.message());
      CHECK(s.ok());
      CHECK(task.member.name == m);
      CHECK(task.round == round);
      CHECK(WithRunPathsCut(member_a) == WithRunPathsCut(member_b));
      CHECK(HistoryWithoutTimings(a) == HistoryWithoutTimings(b));
      pairs.emplace_back(a, b);
    }
  // Checkpoint tensors bit for bit (ensemble-worker compare) and predictions byte for byte.
  auto diffs = CompareMemberDirs(pairs, tmp.path());
  for (size_t i = 0; i < diffs.size(); ++i) {
    INFO(pairs[i].first);
    CHECK(diffs[i] == "equal");
  }

  // verify retrains each packed member alone, and alone it gives the recorded bits.
  auto v = Run({BinaryPath("ensemblectl"), "verify", "--state-dir", tmp / "auto", "--round", "1"}, tmp.path());
  INFO(v.out << v.err);
  CHECK(v.code == 0);
  CHECK(v.out.find("6 member(s) checked, 0 mismatch(es)") != std::string::npos);
  CHECK(v.out.find("m000            1  equal (trained in a pack of 3, packs/r1-m000-a1.json)") != std::string::npos);
}

}  // namespace
}  // namespace ens
