// RenderStatusPage: the run at a glance, with SVG plots rendered here (no scripts, no
// assets fetched from anywhere).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "orchestrator/service/html_escape.h"
#include "orchestrator/service/run_snapshot.h"

namespace ens {
namespace {

struct Series {
  std::string name, color;
  std::vector<double> y;
  bool dashed = false;
  std::vector<double> x = {};  // empty: y's index (1-based); else one x per y
};

const char* kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"};

// A line chart: x = the series' x values, else the index (1-based); both axes auto-scaled;
// log-free and dependency-free.
std::string LineChart(const std::string& id, const std::string& title, const std::string& xlabel,
                      const std::vector<Series>& series) {
  const double w = 560, h = 300, l = 60, r = 150, t = 30, b = 40;
  double lo = INFINITY, hi = -INFINITY, x_lo = INFINITY, x_hi = -INFINITY;
  size_t n = 0;
  for (const auto& s : series) {
    for (double v : s.y)
      if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
    n = std::max(n, s.y.size());
    for (size_t i = 0; i < s.y.size(); ++i) {
      const double xv = s.x.empty() ? static_cast<double>(i + 1) : s.x[i];
      x_lo = std::min(x_lo, xv), x_hi = std::max(x_hi, xv);
    }
  }
  std::ostringstream o;
  o << "<svg id=\"" << id << "\" class=\"plot\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" << w << "\" height=\"" << h
    << "\" font-family=\"sans-serif\" font-size=\"11\"><rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>"
    << "<text x=\"" << (l + (w - l - r) / 2) << "\" y=\"18\" text-anchor=\"middle\" font-size=\"13\">" << HtmlEscape(title)
    << "</text>";
  o << "<line x1=\"" << l << "\" y1=\"" << h - b << "\" x2=\"" << w - r << "\" y2=\"" << h - b << "\" stroke=\"#000\"/>"
    << "<line x1=\"" << l << "\" y1=\"" << t << "\" x2=\"" << l << "\" y2=\"" << h - b << "\" stroke=\"#000\"/>"
    << "<text x=\"" << (l + (w - l - r) / 2) << "\" y=\"" << h - 8 << "\" text-anchor=\"middle\">" << HtmlEscape(xlabel)
    << "</text>";
  if (n == 0 || !std::isfinite(lo)) {
    o << "<text x=\"" << l + 10 << "\" y=\"" << h / 2 << "\">no data yet</text></svg>";
    return o.str();
  }
  if (hi - lo < 1e-12) hi = lo + 1;
  auto X = [&](const Series& s, size_t i) {
    const double xv = s.x.empty() ? static_cast<double>(i + 1) : s.x[i];
    return l + (w - l - r) * (x_hi > x_lo ? (xv - x_lo) / (x_hi - x_lo) : 0.5);
  };
  auto Y = [&](double v) { return h - b - (h - b - t) * (v - lo) / (hi - lo); };
  for (int k = 0; k <= 4; ++k) {
    double v = lo + (hi - lo) * k / 4;
    char label[32];
    std::snprintf(label, sizeof(label), "%.3g", v);
    o << "<text x=\"" << l - 4 << "\" y=\"" << Y(v) + 4 << "\" text-anchor=\"end\">" << label << "</text>";
  }
  char x_first[32], x_last[32];
  std::snprintf(x_first, sizeof(x_first), "%.6g", x_lo);
  std::snprintf(x_last, sizeof(x_last), "%.6g", x_hi);
  o << "<text x=\"" << l << "\" y=\"" << h - b + 14 << "\" text-anchor=\"middle\">" << x_first << "</text><text x=\""
    << w - r << "\" y=\"" << h - b + 14 << "\" text-anchor=\"middle\">" << x_last << "</text>";
  for (size_t k = 0; k < series.size(); ++k) {
    const Series& s = series[k];
    o << "<polyline class=\"series\" fill=\"none\" stroke=\"" << s.color << "\" stroke-width=\"1.5\""
      << (s.dashed ? " stroke-dasharray=\"4 3\"" : "") << " points=\"";
    for (size_t i = 0; i < s.y.size(); ++i)
      if (std::isfinite(s.y[i])) o << X(s, i) << "," << Y(s.y[i]) << " ";
    o << "\"/>";
    if (k < 16)
      o << "<text x=\"" << w - r + 8 << "\" y=\"" << t + 12 * k + 8 << "\" fill=\"" << s.color << "\">" << HtmlEscape(s.name)
        << "</text>";
  }
  o << "</svg>";
  return o.str();
}

// The page's head (title, style, a refresh every 10 s) and the run's one-line summary.
void WriteHeader(std::ostream& o, const RunSnapshot& s) {
  o << "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><meta http-equiv=\"refresh\" content=\"10\">"
    << "<title>ensembled: " << HtmlEscape(s.run_name) << "</title><style>body{font-family:sans-serif;margin:20px}"
    << "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}"
    << ".plots{display:flex;flex-wrap:wrap;gap:16px}</style></head><body>";
  o << "<h1>ensembled: " << HtmlEscape(s.run_name) << "</h1><p id=\"summary\">";
  if (s.finished)
    o << "finished (" << HtmlEscape(s.finish_reason) << ") after " << s.rounds_committed << " round"
      << (s.rounds_committed == 1 ? "" : "s") << " of " << s.members_total << " members";
  else
    o << RoundPosition(s.round, s.rounds) << " &middot; " << s.members_done << "/" << s.members_total
      << " members done, " << s.members_running << " running, " << s.members_failed_round << " failed";
  o << " &middot; config epoch " << s.config_epoch
    << " &middot; dataset generation " << s.dataset_generation << ", "
    << s.dataset_rows << " training rows" << (s.paused ? " &middot; <b>paused</b>" : "")
    << (s.stopping ? " &middot; <b>stopping</b>" : "") << "</p>";
}

// " (the last 100 of 2500 rounds)" when the snapshot holds only the last kRecentRounds of the
// committed rounds (run_snapshot.h), else "": what the chart and the table show is then said.
std::string WindowNote(const RunSnapshot& s) {
  if (static_cast<size_t>(s.rounds_committed) <= s.rounds_done.size()) return "";
  return " (the last " + std::to_string(s.rounds_done.size()) + " of " + std::to_string(s.rounds_committed) +
         " rounds)";
}

// The last committed round's reliability plot (regression): observed coverage of the
// ensemble's central intervals against their nominal level, raw and calibrated, beside the
// diagonal a calibrated ensemble follows. Below the diagonal: intervals too narrow. Nothing
// where the round has no curve (classification, one member, an older summary).
std::string ReliabilityChart(const RunSnapshot& s) {
  if (s.rounds_done.empty() || s.rounds_done.back().reliability_raw.size() != kReliabilityLevels) return "";
  const RoundView& r = s.rounds_done.back();
  const std::vector<double> nominal(kReliabilityNominal.begin(), kReliabilityNominal.end());
  std::vector<Series> series = {{"nominal (ideal)", kPalette[7], nominal, true, nominal},
                                {"raw", kPalette[3], r.reliability_raw, false, nominal}};
  if (r.reliability_calibrated.size() == kReliabilityLevels)
    series.push_back({"calibrated", kPalette[2], r.reliability_calibrated, false, nominal});
  return LineChart("reliability", "Round " + std::to_string(r.round) + ": observed vs nominal coverage",
                   "nominal coverage of mean +- z sigma", series);
}

// The two plots: the ensemble's and the members' mean holdout score (RMSE or accuracy) of each committed round
// the snapshot holds, and the current round's members' loss curves.
void WritePlots(std::ostream& o, const RunSnapshot& s, TaskKind task) {
  const std::string metric(RoundView::ScoreName(task));
  std::vector<Series> ens, curves;
  // Against the rows each round trained on, when they grow from round to round: a learning
  // curve (active learning's question is how fast the error falls per labelled row); else
  // (the same data every round, or rows dropped) against the round.
  Series e{"ensemble " + metric, kPalette[0], {}}, m{"member " + metric + " (mean)", kPalette[1], {}, true};
  // Per round, x is the round's position (round + 1): the index of a whole run's list, and still
  // the right rounds when the snapshot holds only the last ones.
  bool by_rows = s.rounds_done.size() > 1;
  std::vector<double> positions;
  for (size_t i = 0; i < s.rounds_done.size(); ++i) {
    const RoundView& r = s.rounds_done[i];
    e.y.push_back(r.ensemble);
    m.y.push_back(r.member_mean);
    e.x.push_back(static_cast<double>(r.trained_rows));
    positions.push_back(r.round + 1.0);
    by_rows = by_rows && (i == 0 || r.trained_rows > s.rounds_done[i - 1].trained_rows);
  }
  if (!by_rows) e.x = std::move(positions);
  m.x = e.x;
  ens = {e, m};
  size_t k = 0;
  for (const auto& [name, c] : s.curves) {
    const char* color = kPalette[k++ % 8];
    curves.push_back({name + " loss", color, c.loss});
    curves.push_back({name + " val_loss", color, c.val_loss, true});
  }
  o << "<div class=\"plots\">"
    << LineChart("ensemble-error",
                 "Ensemble holdout " + metric + (by_rows ? " by training rows (a point a round)" : " per round") +
                     WindowNote(s),
                 by_rows ? "training rows" : "round", ens)
    << LineChart("member-curves", "Round " + std::to_string(s.curves_round) + ": loss (solid) / val_loss (dashed)",
                 "epoch", curves)
    << ReliabilityChart(s) << "</div>";
}

// The GPUs' table and memory plot; nothing when the run sees no GPU. A reading NVML did not
// give shows a dash.
void WriteGpus(std::ostream& o, const RunSnapshot& s) {
  if (s.gpus.empty()) return;
  o << "<h2>GPUs</h2><p id=\"gpu-source\">found through " << HtmlEscape(s.gpu_source) << "</p><table id=\"gpus\"><tr>"
    << "<th>gpu</th><th>uuid</th><th>name</th><th>memory MiB</th><th>util %</th><th>temp &deg;C</th><th>power W</th></tr>";
  auto num = [](double v, const char* fmt) {
    if (v < 0) return std::string("&ndash;");
    char b[32];
    std::snprintf(b, sizeof(b), fmt, v);
    return std::string(b);
  };
  for (const auto& g : s.gpus)
    o << "<tr><td>" << g.index << "</td><td>" << HtmlEscape(g.uuid) << "</td><td>" << HtmlEscape(g.name) << "</td><td>"
      << num(g.memory_used_mb, "%.0f") << " / " << num(g.memory_total_mb, "%.0f") << "</td><td>"
      << num(g.utilization_pct, "%.0f") << "</td><td>" << num(g.temperature_c, "%.0f") << "</td><td>"
      << num(g.power_w, "%.1f") << "</td></tr>";
  o << "</table>";
  std::vector<Series> mem;
  for (size_t i = 0; i < s.gpu_history_mb.size() && i < s.gpus.size(); ++i)
    mem.push_back({"GPU " + std::to_string(s.gpus[i].index), kPalette[i % 8], s.gpu_history_mb[i]});
  o << "<div class=\"plots\">" << LineChart("gpu-memory", "GPU memory used (MiB)", "sample (every few seconds)", mem)
    << "</div>";
}

// The committed rounds' table. Calibration (run_snapshot.h RoundView): regression, the coverage
// of the ensemble's +-1 and 2 sigma intervals and its Gaussian NLL, raw and calibrated;
// classification, NLL and ECE, raw and temperature-scaled. A round whose summary has none
// (written before them) shows a dash.
void WriteRounds(std::ostream& o, const RunSnapshot& s, TaskKind task) {
  const bool classify = task == TaskKind::kClassification;
  const std::string metric(RoundView::ScoreName(task));
  // The figures of kRoundFigures (round_figures.h) this kind of run has, with a column here.
  std::vector<size_t> shown;
  for (size_t i = 0; i < kRoundFigureCount; ++i)
    if (*kRoundFigures[i].html_header != '\0' && *RoundFigureSummaryKey(kRoundFigures[i], classify) != '\0')
      shown.push_back(i);
  o << "<h2>Rounds" << WindowNote(s) << "</h2><table id=\"rounds\"><tr><th>round</th><th>train rows</th>"
    << "<th>member " << metric << "</th><th>ensemble " << metric << "</th>";
  for (size_t i : shown) o << "<th>" << kRoundFigures[i].html_header << "</th>";
  o << "<th>wall s</th></tr>";
  auto figure = [](const std::optional<double>& v) {
    if (!v) return std::string("&ndash;");
    char b[32];
    std::snprintf(b, sizeof(b), "%.4f", *v);
    return std::string(b);
  };
  for (const auto& r : s.rounds_done) {
    char row[256];
    std::snprintf(row, sizeof(row), "<tr><td>%d</td><td>%llu</td><td>%.4f &plusmn; %.4f</td><td>%.4f</td>",
                  r.round, static_cast<unsigned long long>(r.trained_rows), r.member_mean, r.member_std, r.ensemble);
    o << row;
    for (size_t i : shown) o << "<td>" << figure(r.figures[i]) << "</td>";
    std::snprintf(row, sizeof(row), "<td>%.1f</td></tr>", r.wall_seconds);
    o << row;
  }
  o << "</table>";
}

// The workers' table, one row a slot.
void WriteWorkers(std::ostream& o, const RunSnapshot& s) {
  o << "<h2>Workers</h2><table id=\"workers\"><tr><th>slot</th><th>gpu</th><th>pid</th><th>state</th>"
    << "<th>member</th><th>RSS MiB</th><th>GPU MiB</th><th>tasks</th><th>recycles</th></tr>";
  for (const auto& w : s.workers) {
    char row[512];
    char gpu_mb[32] = "&ndash;";
    if (w.gpu_memory_mb >= 0) std::snprintf(gpu_mb, sizeof(gpu_mb), "%.0f", w.gpu_memory_mb);
    std::snprintf(row, sizeof(row), "<tr><td>%d</td><td>%s</td><td>%d</td><td>%s</td><td>%s</td><td>%.1f</td><td>%s</td><td>%d</td><td>%d</td></tr>",
                  w.slot, HtmlEscape(w.gpu).c_str(), w.pid, HtmlEscape(w.state).c_str(), HtmlEscape(w.member).c_str(), w.rss_kb / 1024.0,
                  gpu_mb, w.tasks_since_start, w.recycles);
    o << row;
  }
  o << "</table>";
}

}  // namespace

std::string RenderStatusPage(const RunSnapshot& s) {
  std::ostringstream o;
  const TaskKind task = s.rounds_done.empty() ? TaskKind::kRegression : s.rounds_done.back().task;
  WriteHeader(o, s);
  WritePlots(o, s, task);
  WriteGpus(o, s);
  WriteRounds(o, s, task);
  WriteWorkers(o, s);
  o << "</body></html>";
  return o.str();
}

}  // namespace ens
