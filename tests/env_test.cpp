// Env (common/base/env.h), the seam to the outside world, and the table of the environment
// variables the product reads (common/base/env_vars.h): the default Env is the real OS and
// clocks; a ScopedEnv is what the product's durable writes, journal and fault questions ask
// while it lives, and the one before comes back after it; ScopedFaults layers over it; every
// ENSEMBLED_* variable the product reads is in the table.
#include "common/base/env.h"

#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "common/base/atomic_file.h"
#include "common/base/env_vars.h"
#include "common/base/fault_injection.h"
#include "common/state/journal.h"
#include "support/temp_dir.h"

namespace ens {
namespace {

using ens::testing::TempDir;
using Wall = std::chrono::system_clock;

// Counts the calls it forwards, by name; its wall clock stands still at `wall` when set.
class CountingEnv final : public EnvWrapper {
 public:
  explicit CountingEnv(Env* target) : EnvWrapper(target) {}
  std::map<std::string, int> calls;
  std::optional<Wall::time_point> wall;

  int Open(const std::string& path, int flags, int mode) override {
    ++calls["open"];
    return EnvWrapper::Open(path, flags, mode);
  }
  ssize_t Write(int fd, const void* data, size_t n) override {
    ++calls["write"];
    return EnvWrapper::Write(fd, data, n);
  }
  int Fsync(int fd) override {
    ++calls["fsync"];
    return EnvWrapper::Fsync(fd);
  }
  int Fdatasync(int fd) override {
    ++calls["fdatasync"];
    return EnvWrapper::Fdatasync(fd);
  }
  int Rename(const std::string& from, const std::string& to) override {
    ++calls["rename"];
    return EnvWrapper::Rename(from, to);
  }
  Wall::time_point WallNow() override { return wall ? *wall : EnvWrapper::WallNow(); }
};

// Answers every fault question "no", except OutOfMemory: always.
class AlwaysOutOfMemory final : public Faults {
 public:
  bool CrashAt(const char*, int) override { return false; }
  bool NonFiniteLoss(const std::string&) override { return false; }
  bool WriteFailure(const std::string&, int) override { return false; }
  bool OutOfMemory(size_t) override { return true; }
  bool KillForSize(size_t) override { return false; }
  bool TorchError(const std::string&) override { return false; }
  int SlowPhaseMs(std::string_view) override { return 0; }
  bool Hang(const std::string&, int, std::string_view) override { return false; }
  std::vector<std::string> RawMessages(const std::string&, int, int, long) override { return {}; }
  bool JournalWriteFails(const std::string&) override { return false; }
  std::optional<std::string> CudaSees() override { return std::nullopt; }
};

TEST_CASE("the default Env is the real file system, the real clocks and the environment's faults", "[env]") {
  TempDir dir;
  Env* env = Env::Default();
  CHECK(&CurrentEnv() == env);
  const std::string path = dir.File("a");
  const int fd = env->Open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  REQUIRE(fd >= 0);
  CHECK(env->Write(fd, "hello", 5) == 5);
  CHECK(env->Pwrite(fd, "J", 1, 0) == 1);
  CHECK(env->Fsync(fd) == 0);
  CHECK(env->Ftruncate(fd, 4) == 0);
  CHECK(env->Close(fd) == 0);
  CHECK(env->Rename(path, dir.File("b")) == 0);
  CHECK_FALSE(PathExists(path));
  CHECK(*ReadFile(dir.File("b")) == "Jell");
  CHECK(env->Mkdir(dir.File("d"), 0700) == 0);
  CHECK(env->Exchange(dir.File("b"), dir.File("d")) == 0);  // b is the directory now
  CHECK(std::filesystem::is_directory(dir.File("b")));
  CHECK(env->Unlink(dir.File("d")) == 0);
  CHECK(env->Open(dir.File("missing"), O_RDONLY | O_CLOEXEC, 0) == -1);
  CHECK(errno == ENOENT);

  const auto wall = env->WallNow();
  CHECK(std::chrono::abs(wall - Wall::now()) < std::chrono::seconds(5));
  const auto t0 = env->SteadyNow();
  CHECK(env->SteadyNow() >= t0);
  CHECK(&env->faults() == &EnvironmentFaults());
}

TEST_CASE("a ScopedEnv is what durable writes, the journal and its clock ask, until it goes", "[env]") {
  TempDir dir;
  CountingEnv counting(Env::Default());
  {
    ScopedEnv installed(&counting);
    CHECK(&CurrentEnv() == &counting);
    REQUIRE(WriteFileAtomic(dir.File("state.json"), "{}").ok());
    CHECK(counting.calls["write"] == 1);
    CHECK(counting.calls["fsync"] == 2);  // the file, then its directory
    CHECK(counting.calls["rename"] == 1);
    CHECK(*ReadFile(dir.File("state.json")) == "{}");

    counting.wall = Wall::time_point(std::chrono::seconds(1234567890));
    auto j = Journal::Open(dir.File("journal.jsonl"));
    REQUIRE(j.ok());
    nlohmann::json written;
    REQUIRE((*j)->Append(RunFinishedRecord{3, "done"}, &written).ok());
    CHECK(counting.calls["fdatasync"] == 1);
    CHECK(written["time"] == 1234567890);
    CHECK(WallSeconds() == 1234567890);
  }
  CHECK(&CurrentEnv() == Env::Default());
  const int writes = counting.calls["write"];
  REQUIRE(WriteFileAtomic(dir.File("state.json"), "{\"a\": 1}").ok());
  CHECK(counting.calls["write"] == writes);  // gone: not asked any more
  CHECK(std::chrono::abs(Wall::now() - Wall::time_point(std::chrono::seconds(WallSeconds()))) < std::chrono::seconds(5));
}

TEST_CASE("ScopedEnvs nest, and ScopedFaults layers over the Env in place", "[env]") {
  CountingEnv outer(Env::Default());
  ScopedEnv first(&outer);
  {
    CountingEnv inner(&outer);
    ScopedEnv second(&inner);
    CHECK(&CurrentEnv() == &inner);
    TempDir dir;
    REQUIRE(WriteFileDurable(dir.File("f"), "x").ok());
    CHECK(inner.calls["write"] == 1);
    CHECK(outer.calls["write"] == 1);  // through the inner one
  }
  CHECK(&CurrentEnv() == &outer);
  ::unsetenv("ENSEMBLED_TEST_OOM_ABOVE");
  CHECK_FALSE(OutOfMemoryRequested(1000));
  {
    AlwaysOutOfMemory faults;
    ScopedFaults installed(&faults);
    CHECK(OutOfMemoryRequested(1));  // the faults asked through CurrentEnv()
    CHECK(&CurrentEnv().faults() == &faults);
    TempDir dir;
    const int before = outer.calls["write"];
    REQUIRE(WriteFileDurable(dir.File("f"), "x").ok());
    CHECK(outer.calls["write"] == before + 1);  // the files still reach the Env below
  }
  CHECK(&CurrentEnv() == &outer);
  CHECK_FALSE(OutOfMemoryRequested(1000));
}

TEST_CASE("the variables' table: names, values, and no ENSEMBLED_ variable read outside it", "[env]") {
  std::set<std::string> names;
  for (const EnvVarInfo& v : kEnvVars) {
    CHECK(std::string(v.name).rfind("ENSEMBLED_", 0) == 0);
    CHECK(std::string(v.use).size() > 10);
    names.insert(v.name);
    CHECK(std::string(Name(v.var)) == v.name);
  }
  CHECK(names.size() == std::size(kEnvVars));
  ::setenv("ENSEMBLED_LANE_ISA", "baseline", 1);
  CHECK(std::string(EnvVarValue(EnvVar::kLaneIsa)) == "baseline");
  ::unsetenv("ENSEMBLED_LANE_ISA");
  CHECK(EnvVarValue(EnvVar::kLaneIsa) == nullptr);

  // The product's sources read the environment through env_vars.h only: no getenv of an
  // ENSEMBLED_ name, and no ENSEMBLED_ name passed to a getenv-like wrapper as a string.
  const std::regex direct(R"(getenv\s*\(\s*"ENSEMBLED_)");
  for (const char* tree : {"common", "worker", "orchestrator", "ctl"}) {
    for (const auto& entry : std::filesystem::recursive_directory_iterator(std::string(ENS_SOURCE_DIR) + "/" + tree)) {
      const std::string ext = entry.path().extension().string();
      if (ext != ".cpp" && ext != ".h" && ext != ".inc" && ext != ".cu") continue;
      std::ifstream in(entry.path());
      std::stringstream text;
      text << in.rdbuf();
      INFO(entry.path().string());
      CHECK_FALSE(std::regex_search(text.str(), direct));
    }
  }
}

}  // namespace
}  // namespace ens
