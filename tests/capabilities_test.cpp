// Tests of common/capabilities: the effective set read, and dropped for good (in a child, so
// this test's process keeps its own).
#include "common/base/capabilities.h"

#include <linux/capability.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

namespace ens {
namespace {

TEST_CASE("root holds CAP_SETUID until it drops every capability, and it is then missing", "[capabilities]") {
  if (::geteuid() != 0) {  // needs a process that has the capability: reported skipped (SKIP_RETURN_CODE)
    std::printf("skipped: not root\n");
    std::fflush(stdout);
    std::_Exit(77);
  }
  REQUIRE(HasEffectiveCapability(CAP_SETUID));
  CHECK(MissingCapabilities({CAP_SETUID, CAP_SETGID}).empty());
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    Status s = DropAllCapabilities();
    bool dropped = s.ok() && !HasEffectiveCapability(CAP_SETUID) &&
                   MissingCapabilities({CAP_SETUID, CAP_CHOWN}) == std::vector<std::string>{"CAP_SETUID", "CAP_CHOWN"};
    ::_exit(dropped ? 0 : 1);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  CHECK(HasEffectiveCapability(CAP_SETUID));  // this process kept its own
}

}  // namespace
}  // namespace ens
