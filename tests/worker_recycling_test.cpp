// Recycling replaces worker processes on schedule and changes no result.
#include <catch2/catch.hpp>

#include <set>

#include <nlohmann/json.hpp>

#include "common/state/journal.h"
#include "common/state/run_layout.h"
#include "support/process_harness.h"

namespace ens {
namespace {

using json = nlohmann::json;
using namespace ens::testing;

std::string Config(const std::string& state_dir, int after_tasks) {
  return R"({"run_name": "recycle", "state_dir": ")" + state_dir + R"(", "run_seed": 9,
    "resources": {"gpus": "none", "cpu_workers": 1},
    "data": {"synthetic": {"initial_rows": 120, "pool_rows": 0, "holdout_rows": 50}},
    "members": {"defaults": {"epochs": 4, "layers": [{"units": 10, "dropout": 0.2}]}, "count": 6},
    "recycle": {"after_tasks": )" + std::to_string(after_tasks) + R"(, "rss_growth_pct": 0},
    "rounds": {"count": 1}, "pack_size": 1})";
}

TEST_CASE("recycling every 2 tasks restarts the worker and keeps every checkpoint bit for bit", "[recycle][integration]") {
  TempDir tmp;
  for (int n : {0, 2}) {
    WriteText(tmp / ("c" + std::to_string(n) + ".json"), Config(tmp / ("s" + std::to_string(n)), n));
    auto r = Run({BinaryPath("ensembled"), "run", "--config", tmp / ("c" + std::to_string(n) + ".json")}, tmp.path());
    INFO(r.out << r.err);
    REQUIRE(r.code == 0);
    auto recs = ReadJournal(RunLayout(tmp / ("s" + std::to_string(n))).JournalFile());
    REQUIRE(recs.ok());
    std::set<int64_t> pids;
    int done = 0;
    for (const auto& rec : *recs)
      if (rec["event"] == "member_done") {
        pids.insert(rec["pid"].get<int64_t>());
        CHECK(rec["attempt"] == 1);  // nothing was retried
        ++done;
      }
    CHECK(done == 6);
    CHECK(pids.size() == (n == 0 ? 1u : 3u));  // one process, or a fresh one every 2 tasks
    if (n == 2) CHECK(r.err.find("recycles: 2 tasks done") != std::string::npos);
  }
  RunLayout plain(tmp / "s0"), recycled(tmp / "s2");
  for (const char* m : {"m000", "m001", "m002", "m003", "m004", "m005"}) {
    INFO(m);
    auto c = Run({BinaryPath("ensemble-worker"), "compare", plain.MemberDir(0, m),
                  recycled.MemberDir(0, m)},
                 tmp.path());
    CHECK(c.code == 0);
    CHECK(json::parse(c.out)["equal"] == true);
  }
}

}  // namespace
}  // namespace ens
