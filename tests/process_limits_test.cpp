// Tests of orchestrator/process_limits: a soft descriptor or thread limit below what the
// workers need is raised; a hard limit below it is an InvalidArgument (exit 78) naming the
// limit, the need and the fix. Each case runs in a forked child: limits are per process and
// a lowered hard limit cannot be raised again.
#include "orchestrator/workers/process_limits.h"

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>

namespace ens {
namespace {

// Runs fn in a child; returns what it wrote (its verdict) or why it could not run.
std::string InChild(const std::function<std::string()>& fn) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(fds[0]);
    std::string out = fn();
    (void)!::write(fds[1], out.data(), out.size());
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string got;
  char buf[1024];
  for (ssize_t r; (r = ::read(fds[0], buf, sizeof(buf))) > 0;) got.append(buf, static_cast<size_t>(r));
  ::close(fds[0]);
  ::waitpid(pid, nullptr, 0);
  return got;
}

std::string SetLimit(int resource, rlim_t soft, rlim_t hard) {
  struct rlimit r {soft, hard};
  return ::setrlimit(resource, &r) == 0 ? "" : "setrlimit failed";
}

rlim_t Soft(int resource) {
  struct rlimit r {};
  ::getrlimit(resource, &r);
  return r.rlim_cur;
}

TEST_CASE("a soft descriptor limit below the need is raised to it", "[limits]") {
  // 200 soft, hard as it is here (at least 300 on any Linux this runs on); need 272.
  std::string got = InChild([] {
    struct rlimit r {};
    ::getrlimit(RLIMIT_NOFILE, &r);
    if (auto e = SetLimit(RLIMIT_NOFILE, 200, r.rlim_max); !e.empty()) return e;
    Status s = FitProcessLimits(72, 1);
    if (!s.ok()) return s.ToString();
    return std::to_string(Soft(RLIMIT_NOFILE));
  });
  CHECK(got == std::to_string(kSupervisorBaseDescriptors + kDescriptorsPerWorker * 72));
}

TEST_CASE("a soft limit already high enough is left alone", "[limits]") {
  std::string got = InChild([] {
    struct rlimit r {};
    ::getrlimit(RLIMIT_NOFILE, &r);
    rlim_t before = r.rlim_cur;
    Status s = FitProcessLimits(1, 1);
    if (!s.ok()) return s.ToString();
    return std::string(Soft(RLIMIT_NOFILE) == before ? "same" : "changed");
  });
  CHECK(got == "same");
}

TEST_CASE("a hard descriptor limit below the need is a permanent error that names the fix", "[limits]") {
  std::string got = InChild([] {
    if (auto e = SetLimit(RLIMIT_NOFILE, 150, 150); !e.empty()) return e;
    Status s = FitProcessLimits(256, 1);
    return std::string(s.code() == Status::Code::kInvalidArgument ? "invalid: " : "other: ") + s.message();
  });
  INFO(got);
  CHECK(got.rfind("invalid: ", 0) == 0);
  CHECK(got.find("RLIMIT_NOFILE") != std::string::npos);
  CHECK(got.find("256 workers") != std::string::npos);
  CHECK(got.find(std::to_string(kSupervisorBaseDescriptors + kDescriptorsPerWorker * 256) + " descriptors") !=
        std::string::npos);
  CHECK(got.find("hard limit is 150") != std::string::npos);
  CHECK(got.find("LimitNOFILE=") != std::string::npos);
  CHECK(got.find("ulimit -Hn") != std::string::npos);
}

TEST_CASE("a hard thread limit below the need names RLIMIT_NPROC", "[limits]") {
  std::string got = InChild([] {
    if (auto e = SetLimit(RLIMIT_NPROC, 100, 100); !e.empty()) return e;
    // The kernel does not hold root to RLIMIT_NPROC, and neither does the check: as root, run
    // it as nobody.
    if (::getuid() == 0 && ::setuid(65534) != 0) return std::string("setuid(nobody) failed");
    Status s = FitProcessLimits(64, 2);
    return std::string(s.code() == Status::Code::kInvalidArgument ? "invalid: " : "other: ") + s.message();
  });
  INFO(got);
  CHECK(got.rfind("invalid: ", 0) == 0);
  CHECK(got.find("RLIMIT_NPROC") != std::string::npos);
  const long need = kSupervisorThreads + 64 * (2 + kWorkerExtraThreads);
  CHECK(got.find(std::to_string(need) + " threads") != std::string::npos);
  CHECK(got.find("LimitNPROC=") != std::string::npos);
}

TEST_CASE("root is not held to RLIMIT_NPROC", "[limits]") {
  if (::getuid() != 0) {  // cannot be checked without root: reported skipped (SKIP_RETURN_CODE)
    std::printf("skipped: not root\n");
    std::fflush(stdout);
    std::_Exit(77);
  }
  std::string got = InChild([] {
    if (auto e = SetLimit(RLIMIT_NPROC, 100, 100); !e.empty()) return e;
    Status s = FitProcessLimits(64, 2);
    return s.ok() ? std::string("ok") : s.ToString();
  });
  CHECK(got == "ok");
}

}  // namespace
}  // namespace ens
