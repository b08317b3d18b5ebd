// config_change.h and config_keys.h: every key of the normalised config is classified, diffs
// name each change by its pointer with its rule, and the recorded config round-trips.
#include "orchestrator/run/config_change.h"

#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "support/temp_dir.h"

namespace ens {
namespace {

using json = nlohmann::json;
using Catch::Matchers::Contains;

Config Parse(const std::string& text) {
  auto c = ParseConfig(text, "test.json", "/tmp");
  INFO(c.status().message());
  REQUIRE(c.ok());
  return *c;
}

// Every key of the file format in use at least once.
const char* kFull = R"({
  "run_name": "full", "state_dir": "s", "run_seed": 3,
  "resources": {"gpus": ["0", "1"], "workers_per_gpu": 2, "cpu_workers": 3, "threads_per_worker": 2},
  "data": {"source": "synthetic", "synthetic": {"features": 6, "noise": 0.5, "initial_rows": 50,
           "pool_rows": 60, "holdout_rows": 40}, "holdout_fraction": 0.3},
  "members": {"defaults": {"layers": [{"units": 4, "activation": "tanh", "dropout": 0.1}], "lr": 0.003,
              "early_stopping": {"enabled": true, "patience": 2}, "split": "bootstrap"},
              "count": 3},
  "mutation": {"policy": "command", "argv": ["/bin/true"], "k": 2, "timeout_s": 5},
  "rounds": {"count": 2, "stop_below_error": 0.5},
  "recycle": {"after_tasks": 5, "rss_mb": 100, "rss_growth_pct": 10, "gpu_reserved_mb": 50},
  "service": {"control_socket": "/tmp/x.sock", "http_port": 9000, "http_bind": "0.0.0.0", "log_file": "/tmp/l"},
  "heartbeat_timeout_s": 30, "max_task_attempts": 2, "min_members": 1, "stop_timeout_s": 9,
  "pack_size": 4, "save_checkpoints": false, "retention": {"keep_rounds": 3, "pin": [1]}
})";

void Leaves(const json& j, const std::string& ptr, std::vector<std::string>* out) {
  if (j.is_object() && !j.empty()) {
    for (const auto& [k, v] : j.items()) Leaves(v, ptr + "/" + k, out);
  } else if (j.is_array() && !j.empty() && (j[0].is_object() || j[0].is_array())) {
    for (size_t i = 0; i < j.size(); ++i) Leaves(j[i], ptr + "/" + std::to_string(i), out);
  } else {
    out->push_back(ptr);
  }
}

TEST_CASE("every key of the normalised config has a change rule", "[config]") {
  for (const char* text : {kFull, R"({"state_dir": "s", "members": {"defaults": {"layers": [{"units": 2}]}, "count": 1}})"}) {
    std::vector<std::string> leaves;
    Leaves(ConfigToJson(Parse(text)), "", &leaves);
    REQUIRE(leaves.size() > 40);
    for (const auto& p : leaves) {
      INFO(p << ": add the key to common/config/config_keys.cpp with its rule");
      CHECK(RuleFor(p).has_value());
    }
  }
  // The check is not vacuous: a key outside the table is unclassified.
  CHECK_FALSE(RuleFor("/brand_new_key").has_value());
  CHECK_FALSE(RuleFor("/mutation/brand_new_key").has_value());
  CHECK_FALSE(RuleFor("/members/list/2/brand_new_key").has_value());
  CHECK(RuleFor("/members/list/2/early_stopping/patience") == ChangeRule::kResults);
  CHECK(RuleFor("/rounds/count") == ChangeRule::kLive);
  CHECK(RuleFor("/service/http_port") == ChangeRule::kRestart);
}

TEST_CASE("a diff names each change by pointer with its rule - reload and resume refuse their own", "[config]") {
  Config a = Parse(kFull), b = a;
  b.members[1].lr = 0.01;
  b.rounds.count = 4;
  b.service.http_port = 9100;
  b.mutation.k = 3;
  b.retention.keep_rounds = 10;
  auto changes = DiffConfigs(a, b);
  REQUIRE(changes.size() == 5);
  std::map<std::string, ConfigChange> by;
  for (const auto& c : changes) by[c.pointer] = c;
  REQUIRE(by.count("/members/list/1/lr"));
  CHECK(by["/members/list/1/lr"].rule == ChangeRule::kResults);
  CHECK_THAT(DescribeChange(by["/members/list/1/lr"]), Contains("/members/list/1/lr: 0.003 -> 0.01"));
  CHECK(by["/rounds/count"].rule == ChangeRule::kLive);
  CHECK(by["/service/http_port"].rule == ChangeRule::kRestart);
  CHECK(by["/mutation/k"].rule == ChangeRule::kLive);
  CHECK(by["/retention/keep_rounds"].rule == ChangeRule::kLive);
  auto refused = RefusedByReload(changes);
  CHECK(refused.size() == 2);  // lr (results) and http_port (restart)
  auto results = ResultsChanging(changes);
  REQUIRE(results.size() == 1);
  CHECK(results[0].pointer == "/members/list/1/lr");

  Config c = a;
  c.members.push_back(c.members[0]);  // count 3 -> 4: the list as a whole
  auto more = DiffConfigs(a, c);
  REQUIRE(more.size() == 1);
  CHECK(more[0].pointer == "/members/list");
  CHECK(more[0].rule == ChangeRule::kResults);
  CHECK(DiffConfigs(a, a).empty());
}

TEST_CASE("the recorded config round-trips and a damaged one is refused naming the file", "[config]") {
  testing::TempDir dir;
  const std::string path = dir.File("config.json");
  CHECK(ReadRecordedConfig(path).status().code() == Status::Code::kNotFound);
  RecordedConfig r{2, 7, "", ConfigToJson(Parse(kFull))};
  REQUIRE(WriteRecordedConfig(path, r).ok());
  auto back = ReadRecordedConfig(path);
  REQUIRE(back.ok());
  CHECK(back->epoch == 2);
  CHECK(back->from_round == 7);
  CHECK(back->config == r.config);
  CHECK(back->fingerprint == ConfigFingerprint(r.config));
  std::string text = testing::ReadText(path);
  text.replace(text.find("\"run_seed\": 3"), 13, "\"run_seed\": 4");
  std::ofstream(path) << text;
  auto bad = ReadRecordedConfig(path);
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.status().message(), Contains(path) && Contains("fingerprint"));
}

}  // namespace
}  // namespace ens
