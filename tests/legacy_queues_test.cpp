// Tests of orchestrator/legacy_queues: queues named as earlier ensembled versions named theirs
// are removed when no process has them open and they are old enough; one held open (a live
// run of an earlier version) or just made is left alone, as is anything not named so. Needs
// the mqueue filesystem at /dev/mqueue: without it the test reports skipped (exit 77).
#include "orchestrator/workers/legacy_queues.h"

#include <fcntl.h>
#include <mqueue.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace ens {
namespace {

bool MqueueMounted() {
  struct stat st {};
  return ::stat("/dev/mqueue", &st) == 0 && S_ISDIR(st.st_mode) && ::access("/dev/mqueue", W_OK) == 0;
}

void SkipWithoutMqueue() {
  if (MqueueMounted()) return;
  std::printf("skipped: no mqueue filesystem at /dev/mqueue\n");
  std::fflush(stdout);
  std::_Exit(77);
}

// A queue "/ens-<uid>-legacytest<pid>-<tag>", created and closed (unless kept open); removed
// at scope exit if the test left it.
class Queue {
 public:
  explicit Queue(const std::string& tag, bool keep_open = false, const std::string& prefix = "")
      : name_("/" + (prefix.empty() ? "ens-" + std::to_string(::getuid()) + "-" : prefix) + "legacytest" +
              std::to_string(::getpid()) + "-" + tag) {
    struct mq_attr a {};
    a.mq_maxmsg = 2;
    a.mq_msgsize = 64;
    q_ = ::mq_open(name_.c_str(), O_CREAT | O_RDWR, 0600, &a);
    REQUIRE(q_ != static_cast<mqd_t>(-1));
    if (!keep_open) Close();
  }
  ~Queue() {
    Close();
    ::mq_unlink(name_.c_str());
  }
  void Close() {
    if (q_ != static_cast<mqd_t>(-1)) ::mq_close(q_);
    q_ = static_cast<mqd_t>(-1);
  }
  bool Exists() const { return ::access(("/dev/mqueue" + name_).c_str(), F_OK) == 0; }
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  mqd_t q_ = static_cast<mqd_t>(-1);
};

bool Listed(const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); }

TEST_CASE("a queue of an earlier version that nothing holds open is removed", "[legacy_queues]") {
  SkipWithoutMqueue();
  Queue dead("dead");
  LegacyQueueSweep s = ReclaimLegacyQueues("/dev/mqueue", std::chrono::seconds(0));
  CHECK(Listed(s.removed, dead.name()));
  CHECK_FALSE(dead.Exists());
}

TEST_CASE("a queue held open by a live process is left alone", "[legacy_queues]") {
  SkipWithoutMqueue();
  Queue live("live", /*keep_open=*/true);
  // Held by another process too (as a live run's worker would hold it): a child that opens it.
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    mqd_t q = ::mq_open(live.name().c_str(), O_RDWR);
    (void)!::write(ready[1], q == static_cast<mqd_t>(-1) ? "n" : "y", 1);
    ::pause();
    ::_exit(0);
  }
  char c = 0;
  REQUIRE(::read(ready[0], &c, 1) == 1);
  REQUIRE(c == 'y');
  live.Close();  // only the child holds it now
  LegacyQueueSweep s = ReclaimLegacyQueues("/dev/mqueue", std::chrono::seconds(0));
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  CHECK_FALSE(Listed(s.removed, live.name()));
  CHECK(s.in_use >= 1);
  CHECK(live.Exists());
}

TEST_CASE("a queue touched less than min_age ago is left alone", "[legacy_queues]") {
  SkipWithoutMqueue();
  Queue young("young");
  LegacyQueueSweep s = ReclaimLegacyQueues("/dev/mqueue", std::chrono::seconds(60));
  CHECK_FALSE(Listed(s.removed, young.name()));
  CHECK(s.too_young >= 1);
  CHECK(young.Exists());
}

TEST_CASE("a queue not named ens-<uid>- is never touched", "[legacy_queues]") {
  SkipWithoutMqueue();
  Queue other("other", false, "someone-else-");
  Queue other_uid("olduid", false, "ens-" + std::to_string(::getuid() + 1) + "-");
  LegacyQueueSweep s = ReclaimLegacyQueues("/dev/mqueue", std::chrono::seconds(0));
  CHECK_FALSE(Listed(s.removed, other.name()));
  CHECK_FALSE(Listed(s.removed, other_uid.name()));
  CHECK(other.Exists());
  CHECK(other_uid.Exists());
}

}  // namespace
}  // namespace ens
