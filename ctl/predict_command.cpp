#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>

#include "common/base/atomic_file.h"
#include "common/config/class_list.h"
#include "common/state/member_view.h"
#include "common/data/data_source.h"
#include "common/base/env_vars.h"
#include "common/base/exit_codes.h"
#include "common/base/fd_io.h"
#include "common/state/journal.h"
#include "common/base/logging.h"
#include "common/state/member_result.h"
#include "common/data/npy_writer.h"
#include "common/config/run_head.h"
#include "common/state/run_layout.h"
#include "common/base/subprocess.h"
#include "ctl/commands.h"
#include "common/scoring/committee_score.h"

namespace ens::ctl {

using json = nlohmann::json;

int RunAndWait(const std::vector<std::string>& argv, const std::string& stdout_path) {
  std::fflush(stdout);
  SubprocessSpec spec;
  spec.argv = argv;
  spec.stdout_file = stdout_path;
  auto child = Subprocess::Start(spec);
  if (!child.ok()) {
    std::fprintf(stderr, "%s\n", child.status().message().c_str());
    return 127;
  }
  ExitInfo e = child->Wait();
  return e.signaled ? -e.signal : e.code;
}

std::string WorkerBinary() {
  const char* env = EnvVarValue(EnvVar::kWorker);
  return env ? env : SelfDir() + "/ensemble-worker";
}

// "rounds that still have them: 0, 7-9" (each committed round whose files are all there).
static std::string KeptRounds(const std::vector<RoundFiles>& files) {
  std::string out;
  for (size_t r = 0; r < files.size(); ++r) {
    if (files[r] != RoundFiles::kAll || (r > 0 && files[r - 1] == RoundFiles::kAll)) continue;
    size_t end = r;
    while (end + 1 < files.size() && files[end + 1] == RoundFiles::kAll) ++end;
    out += (out.empty() ? "" : ", ") + std::to_string(r) + (end > r ? "-" + std::to_string(end) : "");
  }
  return "rounds that still have them: " + (out.empty() ? std::string("none") : out);
}

StatusOr<CommittedRound> FindCommittedRound(const std::string& state_dir, int round, bool open_round) {
  RunLayout layout(state_dir);
  auto recs = ReadJournal(layout.JournalFile());
  if (!recs.ok()) {
    const Status& s = recs.status();
    if (s.code() != Status::Code::kNotFound) return s;
    return Status::NotFound(s.message() + " (no run in " + state_dir + "?)");
  }
  RunProgress p = ReplayJournal(*recs);
  if (open_round && round >= 0 && round == p.next_round && !p.done.empty()) {
    CommittedRound out;
    out.round = round;
    for (const auto& [name, rec] : p.done) {
      out.members.push_back(name);
      out.member_dirs.push_back(layout.MemberDir(round, name));
    }
    return out;
  }
  if (p.committed.empty()) return Status::NotFound("no round of " + state_dir + " is committed yet");
  const int last = p.committed.back().round;
  if (round < 0) round = last;
  if (round >= static_cast<int>(p.committed.size()))
    return Status::InvalidArgument("round " + std::to_string(round) + " is not committed (last: " +
                                   std::to_string(last) + ")");
  if (round < static_cast<int>(p.round_files.size()) && p.round_files[static_cast<size_t>(round)] != RoundFiles::kAll)
    return Status::InvalidArgument("round " + std::to_string(round) +
                                   "'s predictions and checkpoints were removed by the run's retention policy "
                                   "(config \"retention\"; its metrics and history remain): " +
                                   KeptRounds(p.round_files) + "; pin a round in retention.pin to keep it");
  const std::string path = layout.SummaryFile(round);
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  json summary = json::parse(*text, nullptr, false);
  if (summary.is_discarded() || !summary.is_object() || !summary.contains("members") ||
      !summary["members"].is_array())
    return Status::Corruption(path + ": not a round summary");
  CommittedRound out;
  out.round = round;
  if (summary.contains("ensemble") && summary["ensemble"].is_object()) {
    const json& e = summary["ensemble"];
    if (e.contains("sigma_calibration") && e["sigma_calibration"].is_array())
      for (const auto& m : e["sigma_calibration"])
        if (m.is_object()) out.sigma_maps.push_back({m.value("scale", 1.0), m.value("noise", 0.0)});
    if (e.contains("temperature") && e["temperature"].is_number()) out.temperature = e["temperature"].get<double>();
  }
  for (const auto& m : summary["members"]) {
    std::string name = m.is_object() ? m.value("member", "") : "";
    if (name.empty()) return Status::Corruption(path + ": a member without a name");
    out.members.push_back(name);
    out.member_dirs.push_back(layout.MemberDir(round, name));
  }
  return out;
}

int RoundErrorExitCode(const Status& s) {
  return s.code() == Status::Code::kInvalidArgument ? exit_code::kUsage : exit_code::kPermanentFailure;
}

namespace {

// A command member's predictions of the rows in `input_npy` through its predict_argv.
StatusOr<std::vector<float>> CommandMemberPredict(const std::string& member_dir, const MemberSpec& spec,
                                                  const std::string& input_npy, uint64_t rows,
                                                  const std::string& scratch) {
  if (spec.model.predict_argv.empty())
    return Status::InvalidArgument("member " + spec.name + " is a command member without model.predict_argv: it "
                                   "cannot predict new rows (README \"Command members\")");
  const std::string out = scratch + "/pred-" + spec.name + ".npy";
  SubprocessSpec run;
  run.argv = spec.model.predict_argv;
  run.set_env = {{"ENSEMBLED_MEMBER", spec.name},
                 {"ENSEMBLED_MEMBER_DIR", member_dir},
                 {"ENSEMBLED_MODEL_DIR", MemberFiles(member_dir).CommandModel()},
                 {"ENSEMBLED_PREDICT_X", input_npy},
                 {"ENSEMBLED_PREDICT_OUTPUT", out}};
  run.stderr_to_stdout = true;
  auto done = RunToEnd(run, "", spec.model.timeout_s, {}, size_t{1} << 20);
  if (!done.ok()) return Status::Internal("member " + spec.name + ": predict_argv: " + done.status().message());
  if (!done->exit.ok())
    return Status::Internal("member " + spec.name + ": predict_argv " + done->exit.Describe() +
                            (done->out.empty() ? "" : "; its output ends: " + done->out.substr(done->out.size() > 800 ? done->out.size() - 800 : 0)));
  auto preds = LoadNpyColumn(out, rows);
  if (!preds.ok()) return Status::InvalidArgument("member " + spec.name + ": " + preds.status().message());
  return preds;
}

// A round's members ready to predict batch after batch: the built-in members through one
// `ensemble-worker predict --stream` that loads their checkpoints once, command members each
// through their predict_argv (one run per batch).
class RoundPredictor {
 public:
  // classes: the run's class count (0: regression); targets: its regression target count.
  Status Open(const CommittedRound& committed, int features, size_t classes, size_t targets, const std::string& scratch) {
    committed_ = &committed;
    scratch_ = scratch;
    head_ = RunHead::For(LossKind::kMse, static_cast<int>(classes), static_cast<int>(targets));
    std::vector<std::string> argv = {WorkerBinary(), "predict", "--stream", "--features", std::to_string(features)};
    for (size_t m = 0; m < committed.member_dirs.size(); ++m) {
      const std::string& dir = committed.member_dirs[m];
      auto text = ReadMemberFile(MemberFiles(dir).Member());
      if (!text.ok()) return text.status();
      json record = json::parse(*text, nullptr, false);
      MemberSpec spec;
      if (!record.is_object() || !record.contains("spec") || !MemberFromJson(record["spec"], &spec).ok())
        return Status::Corruption(dir + "/member.json: not a member record");
      if (TraitsOf(spec.model.kind).program) {
        if (spec.model.predict_argv.empty())  // said before any row is read
          return Status::InvalidArgument("member " + spec.name + " is a command member without model.predict_argv: "
                                         "it cannot predict new rows (README \"Command members\")");
        commands_.push_back({m, spec});
        continue;
      }
      // The members' loss says whether the head is Gaussian (every member of the run or none).
      head_ = RunHead::For(spec.loss, static_cast<int>(classes), static_cast<int>(targets));
      builtin_.push_back(m);
      argv.push_back(MemberFiles(dir).StoredCheckpoint());
    }
    if (builtin_.empty()) return Status::Ok();
    SubprocessSpec spec;
    spec.argv = argv;
    spec.stdin_mode = SubprocessSpec::Stdio::kPipe;
    spec.stdout_mode = SubprocessSpec::Stdio::kPipe;
    auto worker = Subprocess::Start(spec);
    if (!worker.ok()) return worker.status();
    worker_ = std::move(*worker);
    return Status::Ok();
  }

  // [members x rows x width] in the round's member order.
  StatusOr<std::vector<float>> Predict(const Table& table) {
    const size_t k = committed_->member_dirs.size(), rows = table.rows() * static_cast<size_t>(head_.OutputWidth());
    std::vector<float> out(k * rows);
    if (!commands_.empty()) {
      const std::string input = scratch_ + "/in.npy";
      Status s = WriteNpyFloat32(input, table.x.data(), rows, table.features, table.features);
      if (!s.ok()) return s;
      for (const auto& [m, spec] : commands_) {
        auto p = CommandMemberPredict(committed_->member_dirs[m], spec, input, rows, scratch_);
        if (!p.ok()) return p.status();
        std::copy(p->begin(), p->end(), out.begin() + static_cast<std::ptrdiff_t>(m * rows));
      }
    }
    if (builtin_.empty() || rows == 0) return out;
    const uint64_t n = table.rows();
    std::vector<float> answer(builtin_.size() * rows);
    Status s = WriteFull(worker_.stdin_fd(), &n, sizeof n, "to ensemble-worker predict");
    if (s.ok()) s = WriteFull(worker_.stdin_fd(), table.x.data(), table.x.size() * sizeof(float), "to ensemble-worker predict");
    if (s.ok()) s = ReadFull(worker_.stdout_fd(), answer.data(), answer.size() * sizeof(float), "from ensemble-worker predict");
    if (!s.ok()) {
      worker_.CloseStdin();
      const ExitInfo e = worker_.Wait();
      return Status::Internal("ensemble-worker predict " + e.Describe() + " (its message is above)");
    }
    for (size_t i = 0; i < builtin_.size(); ++i)
      std::copy(answer.begin() + static_cast<std::ptrdiff_t>(i * rows),
                answer.begin() + static_cast<std::ptrdiff_t>((i + 1) * rows),
                out.begin() + static_cast<std::ptrdiff_t>(builtin_[i] * rows));
    return out;
  }

  // Ends the worker's stream and waits for it.
  void Close() {
    if (!worker_.valid()) return;
    worker_.CloseStdin();
    (void)worker_.Wait();
  }

 private:
  const CommittedRound* committed_ = nullptr;
  std::string scratch_;
  std::vector<size_t> builtin_;
  std::vector<std::pair<size_t, MemberSpec>> commands_;
  RunHead head_ = RunHead::Regression();
  Subprocess worker_;

 public:
  bool gaussian() const { return head_.gaussian(); }
  size_t members() const { return committed_->member_dirs.size(); }
};

// A value as the shortest text that reads back (strtof, numpy.float32, torch) to the same
// float32: the members' outputs are float32, so nothing of them is lost, and two predictions
// are the same bits exactly when their texts are equal. Means and stds are computed in double
// and rounded to float32 once, here.
std::string F32(double v) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, static_cast<float>(v));
  return std::string(buf, r.ptr);
}

// One CSV block: a header, then per row its ensemble mean and std over the members; for a
// classifier (classes non-empty), the class of highest mean probability, each class's mean
// probability (p_<label>), and the members' disagreement (BALD, committee_score.h).
// Gaussian heads: the mixture's mean, aleatoric std (sqrt of the mean variance), epistemic
// std (of the means) and total std. Several regression targets (targets.size() > 1): per
// target t, in order, <t>_mean and <t>_std.
// `calibration`: the round's (CommittedRound), applied to the std (a Gaussian head's total std)
// or, for a classifier, to the mean probabilities; nullptr: the raw figures.
void WriteBlock(std::ostream& out, const std::vector<float>& preds, size_t members, size_t rows,
                const std::vector<std::string>& classes, bool gaussian, const std::vector<std::string>& targets,
                const CommittedRound* calibration) {
  auto calibrated = [&](double sigma, size_t target) {
    if (calibration == nullptr || target >= calibration->sigma_maps.size()) return sigma;
    return calibration->sigma_maps[target].Apply(sigma);
  };
  if (gaussian) {
    out << "row,mean,aleatoric_std,epistemic_std,total_std\n";
    for (size_t r = 0; r < rows; ++r) {
      double sum = 0, sq = 0, var = 0;
      for (size_t m = 0; m < members; ++m) {
        const double mu = preds[(m * rows + r) * 2];
        sum += mu, sq += mu * mu, var += preds[(m * rows + r) * 2 + 1];
      }
      const double k = static_cast<double>(members), mean = sum / k;
      const double alea = var / k, epi = std::max(0.0, sq / k - mean * mean);
      out << r << "," << F32(mean) << "," << F32(std::sqrt(alea)) << "," << F32(std::sqrt(epi)) << ","
          << F32(calibrated(std::sqrt(alea + epi), 0)) << "\n";
    }
    return;
  }
  if (!classes.empty()) {
    const size_t w = classes.size();
    std::vector<std::vector<float>> per(members);
    std::vector<const std::vector<float>*> ptrs;
    for (size_t m = 0; m < members; ++m) {
      per[m].assign(preds.begin() + static_cast<std::ptrdiff_t>(m * rows * w),
                    preds.begin() + static_cast<std::ptrdiff_t>((m + 1) * rows * w));
      ptrs.push_back(&per[m]);
    }
    std::vector<double> mean = MeanPrediction(ptrs);
    if (calibration != nullptr && calibration->temperature != 1.0) mean = Temper(mean, w, calibration->temperature);
    const std::vector<double> bald = CommitteeScores(CommitteeScore::kBald, ptrs, static_cast<int>(w));
    out << "row,class";
    for (const auto& c : classes) out << ",p_" << c;
    out << ",disagreement\n";
    for (size_t r = 0; r < rows; ++r) {
      const double* p = &mean[r * w];
      out << r << "," << classes[static_cast<size_t>(std::max_element(p, p + w) - p)];
      for (size_t c = 0; c < w; ++c) out << "," << F32(p[c]);
      out << "," << F32(bald[r]) << "\n";
    }
    return;
  }
  const size_t w = std::max<size_t>(targets.size(), 1);
  out << "row";
  if (w == 1) out << ",mean,std";
  for (size_t t = 0; w > 1 && t < w; ++t) out << "," << targets[t] << "_mean," << targets[t] << "_std";
  out << "\n";
  for (size_t r = 0; r < rows; ++r) {
    out << r;
    for (size_t t = 0; t < w; ++t) {
      double sum = 0, sq = 0;
      for (size_t m = 0; m < members; ++m) {
        double v = preds[(m * rows + r) * w + t];
        sum += v;
        sq += v * v;
      }
      double mean = sum / static_cast<double>(members);
      out << "," << F32(mean) << ","
          << F32(calibrated(std::sqrt(std::max(0.0, sq / static_cast<double>(members) - mean * mean)), t));
    }
    out << "\n";
  }
}

int ExitCodeOfPredict(const Status& s) {
  return s.code() == Status::Code::kInvalidArgument || s.code() == Status::Code::kCorruption
             ? exit_code::kPermanentFailure
             : exit_code::kTransientFailure;
}

// --input -: batches of CSV rows on stdin (the header line once, first; a blank line ends a
// batch), each answered with its CSV block and a blank line, flushed, before the next is read.
int PredictStdin(RoundPredictor& predictor, const std::vector<std::string>& names,
                 const std::vector<std::string>& classes, const std::vector<std::string>& targets,
                 const std::string& scratch, const CommittedRound* calibration, std::ostream& out) {
  std::string header, line;
  if (!std::getline(std::cin, header)) return exit_code::kOk;  // no input, no batches
  int batch = 0;
  bool more = true;
  while (more) {
    std::string text = header + "\n";
    size_t lines = 0;
    while ((more = static_cast<bool>(std::getline(std::cin, line))) && !line.empty() && line != "\r") {
      text += line + "\n";
      ++lines;
    }
    if (lines == 0) continue;
    ++batch;
    const std::string path = scratch + "/batch.csv";
    Status s = WriteFileReplace(path, text);
    auto table = s.ok() ? LoadCsv(path, names, "") : StatusOr<Table>(s);
    if (!table.ok()) {
      std::string msg = table.status().message();
      if (msg.rfind(path, 0) == 0) msg = "stdin batch " + std::to_string(batch) + msg.substr(path.size());
      std::cerr << "ensemblectl predict: " << msg << "\n";
      return exit_code::kPermanentFailure;
    }
    auto preds = predictor.Predict(*table);
    if (!preds.ok()) {
      std::cerr << "ensemblectl predict: " << preds.status().message() << "\n";
      return ExitCodeOfPredict(preds.status());
    }
    WriteBlock(out, *preds, predictor.members(), table->rows(), classes, predictor.gaussian(), targets, calibration);
    out << "\n";
    out.flush();
    if (!out) return exit_code::kTransientFailure;
  }
  return exit_code::kOk;
}

}  // namespace

int Predict(const std::string& state_dir, int round, const std::string& input_csv, const std::string& output_csv,
            bool raw_sigma) {
  RunLayout layout(state_dir);
  auto run_text = ReadFile(layout.RunFile());
  if (!run_text.ok()) {
    std::cerr << "ensemblectl predict: " << run_text.status().message() << "\n";
    return exit_code::kPermanentFailure;
  }
  json run = json::parse(*run_text, nullptr, false);
  auto committed = FindCommittedRound(state_dir, round, /*open_round=*/true);
  if (!committed.ok()) {
    std::cerr << "ensemblectl predict: " << committed.status().message() << "\n";
    return RoundErrorExitCode(committed.status());
  }
  std::vector<std::string> names = run.value("feature_names", std::vector<std::string>{});
  std::vector<std::string> classes;
  if (run.contains("classes")) {
    auto list = ClassList::FromJson(run["classes"], layout.RunFile());
    if (!list.ok()) {
      std::cerr << "ensemblectl predict: " << list.status().message() << "\n";
      return exit_code::kPermanentFailure;
    }
    classes = list->names();
  }
  // Several regression targets (run.json "target_names"); else one.
  std::vector<std::string> targets;
  if (run.contains("target_names") && run["target_names"].is_array())
    for (const auto& t : run["target_names"]) targets.push_back(t.is_string() ? t.get<std::string>() : "");
  std::optional<Table> table;
  if (input_csv != "-") {
    auto loaded = LoadCsv(input_csv, names, "");
    if (!loaded.ok()) {
      std::cerr << "ensemblectl predict: " << loaded.status().message() << "\n";
      return exit_code::kPermanentFailure;
    }
    table = std::move(*loaded);
  }
  char tmpl[] = "/tmp/ensemblectl-predict-XXXXXX";
  if (!::mkdtemp(tmpl)) {
    std::perror("mkdtemp");
    return exit_code::kTransientFailure;
  }
  const std::string tmp = tmpl;
  std::ofstream file;
  if (output_csv != "-") file.open(output_csv);
  std::ostream& out = output_csv == "-" ? std::cout : file;
  const CommittedRound* calibration = raw_sigma ? nullptr : &*committed;
  RoundPredictor predictor;
  Status opened = predictor.Open(*committed, static_cast<int>(names.size()), classes.size(), targets.size(), tmp);
  int rc = exit_code::kOk;
  if (!opened.ok()) {
    std::cerr << "ensemblectl predict: " << opened.message() << "\n";
    rc = ExitCodeOfPredict(opened);
  } else if (input_csv == "-") {
    rc = PredictStdin(predictor, names, classes, targets, tmp, calibration, out);
  } else {
    auto preds = predictor.Predict(*table);
    if (!preds.ok()) {
      std::cerr << "ensemblectl predict: " << preds.status().message() << "\n";
      rc = ExitCodeOfPredict(preds.status());
    } else {
      WriteBlock(out, *preds, committed->member_dirs.size(), table->rows(), classes, predictor.gaussian(), targets,
                 calibration);
    }
  }
  predictor.Close();
  (void)RemoveTree(tmp);  // best effort: a leftover dir in /tmp does not change the predictions
  if (rc != exit_code::kOk) return rc;
  if (!out) {
    std::cerr << "ensemblectl predict: cannot write " << output_csv << "\n";
    return exit_code::kTransientFailure;
  }
  return exit_code::kOk;
}

}  // namespace ens::ctl
