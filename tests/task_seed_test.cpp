// The seed the supervisor hands a member's task (orchestrator/run/supervisor.cpp) is the
// documented derivation, MemberSeed(run_seed, index + seed_offset, round) (common/base/seed.h, which
// seed_test pins to its definition): checked end to end from the journal of a two-round run,
// for a member with a seed_offset (listed between two without), in the later round too. Dropping
// the round, the offset or the index at the call site fails here.
#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "common/base/seed.h"
#include "support/process_harness.h"
#include "support/temp_dir.h"

namespace ens {
namespace {

using json = nlohmann::json;
using namespace ens::testing;

TEST_CASE("a task's seed is MemberSeed(run_seed, index + seed_offset, round), seed_offset and later rounds included",
          "[seed]") {
  TempDir tmp;
  const uint64_t run_seed = 41;
  WriteText(tmp / "cfg.json", R"({"run_name": "seeds", "state_dir": ")" + tmp / "state" + R"(", "run_seed": 41,
    "pack_size": 1, "resources": {"gpus": "none", "cpu_workers": 1, "threads_per_worker": 1},
    "data": {"synthetic": {"initial_rows": 120, "pool_rows": 60, "holdout_rows": 20}},
    "members": {"defaults": {"epochs": 1, "batch_size": 16, "layers": [{"units": 4}]},
                "list": [{"name": "a"}, {"name": "b", "seed_offset": 1000}], "count": 1},
    "mutation": {"policy": "append_from_pool", "k": 10},
    "rounds": {"count": 2}})");
  auto r = Run({BinaryPath("ensembled"), "run", "--config", tmp / "cfg.json"}, tmp.path());
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  const std::map<std::string, std::pair<uint64_t, uint64_t>> index_offset = {{"a", {0, 0}}, {"b", {1, 1000}},
                                                                            {"m002", {2, 0}}};
  std::ifstream journal(tmp / "state/journal.jsonl");
  std::set<std::pair<std::string, int>> seen;
  std::set<uint64_t> seeds;
  for (std::string line; std::getline(journal, line);) {
    const json j = json::parse(line);
    if (j.value("event", "") != "member_done") continue;
    const std::string name = j.at("member");
    const int round = j.at("round");
    CAPTURE(name, round);
    REQUIRE(index_offset.count(name) == 1);
    const auto [index, offset] = index_offset.at(name);
    CHECK(j.at("metrics").at("index").get<uint64_t>() == index);
    CHECK(j.at("metrics").at("seed").get<uint64_t>() == MemberSeed(run_seed, index + offset, static_cast<uint64_t>(round)));
    seen.insert({name, round});
    seeds.insert(j.at("metrics").at("seed").get<uint64_t>());
  }
  CHECK(seen.size() == 6);   // 3 members x 2 rounds
  CHECK(seeds.size() == 6);  // every member and round its own seed
}

}  // namespace
}  // namespace ens
