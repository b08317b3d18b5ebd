// Tests of common/message_queue: send/receive, timeouts both ways, the 0600 mode, stale
// queue replacement, and that a sender SIGKILLed mid-loop leaves the queue usable.
#include "common/message_queue.h"

#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <optional>
#include <string>

#include "common/protocol.h"

namespace ens {
namespace {

using Clock = std::chrono::steady_clock;

// A queue name unique to this process and test; unlinked at scope exit.
class QueueNameGuard {
 public:
  explicit QueueNameGuard(const std::string& tag)
      : name_("/ens-mqtest-" + std::to_string(::getpid()) + "-" + tag) {
    MessageQueue::Unlink(name_);
  }
  ~QueueNameGuard() { MessageQueue::Unlink(name_); }
  const std::string& name() const { return name_; }

 private:
  std::string name_;
};

MessageQueue MustCreate(const std::string& name, long max_messages = 10) {
  StatusOr<MessageQueue> q = MessageQueue::Create(name, max_messages);
  INFO(q.status().ToString());
  REQUIRE(q.ok());
  return std::move(q.value());
}

std::optional<std::string> MustReceive(MessageQueue& q, int timeout_ms) {
  auto r = q.Receive(timeout_ms);
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  return r.value();
}

// Kills and reaps a forked child if a failed REQUIRE leaves the test early.
struct ChildGuard {
  pid_t pid = -1;
  ~ChildGuard() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
};

int64_t MsSince(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
}

TEST_CASE("QueueName names uid, run id and suffix", "[mq]") {
  CHECK(QueueName("run7", "report") == "/ens-" + std::to_string(::getuid()) + "-run7-report");
  CHECK(QueueName("a", "slot-1") != QueueName("b", "slot-1"));
}

TEST_CASE("Create, Open, Send and Receive carry messages in order", "[mq]") {
  QueueNameGuard n("basic");
  MessageQueue server = MustCreate(n.name());
  CHECK(server.valid());
  CHECK(server.name() == n.name());
  StatusOr<MessageQueue> opened = MessageQueue::Open(n.name());
  REQUIRE(opened.ok());
  MessageQueue client = std::move(opened.value());

  REQUIRE(client.Send("first", 100).ok());
  REQUIRE(client.Send(std::string(kMaxMessageBytes, 'z'), 100).ok());
  REQUIRE(client.Send("", 100).ok());
  CHECK(MustReceive(server, 100) == std::optional<std::string>("first"));
  CHECK(MustReceive(server, 100) == std::optional<std::string>(std::string(kMaxMessageBytes, 'z')));
  CHECK(MustReceive(server, 100) == std::optional<std::string>(""));
  CHECK_FALSE(MustReceive(server, 0).has_value());

  // Larger than the queue's message size: refused up front, naming the queue.
  Status s = client.Send(std::string(kMaxMessageBytes + 1, 'x'), 100);
  CHECK(s.code() == Status::Code::kInvalidArgument);
  CHECK_THAT(s.message(), Catch::Contains(n.name()));

  // A moved-from queue is invalid; the moved-to one works.
  MessageQueue moved = std::move(server);
  CHECK_FALSE(server.valid());
  REQUIRE(client.Send("after move", 100).ok());
  CHECK(MustReceive(moved, 100) == std::optional<std::string>("after move"));
}

TEST_CASE("Open of a missing queue names it", "[mq]") {
  QueueNameGuard n("missing");
  StatusOr<MessageQueue> q = MessageQueue::Open(n.name());
  REQUIRE_FALSE(q.ok());
  CHECK_THAT(q.status().message(), Catch::Contains(n.name()));
}

TEST_CASE("Receive on an empty queue times out with nullopt", "[mq]") {
  QueueNameGuard n("rtimeout");
  MessageQueue q = MustCreate(n.name());
  auto t0 = Clock::now();
  CHECK_FALSE(MustReceive(q, 150).has_value());
  int64_t waited = MsSince(t0);
  CHECK(waited >= 140);
  CHECK(waited < 2000);
  t0 = Clock::now();
  CHECK_FALSE(MustReceive(q, 0).has_value());
  CHECK(MsSince(t0) < 100);
}

TEST_CASE("Send on a full queue times out with Status Timeout", "[mq]") {
  QueueNameGuard n("full");
  MessageQueue q = MustCreate(n.name(), 2);
  REQUIRE(q.Send("a", 0).ok());
  REQUIRE(q.Send("b", 0).ok());
  auto t0 = Clock::now();
  Status s = q.Send("c", 150);
  int64_t waited = MsSince(t0);
  CHECK(s.code() == Status::Code::kTimeout);
  CHECK_THAT(s.message(), Catch::Contains(n.name()));
  CHECK(waited >= 140);
  CHECK(waited < 2000);
  // Room again after one receive; nothing was lost or duplicated.
  CHECK(MustReceive(q, 0) == std::optional<std::string>("a"));
  REQUIRE(q.Send("c", 0).ok());
  CHECK(MustReceive(q, 0) == std::optional<std::string>("b"));
  CHECK(MustReceive(q, 0) == std::optional<std::string>("c"));
  CHECK_FALSE(MustReceive(q, 0).has_value());
}

TEST_CASE("Queues are created 0600", "[mq]") {
  QueueNameGuard n("mode");
  mode_t old_mask = ::umask(0);  // so a permissive mode could not hide behind the umask
  StatusOr<MessageQueue> created = MessageQueue::Create(n.name());
  ::umask(old_mask);
  REQUIRE(created.ok());
  struct stat st {};
  REQUIRE(::fstat(created.value().fd(), &st) == 0);  // an mqd_t is a descriptor on Linux
  CHECK((st.st_mode & 07777) == 0600);

  struct stat dir {};
  if (::stat("/dev/mqueue", &dir) != 0) {
    WARN("/dev/mqueue is not mounted; checked the mode with fstat only");
    return;
  }
  struct stat file {};
  const std::string path = "/dev/mqueue/" + n.name().substr(1);
  REQUIRE(::stat(path.c_str(), &file) == 0);
  CHECK((file.st_mode & 07777) == 0600);
  CHECK(file.st_uid == ::getuid());
}

// With the queue budget used up (here: lowered to 1 byte in a child), the error says what it
// is and what to do, instead of a bare "Too many open files".
TEST_CASE("A used-up RLIMIT_MSGQUEUE is named in the error", "[mq]") {
  QueueNameGuard n("budget");
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(fds[0]);
    struct rlimit one {1, 1};
    std::string msg = ::setrlimit(RLIMIT_MSGQUEUE, &one) != 0 ? "setrlimit failed" : "";
    if (msg.empty()) {
      StatusOr<MessageQueue> q = MessageQueue::Create(n.name());
      msg = q.ok() ? "created" : q.status().ToString();
    }
    (void)!::write(fds[1], msg.data(), msg.size());
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string got;
  char buf[512];
  for (ssize_t r; (r = ::read(fds[0], buf, sizeof(buf))) > 0;) got.append(buf, static_cast<size_t>(r));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  INFO(got);
  CHECK(got.find(n.name()) != std::string::npos);
  CHECK(got.find("RLIMIT_MSGQUEUE") != std::string::npos);
  CHECK(got.find("ulimit -q") != std::string::npos);
}

TEST_CASE("Create replaces a stale queue of the same name", "[mq]") {
  QueueNameGuard n("stale");
  MessageQueue old_q = MustCreate(n.name());
  REQUIRE(old_q.Send("left over from a dead run", 0).ok());
  MessageQueue fresh = MustCreate(n.name());
  CHECK_FALSE(MustReceive(fresh, 0).has_value());
  // The stale one is detached from the name: new opens reach the fresh queue.
  StatusOr<MessageQueue> opened = MessageQueue::Open(n.name());
  REQUIRE(opened.ok());
  REQUIRE(opened.value().Send("new", 0).ok());
  CHECK(MustReceive(fresh, 100) == std::optional<std::string>("new"));
  CHECK(MustReceive(old_q, 0) == std::optional<std::string>("left over from a dead run"));
}

TEST_CASE("A sender SIGKILLed mid-loop does not wedge the queue", "[mq]") {
  QueueNameGuard n("kill");
  MessageQueue q = MustCreate(n.name(), 4);
  const std::string payload(4000, 'p');

  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // Child: its own descriptor, sending forever (mostly blocked on a full queue).
    StatusOr<MessageQueue> c = MessageQueue::Open(n.name());
    if (!c.ok()) ::_exit(2);
    for (unsigned i = 0;; ++i) {
      std::string m = std::to_string(i % 10) + payload;
      if (!c.value().Send(m, -1).ok()) ::_exit(3);
    }
  }

  ChildGuard guard{child};
  // Parent: take some messages so the child keeps sending, then kill it mid-stream.
  for (int i = 0; i < 200; ++i) {
    auto m = MustReceive(q, 2000);
    REQUIRE(m.has_value());
    REQUIRE(m->size() == payload.size() + 1);
  }
  REQUIRE(::kill(child, SIGKILL) == 0);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  guard.pid = -1;
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGKILL);

  // Whatever the child left is whole; then the queue still works both ways.
  for (;;) {
    auto m = MustReceive(q, 0);
    if (!m.has_value()) break;
    CHECK(m->size() == payload.size() + 1);
  }
  auto t0 = Clock::now();
  for (int i = 0; i < 4; ++i) REQUIRE(q.Send("after " + std::to_string(i), 500).ok());
  for (int i = 0; i < 4; ++i)
    CHECK(MustReceive(q, 500) == std::optional<std::string>("after " + std::to_string(i)));
  CHECK(MsSince(t0) < 1000);
}

}  // namespace
}  // namespace ens
