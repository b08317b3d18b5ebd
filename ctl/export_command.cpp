// ensemblectl export: one TorchScript file holding a committed round's members, for serving
// without ensembled. ensemble-worker builds it (ensemblectl never loads libtorch); its
// forward(x) returns (mean, std) over the members.
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "common/base/atomic_file.h"
#include "common/base/exit_codes.h"
#include "common/state/member_view.h"
#include "ctl/commands.h"
#include "common/state/run_layout.h"

namespace ens::ctl {
namespace {

// The checkpoint of every member of `round`, or why one is missing.
StatusOr<std::vector<std::string>> Checkpoints(const CommittedRound& round) {
  if (round.member_dirs.empty())
    return Status::NotFound("round " + std::to_string(round.round) + " has no members to export");
  std::vector<std::string> out;
  for (const auto& dir : round.member_dirs) {
    std::string path = MemberFiles(dir).StoredCheckpoint();
    if (PathExists(dir + "/model") && !MemberFileExists(path))  // a command member's output directory
      return Status::InvalidArgument(dir + ": a command member (model kind \"command\"); its model is its "
                                     "program's, which a TorchScript export cannot hold, so round " +
                                     std::to_string(round.round) + " cannot be exported");
    // The usual cause: the run's config has "save_checkpoints": false (members keep only
    // their predictions and metrics), and nothing can rebuild the weights afterwards.
    if (!MemberFileExists(path))
      return Status::NotFound(path + ": missing; checkpoints are written only when the run's config has "
                              "\"save_checkpoints\": true, so round " + std::to_string(round.round) +
                              " cannot be exported");
    out.push_back(path);
  }
  return out;
}

// A double as text that reads back to the same double.
std::string FullPrecision(double v) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

}  // namespace

int Export(const std::string& state_dir, int round, const std::string& output, bool raw_sigma) {
  auto committed = FindCommittedRound(state_dir, round);
  if (!committed.ok()) {
    std::cerr << "ensemblectl export: " << committed.status().message() << "\n";
    return RoundErrorExitCode(committed.status());
  }
  auto checkpoints = Checkpoints(*committed);
  if (!checkpoints.ok()) {
    std::cerr << "ensemblectl export: " << checkpoints.status().message() << "\n";
    return exit_code::kPermanentFailure;
  }
  std::vector<std::string> argv = {WorkerBinary(), "export", "--output", output};
  if (!raw_sigma && !committed->sigma_maps.empty()) {  // the round's calibration, built into the module
    std::string scales, noises;
    for (const SigmaMap& m : committed->sigma_maps) {
      scales += (scales.empty() ? "" : ",") + FullPrecision(m.scale);
      noises += (noises.empty() ? "" : ",") + FullPrecision(m.noise);
    }
    argv.insert(argv.end(), {"--sigma-scale", scales, "--sigma-noise", noises});
  }
  argv.insert(argv.end(), checkpoints->begin(), checkpoints->end());
  // The worker prints its own error (naming the checkpoint or output at fault) on stderr.
  int rc = RunAndWait(argv);
  if (rc != 0) {
    std::cerr << "ensemblectl export: " << argv[0] << " export failed (exit " << rc << "); " << output
              << " not written\n";
    // A worker that cannot read the checkpoints will not on a retry either; anything else
    // (a crash, no space, no worker binary) may pass.
    return rc == exit_code::kPermanentFailure ? exit_code::kPermanentFailure : exit_code::kTransientFailure;
  }
  if (!PathExists(output)) {
    std::cerr << "ensemblectl export: " << argv[0] << " exited 0 but wrote no " << output << "\n";
    return exit_code::kTransientFailure;
  }
  std::printf("wrote %s: %zu members of round %d\n", output.c_str(), checkpoints->size(), committed->round);
  return exit_code::kOk;
}

int ExportMember(const std::string& state_dir, int round, const std::string& member, const std::string& output) {
  auto committed = FindCommittedRound(state_dir, round);
  if (!committed.ok()) {
    std::cerr << "ensemblectl export: " << committed.status().message() << "\n";
    return RoundErrorExitCode(committed.status());
  }
  std::string checkpoint;
  for (size_t i = 0; i < committed->members.size(); ++i)
    if (committed->members[i] == member) checkpoint = MemberFiles(committed->member_dirs[i]).StoredCheckpoint();
  if (checkpoint.empty() || !MemberFileExists(checkpoint)) {
    std::cerr << "ensemblectl export: member " << member << " of round " << committed->round
              << (checkpoint.empty() ? ": no such member" : ": no checkpoint (" + checkpoint + " missing)") << "\n";
    return exit_code::kPermanentFailure;
  }
  const int rc = RunAndWait({WorkerBinary(), "member-module", "--output", output, checkpoint});
  if (rc != 0) {
    std::cerr << "ensemblectl export: ensemble-worker member-module failed (exit " << rc << "); " << output
              << " not written\n";
    return rc == exit_code::kPermanentFailure ? exit_code::kPermanentFailure : exit_code::kTransientFailure;
  }
  std::printf("wrote %s: member %s of round %d\n", output.c_str(), member.c_str(), committed->round);
  return exit_code::kOk;
}

}  // namespace ens::ctl
