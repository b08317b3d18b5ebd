// A finished run's status page tells the truth: status.json says the run finished and why, the
// page says "finished (...) after N rounds" instead of an empty round's "0/M members done", and
// the member-curves plot shows the last round's curves, in either results layout. Also when
// the process that writes it is a later start on the finished run (the daemon resuming it, a
// user running it again): the curves then come from the last committed round's files.
#include <catch2/catch.hpp>
#include <string>

#include <nlohmann/json.hpp>

#include "common/state/run_layout.h"
#include "orchestrator/service/run_snapshot.h"
#include "support/env_spawn.h"
#include "support/temp_dir.h"

namespace ens {
namespace {

using namespace ens::testing;
using json = nlohmann::json;

std::string Config(const std::string& state_dir, const std::string& layout) {
  return R"({"run_name": "done", "state_dir": ")" + state_dir + R"(", "run_seed": 3, "results_layout": ")" + layout +
         R"(", "resources": {"gpus": "none", "cpu_workers": 2},
    "data": {"synthetic": {"initial_rows": 120, "pool_rows": 60, "holdout_rows": 60}},
    "members": {"defaults": {"epochs": 4, "batch_size": 16, "layers": [{"units": 8}]}, "count": 3},
    "mutation": {"policy": "append_from_pool", "k": 10}, "pack_size": 3, "rounds": {"count": 2}})";
}

// The page's member-curves chart, from the snapshot of status.json.
void CheckFinishedPage(const std::string& state) {
  json status = json::parse(ReadText(RunLayout(state).StatusFile()), nullptr, false);
  REQUIRE(status.is_object());
  CHECK(status.value("finished", false));
  CHECK(status.value("finish_reason", "") == "all rounds done");
  RunSnapshot snap = SnapshotFromJson(status);
  CHECK(snap.curves_round == 1);
  CHECK(snap.curves.size() == 3);
  for (const auto& [name, curve] : snap.curves) {
    INFO(name);
    CHECK(curve.loss.size() == 4);  // one point an epoch
  }
  const std::string page = RenderStatusPage(snap);
  CHECK_THAT(page, Catch::Contains("finished (all rounds done) after 2 rounds of 3 members"));
  CHECK(page.find("0/3 members done") == std::string::npos);
  const size_t chart = page.find("id=\"member-curves\"");
  REQUIRE(chart != std::string::npos);
  const std::string svg = page.substr(chart, page.find("</svg>", chart) - chart);
  CHECK_THAT(svg, Catch::Contains("Round 1: loss"));
  CHECK(svg.find("no data yet") == std::string::npos);
}

TEST_CASE("a finished run's page says it finished and shows its last round's curves - either layout, any later start",
          "[service][page]") {
  for (const char* layout : {"packs", "members"}) {
    INFO("results_layout " << layout);
    TempDir tmp;
    const std::string state = tmp / "state";
    WriteText(tmp / "run.json", Config(state, layout));
    auto run = RunEnsembled(tmp / "run.json", tmp.path(), {}, 300);
    INFO(run.out << run.err);
    REQUIRE(run.code == 0);
    CheckFinishedPage(state);
    // Started again on the finished run: it rewrites status.json from the run's files alone.
    WriteText(state + "/status.json", "{}");
    auto again = RunEnsembled(tmp / "run.json", tmp.path(), {}, 120);
    INFO(again.out << again.err);
    REQUIRE(again.code == 0);
    CHECK_THAT(again.out, Catch::Contains("already finished"));
    CheckFinishedPage(state);
  }
}

}  // namespace
}  // namespace ens
