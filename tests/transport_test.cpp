// Tests of orchestrator/transport (local pairs, the TCP listener's hello and refusals) and
// common/supervisor_link (the remote worker's side), and of WorkerChannel's framed stream mode.
#include "orchestrator/workers/transport.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <future>
#include <thread>

#include "common/ipc/protocol.h"
#include "common/ipc/supervisor_link.h"
#include "support/temp_dir.h"

namespace ens {
namespace {

const bool kSigpipeIgnored = ::signal(SIGPIPE, SIG_IGN) != SIG_ERR;
using ens::testing::TempDir;

// Calls Accept until it yields a channel or `seconds` pass.
std::vector<std::pair<uint64_t, WorkerChannel>> AcceptFor(TcpTransport& t, double seconds) {
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    auto got = t.Accept();
    if (!got.empty()) return got;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return {};
}

int RawConnect(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
  return fd;
}

TEST_CASE("the local transport hands out a connected pair and passes the worker's end") {
  LocalTransport t;
  WorkerLaunch l;
  WorkerChannel theirs;
  auto mine = t.Offer(&l, &theirs);
  REQUIRE(mine.ok());
  REQUIRE(theirs.valid());
  CHECK(l.channel_fd == theirs.fd());
  REQUIRE(theirs.Send("hi", 100).ok());
  auto got = mine->Receive(1000);
  REQUIRE(got.ok());
  CHECK(got->bytes == "hi");
  CHECK(t.listen_fd() == -1);
}

TEST_CASE("a remote worker with the secret and an offered token is welcomed and talks framed messages") {
  TempDir dir;
  auto t = TcpTransport::Listen("127.0.0.1", 0, "127.0.0.1", dir.path() + "/transport.secret");
  REQUIRE(t.ok());
  TcpTransport& tcp = **t;
  CHECK(tcp.port() > 0);
  CHECK(tcp.listen_fd() >= 0);
  // The secret: created once, readable by this user only.
  struct stat st {};
  REQUIRE(::stat((dir.path() + "/transport.secret").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  WorkerLaunch l;
  l.argv = {"ensemble-worker", "serve"};
  l.token = 0x1234abcd5678ef90ULL;
  WorkerChannel none;
  auto mine = tcp.Offer(&l, &none);
  REQUIRE(mine.ok());
  CHECK_FALSE(mine->valid());  // arrives through Accept
  REQUIRE(l.argv.size() == 8);
  CHECK(l.argv[2] == "--connect");
  CHECK(l.argv[3] == tcp.address());
  CHECK(l.argv[5] == "1234abcd5678ef90");
  auto worker = std::async(std::launch::async, [&] {
    return ConnectToSupervisor(tcp.address(), l.token, dir.path() + "/transport.secret", 10);
  });
  auto accepted = AcceptFor(tcp, 10);
  REQUIRE(accepted.size() == 1);
  CHECK(accepted[0].first == l.token);
  auto w = worker.get();
  REQUIRE(w.ok());
  CHECK(w->stream());
  WorkerChannel& sup = accepted[0].second;
  // Messages keep their boundaries both ways, the empty one included, and a large one too.
  std::string big(kMaxMessageBytes, 'b');
  REQUIRE(w->Send("ready", 1000).ok());
  REQUIRE(w->Send("", 1000).ok());
  REQUIRE(w->Send(big, 5000).ok());
  for (const std::string& want : {std::string("ready"), std::string(), big}) {
    auto got = sup.Receive(5000);
    REQUIRE(got.ok());
    REQUIRE(got->kind == WorkerChannel::Received::kMessage);
    CHECK(got->bytes == want);
  }
  REQUIRE(sup.Send("task", 1000).ok());
  auto task = w->Receive(1000);
  REQUIRE(task.ok());
  CHECK(task->bytes == "task");
  // The same token cannot be used twice.
  auto again = std::async(std::launch::async, [&] {
    return ConnectToSupervisor(tcp.address(), l.token, dir.path() + "/transport.secret", 5);
  });
  CHECK(AcceptFor(tcp, 2).empty());
  CHECK_FALSE(again.get().ok());
  CHECK(tcp.refused() == 1);
  // The worker's end closing is the end of stream.
  w->Close();
  auto closed = sup.Receive(2000);
  REQUIRE(closed.ok());
  CHECK(closed->kind == WorkerChannel::Received::kClosed);
}

TEST_CASE("a wrong secret, an unknown token, a forgotten token and garbage are refused and counted") {
  TempDir dir;
  const std::string secret = dir.path() + "/transport.secret";
  auto t = TcpTransport::Listen("127.0.0.1", 0, "127.0.0.1", secret);
  REQUIRE(t.ok());
  TcpTransport& tcp = **t;
  WorkerLaunch l;
  l.token = 77;
  WorkerChannel none;
  REQUIRE(tcp.Offer(&l, &none).ok());
  {
    std::ofstream wrong(dir.path() + "/wrong.secret");
    wrong << "not-the-secret\n";
  }
  auto bad_secret = std::async(std::launch::async, [&] {
    return ConnectToSupervisor(tcp.address(), 77, dir.path() + "/wrong.secret", 5);
  });
  CHECK(AcceptFor(tcp, 2).empty());
  auto r1 = bad_secret.get();
  REQUIRE_FALSE(r1.ok());
  CHECK(r1.status().message().find("refused") != std::string::npos);
  auto bad_token = std::async(std::launch::async, [&] { return ConnectToSupervisor(tcp.address(), 78, secret, 5); });
  CHECK(AcceptFor(tcp, 2).empty());
  CHECK_FALSE(bad_token.get().ok());
  tcp.Forget(77);
  auto forgotten = std::async(std::launch::async, [&] { return ConnectToSupervisor(tcp.address(), 77, secret, 5); });
  CHECK(AcceptFor(tcp, 2).empty());
  CHECK_FALSE(forgotten.get().ok());
  int fd = RawConnect(tcp.port());
  const char junk[] = "\x05\x00\x00\x00hello";
  REQUIRE(::write(fd, junk, sizeof(junk) - 1) == sizeof(junk) - 1);
  CHECK(AcceptFor(tcp, 1).empty());
  ::close(fd);
  CHECK(tcp.refused() == 4);
}

TEST_CASE("a silent connection is dropped after the hello timeout without blocking Accept") {
  TempDir dir;
  auto t = TcpTransport::Listen("127.0.0.1", 0, "127.0.0.1", dir.path() + "/transport.secret");
  REQUIRE(t.ok());
  int fd = RawConnect((*t)->port());
  auto t0 = std::chrono::steady_clock::now();
  (*t)->Accept();  // takes the connection; returns at once
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(1));
  CHECK((*t)->refused() == 0);
  std::this_thread::sleep_for(std::chrono::duration<double>(kHelloTimeoutS + 0.5));
  (*t)->Accept();
  CHECK((*t)->refused() == 1);
  char c;
  CHECK(::read(fd, &c, 1) == 0);  // closed by the supervisor
  ::close(fd);
}

TEST_CASE("a worker on a node that cannot see the state directory says so") {
  auto r = ConnectToSupervisor("127.0.0.1:1", 5, "/nonexistent/state/transport.secret", 1);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == Status::Code::kNotFound);
  CHECK(r.status().message().find("/nonexistent/state/transport.secret") != std::string::npos);
  CHECK(r.status().message().find("filesystem every node sees") != std::string::npos);
}

TEST_CASE("a listen address that is not an IP address is an error naming it") {
  TempDir dir;
  auto t = TcpTransport::Listen("not-an-ip", 0, "x", dir.path() + "/s");
  REQUIRE_FALSE(t.ok());
  CHECK(t.status().message().find("not-an-ip") != std::string::npos);
}

TEST_CASE("hello frames and spawn tokens round-trip and malformed ones are rejected") {
  auto h = DecodeHello(EncodeHello({0xfedcba9876543210ULL, "s3cret"}));
  REQUIRE(h.ok());
  CHECK(h->token == 0xfedcba9876543210ULL);
  CHECK(h->secret == "s3cret");
  CHECK_FALSE(DecodeHello("{}").ok());
  CHECK_FALSE(DecodeHello("not json").ok());
  CHECK_FALSE(DecodeHello(R"({"hello":1,"token":"xyz","secret":"a"})").ok());
  CHECK_FALSE(ParseTokenHex("0000000000000000"));
  CHECK(ParseTokenHex(TokenHex(42)) == std::optional<uint64_t>(42));
}

}  // namespace
}  // namespace ens
