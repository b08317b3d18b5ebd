#include "orchestrator/workers/transport.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <set>
#include <spdlog/spdlog.h>

#include "common/base/env.h"
#include "common/base/fd_io.h"

namespace ens {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

StatusOr<WorkerChannel> LocalTransport::Offer(WorkerLaunch* launch, WorkerChannel* worker_end) {
  auto pair = WorkerChannel::Pair();
  if (!pair.ok()) return pair.status();
  launch->channel_fd = pair->second.fd();
  *worker_end = std::move(pair->second);
  return std::move(pair->first);
}

namespace {

// 32 random bytes as hex, in a file only this user can read (created once per run).
Status EnsureSecret(const std::string& path) {
  if (ReadRunSecret(path).ok()) return Status::Ok();
  unsigned char raw[32];
  std::ifstream urandom("/dev/urandom", std::ios::binary);
  if (!urandom.read(reinterpret_cast<char*>(raw), sizeof(raw))) return Status::IOError("cannot read /dev/urandom");
  std::string hex;
  char b[3];
  for (unsigned char c : raw) {
    std::snprintf(b, sizeof(b), "%02x", c);
    hex += b;
  }
  hex += "\n";
  const std::string tmp = path + ".tmp";
  Env& env = CurrentEnv();
  int fd = env.Open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Status::FromErrno("create " + tmp, errno);
  ::fchmod(fd, 0600);
  Status written = WriteFull(fd, hex.data(), hex.size(), tmp);
  if (written.ok() && env.Fsync(fd) != 0) written = Status::FromErrno("fsync " + tmp, errno);
  env.Close(fd);
  if (!written.ok()) return written;
  if (env.Rename(tmp, path) != 0) return Status::FromErrno("rename " + tmp + " to " + path, errno);
  return Status::Ok();
}

// Equal secrets, in time that does not depend on where they differ.
bool SameSecret(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

struct TcpTransport::Impl {
  asio::io_context ctx;
  asio::ip::tcp::acceptor acceptor{ctx};
  int epoll_fd = -1;  // the listener and every connection still owing its hello
  std::string secret;
  std::set<uint64_t> expected;  // tokens offered and not yet connected or forgotten
  struct Pending {
    WorkerChannel channel;
    Clock::time_point deadline;
  };
  std::vector<Pending> pending;
  ~Impl() {
    if (epoll_fd >= 0) ::close(epoll_fd);
  }
};

TcpTransport::~TcpTransport() = default;

StatusOr<std::unique_ptr<TcpTransport>> TcpTransport::Listen(const std::string& bind_host, int port,
                                                             const std::string& advertise_host,
                                                             const std::string& secret_file) {
  std::unique_ptr<TcpTransport> t(new TcpTransport());
  t->impl_ = std::make_unique<Impl>();
  t->secret_file_ = secret_file;
  if (Status s = EnsureSecret(secret_file); !s.ok()) return s;
  auto secret = ReadRunSecret(secret_file);
  if (!secret.ok()) return secret.status();
  t->impl_->secret = *secret;
  boost::system::error_code ec;
  auto addr = asio::ip::make_address(bind_host, ec);
  if (ec) return Status::InvalidArgument("listen address '" + bind_host + "' is not an IP address: " + ec.message());
  asio::ip::tcp::endpoint ep(addr, static_cast<unsigned short>(port));
  auto& a = t->impl_->acceptor;
  a.open(ep.protocol(), ec);
  if (!ec) a.set_option(asio::ip::tcp::acceptor::reuse_address(true), ec);
  if (!ec) a.bind(ep, ec);
  if (!ec) a.listen(asio::socket_base::max_listen_connections, ec);
  if (!ec) a.non_blocking(true, ec);
  if (ec)
    return Status::InvalidArgument("cannot listen for workers on " + bind_host + ":" + std::to_string(port) + ": " +
                                   ec.message());
  ::fcntl(a.native_handle(), F_SETFD, FD_CLOEXEC);
  t->port_ = a.local_endpoint().port();
  t->address_ = advertise_host + ":" + std::to_string(t->port_);
  t->impl_->epoll_fd = ::epoll_create1(EPOLL_CLOEXEC);
  if (t->impl_->epoll_fd < 0) return Status::FromErrno("epoll_create1", errno);
  struct epoll_event ev {};
  ev.events = EPOLLIN;
  ev.data.fd = a.native_handle();
  ::epoll_ctl(t->impl_->epoll_fd, EPOLL_CTL_ADD, a.native_handle(), &ev);
  return t;
}

StatusOr<WorkerChannel> TcpTransport::Offer(WorkerLaunch* launch, WorkerChannel* worker_end) {
  impl_->expected.insert(launch->token);
  launch->argv.insert(launch->argv.end(), {"--connect", address_, "--token", TokenHex(launch->token),
                                           "--secret-file", secret_file_});
  return WorkerChannel();
}

int TcpTransport::listen_fd() const { return impl_->epoll_fd; }

void TcpTransport::Forget(uint64_t token) { impl_->expected.erase(token); }

std::vector<std::pair<uint64_t, WorkerChannel>> TcpTransport::Accept() {
  std::vector<std::pair<uint64_t, WorkerChannel>> out;
  for (;;) {  // every waiting connection
    boost::system::error_code ec;
    asio::ip::tcp::socket s = impl_->acceptor.accept(ec);
    if (ec) break;
    s.set_option(asio::ip::tcp::no_delay(true), ec);
    auto ch = WorkerChannel::AdoptStream(s.release(ec));
    if (!ch.ok()) continue;
    struct epoll_event ev {};
    ev.events = EPOLLIN;
    ev.data.fd = ch->fd();
    ::epoll_ctl(impl_->epoll_fd, EPOLL_CTL_ADD, ch->fd(), &ev);
    impl_->pending.push_back({std::move(*ch), Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                               std::chrono::duration<double>(kHelloTimeoutS))});
  }
  const auto now = Clock::now();
  for (auto it = impl_->pending.begin(); it != impl_->pending.end();) {
    auto got = it->channel.Receive(0);
    std::string why;
    if (got.ok() && got->kind == WorkerChannel::Received::kNothing) {
      if (now < it->deadline) {
        ++it;
        continue;
      }
      why = "no hello within " + std::to_string(static_cast<int>(kHelloTimeoutS)) + " s";
    } else if (!got.ok() || got->kind == WorkerChannel::Received::kClosed) {
      why = got.ok() ? "closed before its hello" : got.status().message();
    } else {
      auto hello = DecodeHello(got->bytes);
      if (!hello.ok()) why = hello.status().message();
      else if (!SameSecret(hello->secret, impl_->secret)) why = "wrong secret";
      else if (!impl_->expected.count(hello->token)) why = "spawn token " + TokenHex(hello->token) + " not expected";
      else if (Status s = it->channel.Send(R"({"welcome":1})", 1000); !s.ok()) why = s.message();
      else {
        ::epoll_ctl(impl_->epoll_fd, EPOLL_CTL_DEL, it->channel.fd(), nullptr);
        impl_->expected.erase(hello->token);
        out.emplace_back(hello->token, std::move(it->channel));
        it = impl_->pending.erase(it);
        continue;
      }
    }
    ++refused_;
    spdlog::warn("refused a worker connection: {}", why);
    ::epoll_ctl(impl_->epoll_fd, EPOLL_CTL_DEL, it->channel.fd(), nullptr);
    it = impl_->pending.erase(it);
  }
  return out;
}

}  // namespace ens
