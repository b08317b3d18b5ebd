// Disk full: the state dir is a 3 MiB tmpfs and the members' checkpoints do not fit. ensembled
// must stop with an error, leave a journal that parses and whose member_done records all point
// at complete member directories, and the state copied to a bigger disk must resume.
// Needs root (mount); otherwise the tests say why and skip.
#include <catch2/catch.hpp>

#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <cstdio>
#include <cstring>

#include <nlohmann/json.hpp>

#include "common/state/journal.h"
#include "common/state/run_layout.h"
#include "support/env_spawn.h"
#include "support/process_harness.h"

namespace ens {
namespace {

using json = nlohmann::json;
using namespace ens::testing;

// ~660 KB per checkpoint ([400, 400] hidden units): round 0's four fit in 3 MiB, round 1's do not.
std::string Config(const std::string& state_dir) {
  return R"({"run_name": "diskfull", "state_dir": ")" + state_dir + R"(", "run_seed": 71,
    "resources": {"gpus": "none", "cpu_workers": 2, "threads_per_worker": 1},
    "data": {"synthetic": {"initial_rows": 200, "pool_rows": 200, "holdout_rows": 100}},
    "members": {"defaults": {"epochs": 2, "batch_size": 32, "layers": [{"units": 400}, {"units": 400}]}, "count": 4},
    "mutation": {"policy": "append_from_pool", "k": 10},
    "max_task_attempts": 1,
    "pack_size": 1,  // one member per task
    "rounds": {"count": 2}})";
}

// Unmounts in every case (also when a REQUIRE throws): retries while busy, then detaches.
class Mount {
 public:
  explicit Mount(std::string dir) : dir_(std::move(dir)) {}
  ~Mount() { Unmount(); }
  std::string Try(const std::string& options) {
    if (::mount("tmpfs", dir_.c_str(), "tmpfs", 0, options.c_str()) != 0)
      return std::string("mount -t tmpfs -o ") + options + " tmpfs " + dir_ + ": " + std::strerror(errno);
    mounted_ = true;
    return "";
  }
  void Unmount() {
    if (!mounted_) return;
    for (int i = 0; i < 50; ++i) {
      if (::umount2(dir_.c_str(), 0) == 0) {
        mounted_ = false;
        return;
      }
      if (errno != EBUSY) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ::umount2(dir_.c_str(), MNT_DETACH);
    mounted_ = false;
  }

 private:
  std::string dir_;
  bool mounted_ = false;
};

struct DiskFull {
  std::string skipped;           // why the scenario could not run ("" when it ran)
  TimedRun run;                  // ensembled on the full tmpfs
  std::string error_lines;       // its "[error]" lines
  std::string mount_dir, state;  // on the tmpfs
  uint64_t free_bytes_after = 0;
  bool journal_ok = false;
  std::string journal_error;
  std::vector<json> recs;
  std::vector<std::string> incomplete;  // member_done records whose directory is not complete
  std::string big_state;                // the copy on the big disk (after the unmount)
  bool unmounted = false;
};

DiskFull RunDiskFull(TempDir& tmp) {
  DiskFull d;
  if (::geteuid() != 0) {
    d.skipped = "not running as root (euid " + std::to_string(::geteuid()) + "): cannot mount a small tmpfs";
    return d;
  }
  struct rlimit no_core {0, 0};
  ::setrlimit(RLIMIT_CORE, &no_core);  // a worker crashing on the full disk must not drop a core here
  d.mount_dir = tmp / "small";
  std::filesystem::create_directories(d.mount_dir);
  Mount m(d.mount_dir);
  d.skipped = m.Try("size=3m");
  if (!d.skipped.empty()) return d;
  d.state = d.mount_dir + "/state";
  WriteText(tmp / "full.json", Config(d.state));
  d.run = RunEnsembled(tmp / "full.json", tmp.path(), {}, 120);
  std::istringstream lines(d.run.err);
  for (std::string line; std::getline(lines, line);)
    if (line.find("[error]") != std::string::npos) d.error_lines += line + "\n";
  struct statvfs vfs {};
  if (::statvfs(d.mount_dir.c_str(), &vfs) == 0) d.free_bytes_after = uint64_t{vfs.f_bavail} * vfs.f_frsize;
  RunLayout layout(d.state);
  auto recs = ReadJournal(layout.JournalFile());
  d.journal_ok = recs.ok();
  if (recs.ok()) d.recs = *recs;
  else d.journal_error = recs.status().ToString();
  for (const auto& r : d.recs)
    if (r.value("event", "") == "member_done") {
      std::string problem = MemberDirProblem(layout.MemberDir(r["round"].get<int>(), r["member"].get<std::string>()));
      if (!problem.empty()) d.incomplete.push_back(problem);
    }
  // Copy the state to the big disk, then unmount.
  d.big_state = tmp / "big/state";
  std::filesystem::create_directories(tmp / "big");
  std::error_code ec;
  std::filesystem::copy(d.state, d.big_state, std::filesystem::copy_options::recursive, ec);
  if (ec) d.big_state.clear();
  m.Unmount();
  struct stat after {}, parent {};
  d.unmounted = ::stat(d.mount_dir.c_str(), &after) == 0 && ::stat(tmp.path().c_str(), &parent) == 0 &&
                after.st_dev == parent.st_dev;
  return d;
}

// Runs the scenario into *d; false (with a WARN saying why) when it could not run here.
bool RanOnFullDisk(TempDir& tmp, DiskFull* d) {
  *d = RunDiskFull(tmp);
  if (d->skipped.empty()) return true;
  WARN("SKIPPED: " << d->skipped);
  return false;
}

TEST_CASE("a full disk stops the run with an error and leaves a sound journal", "[resilience][disk_full]") {
  TempDir tmp;
  DiskFull d;
  if (!RanOnFullDisk(tmp, &d)) return;
  INFO("run on the 3 MiB tmpfs:\n" << d.run.out << d.run.err);
  CHECK(d.unmounted);
  REQUIRE_FALSE(d.run.timed_out);
  CHECK(d.run.code != 0);
  // The disk really was full: less than one ~660 KB checkpoint is free (a failed write
  // removes its partial file, so the free space is not zero afterwards).
  CHECK(d.free_bytes_after < 600 * 1024);
  INFO(d.journal_error);
  REQUIRE(d.journal_ok);  // parses line by line
  CHECK(CountEvents(d.recs, "member_done") >= 1);
  CHECK_FALSE(ReplayJournal(d.recs).finished);
  INFO(Joined(d.incomplete));
  CHECK(d.incomplete.empty());  // every member_done names a complete member directory
  std::printf("[disk_full] ensembled on a 3 MiB tmpfs: exit %d after %.1f s, %d member_done, %d member_failed, %zu "
              "round(s) committed, %llu bytes free; error:\n%s",
              d.run.code, d.run.seconds, CountEvents(d.recs, "member_done"), CountEvents(d.recs, "member_failed"),
              ReplayJournal(d.recs).committed.size(), static_cast<unsigned long long>(d.free_bytes_after),
              d.error_lines.c_str());
  std::fflush(stdout);
}

// The state of the stopped run, copied to a big disk, resumes there. (The members that failed
// on the full disk left partial files in <member>.tmp.)
TEST_CASE("the state of a run stopped by a full disk resumes on a bigger disk", "[resilience][disk_full]") {
  TempDir tmp;
  DiskFull d;
  if (!RanOnFullDisk(tmp, &d)) return;
  INFO("run on the 3 MiB tmpfs:\n" << d.run.out << d.run.err);
  REQUIRE(d.run.code != 0);
  CHECK(d.unmounted);
  REQUIRE_FALSE(d.big_state.empty());
  WriteText(tmp / "big.json", Config(d.big_state));
  auto resumed = RunEnsembled(tmp / "big.json", tmp.path(), {}, 120);
  INFO("resumed on the big disk:\n" << resumed.out << resumed.err);
  std::printf("[disk_full] resumed from a copy on the big disk: exit %d after %.1f s\n", resumed.code, resumed.seconds);
  std::fflush(stdout);
  REQUIRE_FALSE(resumed.timed_out);
  CHECK(resumed.err.find("killed by signal 11") == std::string::npos);
  CHECK(resumed.code == 0);
  auto recs = JournalOf(d.big_state);
  RunProgress p = ReplayJournal(recs);
  CHECK(p.finished);
  CHECK(p.committed.size() == 2);
  RunLayout big(d.big_state);
  for (int round : {0, 1})
    for (const auto& name : MemberNames(4)) {
      std::string problem = MemberDirProblem(big.MemberDir(round, name));
      INFO(problem);
      CHECK(problem.empty());
    }
}

// What an operator needs from the error: which file, and that the disk is full.
TEST_CASE("a full disk is reported as 'No space left' naming the path", "[resilience][disk_full]") {
  TempDir tmp;
  DiskFull d;
  if (!RanOnFullDisk(tmp, &d)) return;
  INFO("run on the 3 MiB tmpfs:\n" << d.run.out << d.run.err);
  REQUIRE(d.run.code != 0);
  INFO("[error] lines:\n" << d.error_lines);
  CHECK(d.error_lines.find("No space left") != std::string::npos);
  CHECK(d.error_lines.find(d.mount_dir) != std::string::npos);
}

// A full disk is a condition a restart (after freeing space) fixes: not exit 78, which tells
// systemd never to restart (RestartPreventExitStatus=78).
TEST_CASE("a full disk exits with the transient failure code and not 78", "[resilience][disk_full]") {
  TempDir tmp;
  DiskFull d;
  if (!RanOnFullDisk(tmp, &d)) return;
  INFO("run on the 3 MiB tmpfs:\n" << d.run.out << d.run.err);
  REQUIRE(d.run.code != 0);
  CHECK(d.run.code == 1);  // exit_code::kTransientFailure
}

}  // namespace
}  // namespace ens
