// The status page (GET / on service.http_port) in a real browser: headless Chromium loads it
// from a running daemon, the DOM has both plots with data, and the screenshot is a real PNG.
// Skipped (with a warning) when Chromium is not installed (scripts/setup installs it).
#include <catch2/catch.hpp>

#include <filesystem>
#include <regex>

#include <nlohmann/json.hpp>

#include "support/env_spawn_notify.h"

namespace ens {
namespace {

using json = nlohmann::json;
using namespace ens::testing;

constexpr int kWorkers = 2;

std::string PageConfig(const std::string& state_dir, int port, int members) {
  return R"({
    "run_name": "page", "state_dir": ")" + state_dir + R"(", "run_seed": 31,
    "resources": {"gpus": "none", "cpu_workers": )" + std::to_string(kWorkers) + R"(, "threads_per_worker": 1},
    "data": {"source": "synthetic",
             "synthetic": {"initial_rows": 800, "pool_rows": 3000, "holdout_rows": 300}},
    "members": {"defaults": {"epochs": 60, "batch_size": 32, "layers": [{"units": 32}]},
                "count": )" + std::to_string(members) + R"(,
                "variants": [{"layers": [{"units": 32}]}, {"layers": [{"units": 32, "activation": "tanh"}]}]},
    "mutation": {"policy": "query_by_committee", "k": 40},
    "rounds": {"count": 500}, "pack_size": 1,
    "service": {"http_port": )" + std::to_string(port) + R"(}
  })";
}

std::string FindChromium() {
  for (const char* p : {"/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"})
    if (::access(p, X_OK) == 0) return p;
  return "";
}

// The <svg id="..."> element's text, or "".
std::string SvgById(const std::string& dom, const std::string& id) {
  size_t at = dom.find("<svg id=\"" + id + "\"");
  if (at == std::string::npos) {
    // A browser may serialise attributes in another order: find id="..." inside an <svg ...>.
    at = dom.find("id=\"" + id + "\"");
    if (at == std::string::npos) return "";
    at = dom.rfind("<svg", at);
    if (at == std::string::npos) return "";
  }
  size_t end = dom.find("</svg>", at);
  return end == std::string::npos ? "" : dom.substr(at, end + 6 - at);
}

// Point counts of every <polyline class="series" ... points="..."> in an svg.
std::vector<int> SeriesPointCounts(const std::string& svg) {
  std::vector<int> out;
  static const std::regex poly(R"re(<polyline\b[^>]*>)re");
  static const std::regex cls(R"re(\bclass="series")re");
  static const std::regex pts(R"re(\bpoints="([^"]*)")re");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), poly); it != std::sregex_iterator(); ++it) {
    std::string tag = it->str();
    if (!std::regex_search(tag, cls)) continue;
    std::smatch m;
    int n = 0;
    if (std::regex_search(tag, m, pts)) {
      std::istringstream in(m[1].str());
      std::string p;
      while (in >> p)
        if (std::regex_match(p, std::regex(R"re(-?[0-9.e+-]+,-?[0-9.e+-]+)re"))) ++n;
    }
    out.push_back(n);
  }
  return out;
}

// Members done in a round reach the journal in batches (round_runner.h: when no task runs, or
// once the oldest has waited a second), so on a fast CPU a whole round is one batch and no
// mid-round state is ever seen. Each member's setup is made 2.5 s longer, whatever the CPU:
// a pair of members done is journaled while the next pair still trains.
Daemon StartSlowMembers(const TempDir& tmp) {
  EnvChanges slow;
  slow.set["ENSEMBLED_TEST_SLOW_PHASE"] = "setup:2500";
  return Daemon(SpawnEnv({BinaryPath("ensembled"), "run", "--config", tmp / "cfg.json"}, tmp / "out", tmp / "err", slow));
}

int Max(const std::vector<int>& v) { return v.empty() ? 0 : *std::max_element(v.begin(), v.end()); }

json LiveStatus(const std::string& state, const std::string& scratch) {
  json s = CtlStatusJson(state, scratch);
  return s.is_object() && s["live"].is_object() ? s["live"] : json();
}

// Pauses the run when `want(committed, done_in_current_round)` holds; true when it did.
bool PauseWhen(Daemon& d, const std::string& state, const std::string& scratch, double timeout_s,
               const std::function<bool(int, int)>& want) {
  return WaitUntil(timeout_s, [&] {
    if (d.Exited()) return true;
    int c = RoundsCommitted(state);
    if (!want(c, MembersDone(state, c))) return false;
    return Ctl({"pause", "-s", state}, scratch).code == 0;
  }, 20) && !d.Exited();
}

TEST_CASE("the status page shows the run's plots in a headless browser", "[service][page]") {
  std::string chromium = FindChromium();
  if (chromium.empty()) {
    WARN("chromium is not installed (scripts/setup installs it): skipping the status page test");
    return;
  }
  constexpr int kMembers = 6;
  TempDir tmp;
  std::string state = tmp / "state";
  int port = FreeTcpPort();
  REQUIRE(port > 0);
  WriteText(tmp / "cfg.json", PageConfig(state, port, kMembers));
  Daemon d = StartSlowMembers(tmp);

  // Pause in the middle of a round after a few committed ones: with 1-2 of 6 members done and
  // at most 2 running, the round cannot complete while paused, so both plots have data and the
  // page stays still for the browser.
  bool paused = PauseWhen(d, state, tmp.path(), 180, [](int committed, int done) {
    return committed >= 3 && done >= 1 && done <= 2;
  });
  INFO("stderr:\n" << ReadText(tmp / "err"));
  REQUIRE(paused);
  json live;
  REQUIRE(WaitUntil(60, [&] {
    live = LiveStatus(state, tmp.path());
    return live.is_object() && live.value("members_running", -1) == 0;
  }, 100));
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // the HTTP snapshot is refreshed every second
  int committed = RoundsCommitted(state);
  REQUIRE(committed >= 3);
  REQUIRE(MembersDone(state, committed) >= 1);
  REQUIRE(MembersDone(state, committed) < kMembers);

  std::string url = "http://127.0.0.1:" + std::to_string(port) + "/";
  auto direct = HttpGet("127.0.0.1", port, "/");
  REQUIRE(direct.status == 200);
  CHECK(direct.headers.find("text/html") != std::string::npos);

  std::vector<std::string> common = {chromium, "--headless", "--no-sandbox", "--disable-gpu",
                                     "--disable-dev-shm-usage", "--no-first-run", "--user-data-dir=" + tmp / "chrome",
                                     "--window-size=1280,1000"};
  EnvChanges env;
  env.set["HOME"] = tmp.path();
  auto dump_argv = common;
  dump_argv.push_back("--dump-dom");
  dump_argv.push_back(url);
  auto dom = RunWithEnv(dump_argv, tmp.path(), env, 90);
  INFO("chromium --dump-dom: exit " << dom.code << (dom.timed_out ? " (timed out)" : "") << "\nstderr:\n"
                                    << dom.err.substr(0, 4000));
  REQUIRE(dom.code == 0);
  INFO("DOM:\n" << dom.out.substr(0, 20000));
  std::string ens_svg = SvgById(dom.out, "ensemble-error");
  std::string curves_svg = SvgById(dom.out, "member-curves");
  REQUIRE_FALSE(ens_svg.empty());
  REQUIRE_FALSE(curves_svg.empty());
  auto ens_points = SeriesPointCounts(ens_svg);
  auto curve_points = SeriesPointCounts(curves_svg);
  CHECK(ens_points.size() >= 1);
  CHECK(Max(ens_points) >= committed);  // one point per committed round
  CHECK(curve_points.size() >= 1);
  CHECK(Max(curve_points) >= 2);  // an epoch curve, not a dot
  CHECK(dom.out.find("id=\"rounds\"") != std::string::npos);
  // The current round by its own number (as in the rounds table and rounds/rNNNN), then its position.
  CHECK(dom.out.find("round " + std::to_string(committed) + " (" + std::to_string(committed + 1) + " of ") !=
        std::string::npos);
  CHECK(dom.out.find("paused") != std::string::npos);

  auto shot_argv = common;
  shot_argv.push_back("--screenshot=" + tmp / "page.png");
  shot_argv.push_back(url);
  auto shot = RunWithEnv(shot_argv, tmp.path(), env, 90);
  INFO("chromium --screenshot: exit " << shot.code << "\nstderr:\n" << shot.err.substr(0, 4000));
  CHECK(shot.code == 0);
  std::string png = ReadText(tmp / "page.png");
  REQUIRE(png.size() > 8);
  CHECK(png.compare(0, 8, std::string("\x89PNG\r\n\x1a\n", 8)) == 0);
  CHECK(png.size() > 20 * 1024);
  // Kept beside the binaries for a look (docs/status_page.png is a copy of one).
  std::error_code ec;
  std::filesystem::copy_file(tmp / "page.png", std::string(ENS_BINARY_DIR) + "/status_page.png",
                             std::filesystem::copy_options::overwrite_existing, ec);

  CHECK(d.Stop(/*now=*/true) == 0);
}

// run_snapshot.h documents RunSnapshot::curves as "members of the current (or last) round",
// but Supervisor::Run() clears curves_ at the start of every round
// (orchestrator/run/supervisor.cpp, `curves_.clear()` before RunRound), so from a round boundary
// until the first member of the new round finishes — the whole time, when paused between
// rounds — the page's member-curves plot says "no data yet".
TEST_CASE("right after a round boundary the member-curves plot still shows the last round's curves",
          "[service][page]") {
  constexpr int kMembers = 4;
  TempDir tmp;
  std::string state = tmp / "state";
  int port = FreeTcpPort();
  REQUIRE(port > 0);
  WriteText(tmp / "cfg.json", PageConfig(state, port, kMembers));
  Daemon d = StartSlowMembers(tmp);
  // Pause while the last two members of a round run: they finish, the round commits, and the
  // next round dispatches nothing.
  int round = -1;
  bool paused = PauseWhen(d, state, tmp.path(), 180, [&](int committed, int done) {
    round = committed;
    return committed >= 1 && done == kMembers - kWorkers;
  });
  INFO("stderr:\n" << ReadText(tmp / "err"));
  REQUIRE(paused);
  REQUIRE(WaitUntil(60, [&] {
    json live = LiveStatus(state, tmp.path());
    return RoundsCommitted(state) == round + 1 && live.is_object() && live.value("members_running", -1) == 0;
  }, 100));
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  REQUIRE(MembersDone(state, round + 1) == 0);
  auto page = HttpGet("127.0.0.1", port, "/");
  REQUIRE(page.status == 200);
  std::string curves_svg = SvgById(page.body, "member-curves");
  INFO("member-curves svg:\n" << curves_svg);
  REQUIRE_FALSE(curves_svg.empty());
  CHECK(Max(SeriesPointCounts(curves_svg)) >= 2);
  CHECK(curves_svg.find("no data yet") == std::string::npos);
  d.Stop(/*now=*/true);
}

}  // namespace
}  // namespace ens
