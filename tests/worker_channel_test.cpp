// Tests of common/worker_channel: messages keep their boundaries both ways, timeouts, the
// size limit on both sides, a zero-byte message told apart from a close, end of stream after
// a SIGKILLed sender's last whole message, inheritance across exec only where asked, and
// that hundreds of channels take nothing from the POSIX message queue budget.
#include "common/ipc/worker_channel.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <vector>

#include "common/ipc/protocol.h"

namespace ens {
namespace {

using Clock = std::chrono::steady_clock;
using Received = WorkerChannel::Received;

std::pair<WorkerChannel, WorkerChannel> MustPair() {
  auto p = WorkerChannel::Pair();
  INFO(p.status().ToString());
  REQUIRE(p.ok());
  return std::move(p.value());
}

Received MustReceive(WorkerChannel& c, int timeout_ms) {
  auto r = c.Receive(timeout_ms);
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  return r.value();
}

int64_t MsSince(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
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

TEST_CASE("messages cross both ways whole and in order", "[channel]") {
  auto [sup, worker] = MustPair();
  REQUIRE(worker.Send("ready", 0).ok());
  REQUIRE(worker.Send(std::string(kMaxMessageBytes, 'x'), 0).ok());
  REQUIRE(sup.Send("task", 0).ok());
  Received a = MustReceive(sup, 100);
  CHECK(a.kind == Received::kMessage);
  CHECK(a.bytes == "ready");
  Received b = MustReceive(sup, 100);
  CHECK(b.bytes == std::string(kMaxMessageBytes, 'x'));
  CHECK(MustReceive(worker, 100).bytes == "task");
  CHECK(MustReceive(sup, 0).kind == Received::kNothing);

  WorkerChannel moved = std::move(sup);
  CHECK_FALSE(sup.valid());
  REQUIRE(worker.Send("after the move", 0).ok());
  CHECK(MustReceive(moved, 100).bytes == "after the move");
}

TEST_CASE("Receive waits for its timeout and no longer", "[channel]") {
  auto [sup, worker] = MustPair();
  auto t0 = Clock::now();
  CHECK(MustReceive(sup, 150).kind == Received::kNothing);
  CHECK(MsSince(t0) >= 140);
  CHECK(MsSince(t0) < 2000);
}

TEST_CASE("a full channel times out a send instead of blocking", "[channel]") {
  auto [sup, worker] = MustPair();
  const std::string m(4000, 'h');
  int sent = 0;
  Status s = Status::Ok();
  while ((s = worker.Send(m, 0)).ok() && sent < 100000) ++sent;
  CHECK(sent > 0);
  CHECK(s.code() == Status::Code::kTimeout);
  auto t0 = Clock::now();
  CHECK(worker.Send(m, 100).code() == Status::Code::kTimeout);
  CHECK(MsSince(t0) >= 90);
  // Room again once the other side reads.
  CHECK(MustReceive(sup, 0).bytes == m);
  CHECK(worker.Send(m, 1000).ok());
}

TEST_CASE("a message over the limit is refused on send and discarded on receipt", "[channel]") {
  auto [sup, worker] = MustPair();
  Status s = worker.Send(std::string(kMaxMessageBytes + 1, 'o'), 0);
  CHECK(s.code() == Status::Code::kInvalidArgument);
  // A sender that bypasses Send (a worker gone bad) still cannot get one through whole.
  std::string big(kMaxMessageBytes + 100, 'b');
  REQUIRE(::send(worker.fd(), big.data(), big.size(), 0) == static_cast<ssize_t>(big.size()));
  REQUIRE(worker.Send("next", 0).ok());
  auto r = sup.Receive(100);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find(std::to_string(big.size())) != std::string::npos);
  CHECK(MustReceive(sup, 100).bytes == "next");
}

TEST_CASE("a zero-byte message is a message - a closed peer is the end of stream", "[channel]") {
  auto [sup, worker] = MustPair();
  REQUIRE(::send(worker.fd(), "", 0, 0) == 0);
  Received empty = MustReceive(sup, 100);
  CHECK(empty.kind == Received::kMessage);
  CHECK(empty.bytes.empty());
  REQUIRE(worker.Send("last words", 0).ok());
  worker.Close();
  CHECK(MustReceive(sup, 100).bytes == "last words");  // sent before the close: still read
  CHECK(MustReceive(sup, 100).kind == Received::kClosed);
  CHECK(MustReceive(sup, 0).kind == Received::kClosed);  // and stays so
  Status s = sup.Send("anyone?", 0);
  CHECK(s.code() == Status::Code::kIOError);  // an error, not a SIGPIPE that kills the sender
}

TEST_CASE("a sender SIGKILLed mid-stream leaves whole messages, then the end of stream", "[channel]") {
  auto [sup, worker] = MustPair();
  const std::string payload(4000, 'p');
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    sup.Close();
    for (unsigned i = 0;; ++i)
      if (!worker.Send(std::to_string(i % 10) + payload, -1).ok()) ::_exit(3);
  }
  ChildGuard guard{child};
  worker.Close();  // the child holds the only worker end
  for (int i = 0; i < 200; ++i) {
    Received m = MustReceive(sup, 2000);
    REQUIRE(m.kind == Received::kMessage);
    REQUIRE(m.bytes.size() == payload.size() + 1);
  }
  REQUIRE(::kill(child, SIGKILL) == 0);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  guard.pid = -1;
  CHECK(WIFSIGNALED(status));
  for (;;) {
    Received m = MustReceive(sup, 1000);
    if (m.kind != Received::kMessage) {
      CHECK(m.kind == Received::kClosed);
      break;
    }
    CHECK(m.bytes.size() == payload.size() + 1);  // whatever was queued is whole
  }
}

TEST_CASE("both ends are close-on-exec - Adopt takes only a seqpacket socket", "[channel]") {
  auto [sup, worker] = MustPair();
  CHECK((::fcntl(sup.fd(), F_GETFD) & FD_CLOEXEC) != 0);
  CHECK((::fcntl(worker.fd(), F_GETFD) & FD_CLOEXEC) != 0);
  int pipefd[2];
  REQUIRE(::pipe(pipefd) == 0);
  auto not_socket = WorkerChannel::Adopt(pipefd[0]);
  CHECK_FALSE(not_socket.ok());
  CHECK(not_socket.status().message().find("descriptor " + std::to_string(pipefd[0])) != std::string::npos);
  ::close(pipefd[0]);
  ::close(pipefd[1]);
  int stream[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, stream) == 0);
  CHECK_FALSE(WorkerChannel::Adopt(stream[0]).ok());
  ::close(stream[0]);
  ::close(stream[1]);
  int dup = ::dup(worker.fd());  // no close-on-exec, as inherited
  auto adopted = WorkerChannel::Adopt(dup);
  REQUIRE(adopted.ok());
  CHECK((::fcntl(adopted->fd(), F_GETFD) & FD_CLOEXEC) != 0);
  REQUIRE(adopted->Send("via the adopted end", 0).ok());
  CHECK(MustReceive(sup, 100).bytes == "via the adopted end");
}

// 300 channels in a child whose POSIX queue budget is 0 bytes: a queue could not even be
// created there, channels do not use that budget at all.
TEST_CASE("channels take nothing from RLIMIT_MSGQUEUE", "[channel]") {
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    struct rlimit none {0, 0};
    if (::setrlimit(RLIMIT_MSGQUEUE, &none) != 0) ::_exit(2);
    struct rlimit files {4096, 4096};
    (void)::setrlimit(RLIMIT_NOFILE, &files);
    std::vector<std::pair<WorkerChannel, WorkerChannel>> many;
    for (int i = 0; i < 300; ++i) {
      auto p = WorkerChannel::Pair();
      if (!p.ok()) ::_exit(3);
      if (!p->second.Send("hello", 0).ok()) ::_exit(4);
      many.push_back(std::move(*p));
    }
    for (auto& [a, b] : many) {
      auto r = a.Receive(0);
      if (!r.ok() || r->bytes != "hello") ::_exit(5);
    }
    ::_exit(0);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

}  // namespace
}  // namespace ens
