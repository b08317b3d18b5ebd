#include "orchestrator/serve/run_log_relay.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <spdlog/spdlog.h>

#include "common/base/fd_io.h"

namespace ens {
namespace {

// A pipe's default 64 KiB fills with one burst of a run's output while the daemon is busy
// elsewhere (an fsync, a request), and the run then blocks in write(). 1 MiB is what an
// unprivileged process may ask for (fs.pipe-max-size); a refusal keeps the default.
constexpr int kPipeBytes = 1 << 20;

}  // namespace

StatusOr<std::unique_ptr<RunLogRelay>> RunLogRelay::Open(int pipe_fd, const std::string& log_file, LineSink sink) {
  int log_fd = ::open(log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (log_fd < 0) {
    int err = errno;
    ::close(pipe_fd);
    return Status::FromErrno("open " + log_file, err);
  }
  ::fcntl(pipe_fd, F_SETFL, ::fcntl(pipe_fd, F_GETFL) | O_NONBLOCK);
  ::fcntl(pipe_fd, F_SETPIPE_SZ, kPipeBytes);
  return std::unique_ptr<RunLogRelay>(new RunLogRelay(pipe_fd, log_fd, log_file, std::move(sink)));
}

RunLogRelay::RunLogRelay(int pipe_fd, int log_fd, std::string log_file, LineSink sink)
    : pipe_fd_(pipe_fd), log_fd_(log_fd), log_file_(std::move(log_file)), sink_(std::move(sink)) {}

RunLogRelay::~RunLogRelay() {
  if (pipe_fd_ >= 0) ::close(pipe_fd_);
  if (log_fd_ >= 0) ::close(log_fd_);
}

void RunLogRelay::Emit(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (sink_) sink_(line);
}

void RunLogRelay::FlushLine() {
  if (partial_.empty()) return;
  std::string line;
  line.swap(partial_);
  Emit(line);
}

void RunLogRelay::WriteLog(const char* data, size_t n) {
  if (log_failed_) return;
  if (Status s = WriteFull(log_fd_, data, n, log_file_); !s.ok()) {
    spdlog::error("{} (its lines still go to this log)", s.message());
    log_failed_ = true;
  }
}

bool RunLogRelay::Pump(size_t budget) {
  char buf[65536];
  size_t read_total = 0;
  while (pipe_fd_ >= 0 && read_total < budget) {
    ssize_t n = ::read(pipe_fd_, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;
    if (n <= 0) {  // the end (0), or an error that ends it just the same
      ::close(pipe_fd_);
      pipe_fd_ = -1;
      FlushLine();
      return true;
    }
    read_total += static_cast<size_t>(n);
    WriteLog(buf, static_cast<size_t>(n));
    std::string_view chunk(buf, static_cast<size_t>(n));
    while (!chunk.empty()) {
      size_t nl = chunk.find('\n');
      std::string_view piece = chunk.substr(0, nl);
      chunk.remove_prefix(nl == std::string_view::npos ? chunk.size() : nl + 1);
      // A line too long for one piece goes out kMaxLine bytes at a time.
      while (partial_.size() + piece.size() > kMaxLine) {
        size_t take = kMaxLine - partial_.size();
        partial_.append(piece.substr(0, take));
        piece.remove_prefix(take);
        FlushLine();
      }
      partial_.append(piece);
      if (nl != std::string_view::npos) {
        std::string line;
        line.swap(partial_);
        Emit(line);
      }
    }
  }
  return pipe_fd_ < 0;
}

}  // namespace ens
