// Tests of orchestrator/run_snapshot: status.json (SnapshotToJson) read back by
// SnapshotFromJson, what `ensembled serve` renders a run's page from.
#include "orchestrator/service/run_snapshot.h"
#include "common/scoring/sigma_calibration.h"

#include <string>
#include <tuple>
#include <vector>

#include <catch2/catch.hpp>

namespace ens {
namespace {

using json = nlohmann::json;

RunSnapshot Sample() {
  RunSnapshot s;
  s.run_name = "bench";
  s.pid = 4242;
  s.control_socket = "/run/ensembled/bench.sock";
  s.paused = true;
  s.round = 3;
  s.rounds = 9;
  s.members_total = 16;
  s.members_done = 5;
  s.members_running = 2;
  s.members_failed_round = 1;
  s.eta_round_s = 12.5;
  s.dataset_rows = 1234567890123ULL;
  s.dataset_generation = 7;
  s.config_epoch = 2;
  s.members_finished_total = 41;
  s.members_failed_total = 3;
  s.members_retried_total = 4;
  s.worker_restarts_total = 5;
  s.worker_recycles_total = 6;
  s.bad_messages_total = 1;
  s.gpu_source = "nvml";
  WorkerView w;
  w.slot = 1;
  w.gpu = "GPU-aa";
  w.pid = 99;
  w.state = "busy";
  w.member = "m0003";
  w.phase = "training";
  w.rss_kb = 123456;
  w.gpu_reserved_mb = 512.5;
  w.tasks_since_start = 8;
  w.spawns = 2;
  w.recycles = 1;
  w.gpu_memory_mb = 700;
  s.workers = {w};
  GpuView g;
  g.index = 1;
  g.uuid = "GPU-aa";
  g.name = "H200";
  g.memory_used_mb = 700;
  g.memory_total_mb = 143771;
  g.utilization_pct = 87;
  g.temperature_c = 55;
  g.power_w = 312.5;
  s.gpus = {g};
  RoundView r;
  r.round = 2;
  r.trained_rows = 2048;
  r.task = TaskKind::kClassification;
  r.member_mean = 0.81;
  r.member_std = 0.02;
  r.ensemble = 0.86;
  r.ensemble_error = 0.14;
  r.wall_seconds = 33.25;
  RoundView calibrated = r;  // the second round's summary has calibration figures, the first none
  calibrated.figure("holdout_nll") = 0.4125;
  calibrated.figure("ece") = 0.0375;
  s.rounds_done = {r, calibrated};
  return s;
}

TEST_CASE("status.json reads back as the snapshot it was written from", "[snapshot]") {
  const RunSnapshot s = Sample();
  const json written = SnapshotToJson(s);
  const RunSnapshot back = SnapshotFromJson(written);
  CHECK(SnapshotToJson(back) == written);  // every field status.json carries
  CHECK(back.dataset_rows == 1234567890123ULL);
  CHECK(back.members_failed_round == 1);
  CHECK(back.bad_messages_total == 1);
  REQUIRE(back.rounds_done.size() == 2);
  CHECK(back.rounds_done[1].task == TaskKind::kClassification);
  CHECK(written["rounds_done"][1]["metric"] == "accuracy");  // the name status.json has always had
  CHECK(back.rounds_done[0].task == TaskKind::kClassification);
  json regression = written;
  regression["rounds_done"][0]["metric"] = "RMSE";
  CHECK(SnapshotFromJson(regression).rounds_done[0].task == TaskKind::kRegression);
  CHECK(back.rounds_done[1].ensemble_error == 0.14);
  CHECK(back.rounds_done[1].figure("holdout_nll") == 0.4125);
  CHECK(back.rounds_done[1].figure("ece") == 0.0375);
  CHECK_FALSE(back.rounds_done[1].figure("coverage_1sigma").has_value());
  CHECK_FALSE(back.rounds_done[0].figure("holdout_nll").has_value());
  CHECK(written["rounds_done"][0]["ece"].is_null());
  REQUIRE(back.workers.size() == 1);
  CHECK(back.workers[0].phase == "training");
  CHECK(back.gpus.at(0).power_w == 312.5);
}

TEST_CASE("a status.json with missing or mistyped fields keeps the defaults for them", "[snapshot]") {
  json j = SnapshotToJson(Sample());
  j["round"] = "three";
  j.erase("rounds");
  j["workers"] = "none";
  j["rounds_done"][0]["ensemble_error"] = nullptr;
  const RunSnapshot back = SnapshotFromJson(j);
  const RunSnapshot defaults;
  CHECK(back.round == defaults.round);
  CHECK(back.rounds == defaults.rounds);
  CHECK(back.workers.empty());
  REQUIRE(back.rounds_done.size() == 2);
  CHECK(back.rounds_done[0].ensemble_error == 0);
  CHECK(back.rounds_done[0].trained_rows == 2048);
  j["rounds_done"][1]["ece"] = "low";
  CHECK_FALSE(SnapshotFromJson(j).rounds_done[1].figure("ece").has_value());
  CHECK(SnapshotFromJson(json("not an object")).run_name.empty());
  CHECK(SnapshotFromJson(json::array()).rounds_done.empty());
}

TEST_CASE("a round's calibration comes from its summary - one written before it has none, shown as a dash",
          "[snapshot][calibration]") {
  const json regression = {{"member_rmse_mean", 1.0},       {"member_rmse_std", 0.1},  {"ensemble_rmse", 0.8},
                           {"ensemble_error", 0.8},         {"coverage_1sigma", 0.62}, {"coverage_2sigma", 0.91},
                           {"ensemble_gaussian_nll", 1.25}};
  const RoundView r = RoundView::FromSummary(1, 100, regression, 2.0);
  CHECK(r.figure("coverage_1sigma") == 0.62);
  CHECK(r.figure("coverage_2sigma") == 0.91);
  CHECK(r.figure("holdout_nll") == 1.25);
  CHECK_FALSE(r.figure("ece").has_value());
  const json classification = {{"member_accuracy_mean", 0.8}, {"ensemble_accuracy", 0.9}, {"ensemble_nll", 0.3},
                               {"ensemble_brier", 0.1},       {"ensemble_ece", 0.05}};
  const RoundView c = RoundView::FromSummary(1, 100, classification, 2.0);
  CHECK(c.figure("holdout_nll") == 0.3);
  CHECK(c.figure("ece") == 0.05);
  CHECK_FALSE(c.figure("coverage_1sigma").has_value());
  // A regression summary from before calibration (and its status.json entry) has none of them.
  const RoundView old = RoundView::FromSummary(0, 50, {{"ensemble_rmse", 0.9}}, 1.0);
  CHECK_FALSE(old.figure("coverage_1sigma").has_value());
  CHECK_FALSE(old.figure("holdout_nll").has_value());
  json old_status = SnapshotToJson(RunSnapshot{});
  old_status["rounds_done"] = json::array({{{"round", 0}, {"metric", "RMSE"}, {"ensemble", 0.9}}});
  const RunSnapshot back = SnapshotFromJson(old_status);
  REQUIRE(back.rounds_done.size() == 1);
  CHECK_FALSE(back.rounds_done[0].figure("coverage_2sigma").has_value());

  RunSnapshot s;
  s.rounds_done = {old, r};
  const std::string page = RenderStatusPage(s);
  CHECK(page.find("&plusmn;1&sigma; coverage") != std::string::npos);
  CHECK(page.find("<td>0.6200</td><td>0.9100</td><td>1.2500</td>") != std::string::npos);
  CHECK(page.find("<td>&ndash;</td><td>&ndash;</td><td>&ndash;</td>") != std::string::npos);
  s.rounds_done = {c};
  const std::string classes = RenderStatusPage(s);
  CHECK(classes.find("<th>NLL</th><th>ECE</th>") != std::string::npos);
  CHECK(classes.find("<td>0.3000</td><td>0.0500</td>") != std::string::npos);
}


// The x coordinates of the first polyline of the <svg id="...">: one per point.
std::vector<double> FirstSeriesX(const std::string& page, const std::string& id) {
  const size_t svg = page.find("<svg id=\"" + id + "\"");
  const size_t at = page.find("points=\"", svg);
  std::vector<double> xs;
  if (svg == std::string::npos || at == std::string::npos) return xs;
  const std::string points = page.substr(at + 8, page.find('"', at + 8) - at - 8);
  for (size_t p = 0; p < points.size();) {
    const size_t comma = points.find(',', p), space = points.find(' ', p);
    if (comma == std::string::npos) break;
    xs.push_back(std::stod(points.substr(p, comma - p)));
    p = space == std::string::npos ? points.size() : space + 1;
  }
  return xs;
}

TEST_CASE("the calibrated figures and the reliability curve go from a summary to status.json, the table and the plot",
          "[service][page][calibration]") {
  json e = {{"member_rmse_mean", 1.5}, {"ensemble_rmse", 1.2}, {"coverage_1sigma", 0.5}, {"coverage_2sigma", 0.8},
            {"ensemble_gaussian_nll", 2.5}, {"calibrated_coverage_1sigma", 0.69}, {"calibrated_coverage_2sigma", 0.95},
            {"calibrated_gaussian_nll", 1.9}, {"interval_calibration_error", 0.12},
            {"calibrated_interval_calibration_error", 0.01}};
  std::vector<double> raw, cal;
  for (int j = 0; j < kReliabilityLevels; ++j) {
    raw.push_back(0.6 * kReliabilityNominal[j]);
    cal.push_back(kReliabilityNominal[j] + 0.01);
  }
  e["reliability"] = {{"nominal", kReliabilityNominal}, {"raw", raw}, {"calibrated", cal}};
  const RoundView r = RoundView::FromSummary(3, 500, e, 1.0);
  CHECK(*r.figure("calibrated_coverage_2sigma") == Approx(0.95));
  CHECK(*r.figure("calibrated_nll") == Approx(1.9));
  CHECK(*r.figure("ice") == Approx(0.12));
  REQUIRE(r.reliability_raw.size() == kReliabilityLevels);
  RunSnapshot s;
  s.rounds_done = {r};
  const RunSnapshot back = SnapshotFromJson(SnapshotToJson(s));
  REQUIRE(back.rounds_done.size() == 1);
  CHECK(*back.rounds_done[0].figure("calibrated_coverage_1sigma") == Approx(0.69));
  CHECK(*back.rounds_done[0].figure("calibrated_ice") == Approx(0.01));
  CHECK(back.rounds_done[0].reliability_calibrated == cal);
  const std::string page = RenderStatusPage(s);
  CHECK(page.find("<td>0.6900</td><td>0.9500</td><td>1.9000</td>") != std::string::npos);
  const size_t svg = page.find("<svg id=\"reliability\"");
  REQUIRE(svg != std::string::npos);
  const std::string plot = page.substr(svg, page.find("</svg>", svg) - svg);
  CHECK_THAT(plot, Catch::Contains("observed vs nominal coverage") && Catch::Contains(">raw</text>") &&
                       Catch::Contains(">calibrated</text>"));
  CHECK(FirstSeriesX(page, "reliability").size() == kReliabilityLevels);
  // No curve, no plot (an older summary).
  s.rounds_done = {RoundView::FromSummary(0, 100, {{"ensemble_rmse", 1.0}}, 1.0)};
  CHECK(RenderStatusPage(s).find("<svg id=\"reliability\"") == std::string::npos);
}

TEST_CASE("the page plots the ensemble's error against training rows when they grow, else per round",
          "[service][page]") {
  RunSnapshot s;
  for (auto [round, rows, err] : {std::tuple{0, 100, 2.0}, std::tuple{1, 140, 1.5}, std::tuple{2, 220, 1.0}})
    s.rounds_done.push_back(RoundView::FromSummary(round, static_cast<uint64_t>(rows),
                                                   {{"member_rmse_mean", err + 0.5}, {"ensemble_rmse", err}}, 1.0));
  std::string page = RenderStatusPage(s);
  const std::string svg = page.substr(page.find("<svg id=\"ensemble-error\""));
  CHECK_THAT(svg.substr(0, svg.find("</svg>")), Catch::Contains("by training rows") && Catch::Contains(">100</text>") &&
                                                   Catch::Contains(">220</text>") && Catch::Contains("training rows</text>"));
  std::vector<double> x = FirstSeriesX(page, "ensemble-error");
  REQUIRE(x.size() == 3);
  CHECK((x[1] - x[0]) / (x[2] - x[0]) == Approx(40.0 / 120.0));  // 140 is a third of the way from 100 to 220
  // The same rows every round (mutation none): one point a round, evenly spaced.
  for (RoundView& r : s.rounds_done) r.trained_rows = 100;
  page = RenderStatusPage(s);
  CHECK_THAT(page, Catch::Contains("per round") && Catch::Contains(">round</text>"));
  x = FirstSeriesX(page, "ensemble-error");
  REQUIRE(x.size() == 3);
  CHECK((x[1] - x[0]) / (x[2] - x[0]) == Approx(0.5));
}

// `n` round_committed records as RunProgress::committed holds them; round r's ensemble RMSE is r.
std::vector<RoundCommittedRecord> Committed(int n) {
  std::vector<RoundCommittedRecord> out;
  for (int r = 0; r < n; ++r) {
    RoundCommittedRecord c;
    c.round = r;
    c.trained_rows = static_cast<uint64_t>(100 + 2 * r);
    c.summary = {{"ensemble_rmse", static_cast<double>(r)}, {"member_rmse_mean", r + 0.5}};
    c.wall_seconds = 0.25;
    out.push_back(c);
  }
  return out;
}

TEST_CASE("a snapshot holds the last kRecentRounds committed rounds and the count of all", "[service][window]") {
  RunSnapshot s;
  SetCommittedRounds(&s, Committed(3));
  CHECK(s.rounds_committed == 3);
  REQUIRE(s.rounds_done.size() == 3);
  CHECK(s.rounds_done[0].round == 0);
  CHECK(s.rounds_done[2].ensemble == 2.0);
  CHECK(RenderStatusPage(s).find("the last") == std::string::npos);  // the whole run: nothing to say

  const int n = 2 * kRecentRounds + 50;
  SetCommittedRounds(&s, Committed(n));
  CHECK(s.rounds_committed == n);
  REQUIRE(s.rounds_done.size() == static_cast<size_t>(kRecentRounds));
  CHECK(s.rounds_done.front().round == n - kRecentRounds);
  CHECK(s.rounds_done.back().round == n - 1);
  CHECK(s.rounds_done.back().ensemble == n - 1.0);
  CHECK(s.rounds_done.back().trained_rows == static_cast<uint64_t>(100 + 2 * (n - 1)));
  for (size_t i = 1; i < s.rounds_done.size(); ++i) CHECK(s.rounds_done[i].round == s.rounds_done[i - 1].round + 1);

  // status.json: the window and the count; read back as they were.
  json written = SnapshotToJson(s);
  CHECK(written["rounds_committed"] == n);
  CHECK(written["rounds_done"].size() == static_cast<size_t>(kRecentRounds));
  CHECK(written["rounds_done"][0]["round"] == n - kRecentRounds);
  RunSnapshot back = SnapshotFromJson(written);
  CHECK(back.rounds_committed == n);
  REQUIRE(back.rounds_done.size() == static_cast<size_t>(kRecentRounds));
  CHECK(back.rounds_done.front().round == n - kRecentRounds);
  // A status.json from before the window carried every round: its count is theirs.
  written.erase("rounds_committed");
  CHECK(SnapshotFromJson(written).rounds_committed == kRecentRounds);

  // The page says what it shows, and plots the rounds by their own numbers.
  const std::string page = RenderStatusPage(s);
  const std::string note = "(the last " + std::to_string(kRecentRounds) + " of " + std::to_string(n) + " rounds)";
  CHECK_THAT(page, Catch::Contains("Rounds " + note + "</h2>") && Catch::Contains("a round) " + note + "</text>"));
  CHECK(page.find("<td>" + std::to_string(n - kRecentRounds - 1) + "</td>") == std::string::npos);
  for (RoundView& r : s.rounds_done) r.trained_rows = 100;  // per round: x is the round's position
  std::vector<double> x = FirstSeriesX(RenderStatusPage(s), "ensemble-error");
  REQUIRE(x.size() == static_cast<size_t>(kRecentRounds));
  CHECK_THAT(RenderStatusPage(s), Catch::Contains(">" + std::to_string(n - kRecentRounds + 1) + "</text>") &&
                                      Catch::Contains(">" + std::to_string(n) + "</text>"));
}

TEST_CASE("member curves go through status.json, each thinned to kCurvePoints with its ends kept", "[service]") {
  RunSnapshot s;
  s.curves_round = 4;
  MemberCurve long_one, short_one;
  for (int i = 0; i < 1000; ++i) long_one.loss.push_back(1000.0 - i);
  short_one.loss = {3, 2, 1};
  short_one.val_loss = {4, 3};
  s.curves = {{"m000", long_one}, {"m001", short_one}};
  RunSnapshot back = SnapshotFromJson(SnapshotToJson(s));
  CHECK(back.curves_round == 4);
  REQUIRE(back.curves.size() == 2);
  const MemberCurve& l = back.curves["m000"];
  REQUIRE(l.loss.size() == kCurvePoints);
  CHECK(l.loss.front() == 1000.0);
  CHECK(l.loss.back() == 1.0);
  CHECK(l.val_loss.empty());
  CHECK(back.curves["m001"].loss == std::vector<double>{3, 2, 1});
  CHECK(back.curves["m001"].val_loss == std::vector<double>{4, 3});
}

}  // namespace
}  // namespace ens
