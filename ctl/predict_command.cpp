#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>

#include "common/atomic_file.h"
#include "common/data_source.h"
#include "common/exit_codes.h"
#include "common/journal.h"
#include "common/logging.h"
#include "common/member_result.h"
#include "common/run_layout.h"
#include "common/subprocess.h"
#include "ctl/commands.h"

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
  const char* env = std::getenv("ENSEMBLED_WORKER");
  return env ? env : SelfDir() + "/ensemble-worker";
}

StatusOr<CommittedRound> FindCommittedRound(const std::string& state_dir, int round) {
  RunLayout layout(state_dir);
  auto recs = ReadJournal(layout.JournalFile());
  if (!recs.ok()) {
    const Status& s = recs.status();
    if (s.code() != Status::Code::kNotFound) return s;
    return Status::NotFound(s.message() + " (no run in " + state_dir + "?)");
  }
  RunProgress p = ReplayJournal(*recs);
  if (p.committed.empty()) return Status::NotFound("no round of " + state_dir + " is committed yet");
  const int last = p.committed.back().value("round", 0);
  if (round < 0) round = last;
  if (round >= static_cast<int>(p.committed.size()))
    return Status::InvalidArgument("round " + std::to_string(round) + " is not committed (last: " +
                                   std::to_string(last) + ")");
  const std::string path = layout.SummaryFile(round);
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  json summary = json::parse(*text, nullptr, false);
  if (summary.is_discarded() || !summary.is_object() || !summary.contains("members") ||
      !summary["members"].is_array())
    return Status::Corruption(path + ": not a round summary");
  CommittedRound out;
  out.round = round;
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

int Predict(const std::string& state_dir, int round, const std::string& input_csv, const std::string& output_csv) {
  RunLayout layout(state_dir);
  auto run_text = ReadFile(layout.RunFile());
  if (!run_text.ok()) {
    std::cerr << "ensemblectl predict: " << run_text.status().message() << "\n";
    return exit_code::kPermanentFailure;
  }
  json run = json::parse(*run_text, nullptr, false);
  auto committed = FindCommittedRound(state_dir, round);
  if (!committed.ok()) {
    std::cerr << "ensemblectl predict: " << committed.status().message() << "\n";
    return RoundErrorExitCode(committed.status());
  }
  std::vector<std::string> names = run.value("feature_names", std::vector<std::string>{});
  auto table = LoadCsv(input_csv, names, "");
  if (!table.ok()) {
    std::cerr << "ensemblectl predict: " << table.status().message() << "\n";
    return exit_code::kPermanentFailure;
  }
  char tmpl[] = "/tmp/ensemblectl-predict-XXXXXX";
  if (!::mkdtemp(tmpl)) {
    std::perror("mkdtemp");
    return exit_code::kTransientFailure;
  }
  std::string tmp = tmpl;
  if (Status s = WriteFileAtomic(tmp + "/in.f32", FloatsToBytes(table->x)); !s.ok()) {
    std::cerr << "ensemblectl predict: " << s.message() << "\n";
    (void)RemoveTree(tmp);  // best effort: the write already failed
    return ExitCodeFor(s);
  }
  std::vector<std::string> argv = {WorkerBinary(), "predict", "--input", tmp + "/in.f32", "--features",
                                   std::to_string(table->features), "--output", tmp + "/out.f32"};
  for (const auto& dir : committed->member_dirs) argv.push_back(dir + "/checkpoint.pt");
  size_t k = committed->member_dirs.size();
  int rc = RunAndWait(argv);
  auto preds = rc == 0 ? ReadFloats(tmp + "/out.f32", k * table->rows()) : StatusOr<std::vector<float>>(
                                                                          Status::Internal("worker exited with " + std::to_string(rc)));
  (void)RemoveTree(tmp);  // best effort: a leftover dir in /tmp does not change the predictions
  if (!preds.ok()) {
    std::cerr << "ensemblectl predict: " << preds.status().message() << "\n";
    return exit_code::kTransientFailure;
  }
  std::ofstream file;
  if (output_csv != "-") file.open(output_csv);
  std::ostream& out = output_csv == "-" ? std::cout : file;
  out << "row,mean,std\n";
  for (size_t r = 0; r < table->rows(); ++r) {
    double sum = 0, sq = 0;
    for (size_t m = 0; m < k; ++m) {
      double v = (*preds)[m * table->rows() + r];
      sum += v;
      sq += v * v;
    }
    double mean = sum / k;
    out << r << "," << mean << "," << std::sqrt(std::max(0.0, sq / k - mean * mean)) << "\n";
  }
  if (!out) {
    std::cerr << "ensemblectl predict: cannot write " << output_csv << "\n";
    return exit_code::kTransientFailure;
  }
  return exit_code::kOk;
}

}  // namespace ens::ctl
