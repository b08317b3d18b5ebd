#include "common/message_queue.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <vector>

#include "common/protocol.h"

namespace ens {

std::string QueueName(const std::string& run_id, const std::string& suffix) {
  return "/ens-" + std::to_string(::getuid()) + "-" + run_id + "-" + suffix;
}

MessageQueue::MessageQueue(MessageQueue&& o) noexcept { *this = std::move(o); }

MessageQueue& MessageQueue::operator=(MessageQueue&& o) noexcept {
  if (this != &o) {
    if (valid()) mq_close(mq_);
    mq_ = o.mq_;
    name_ = std::move(o.name_);
    msgsize_ = o.msgsize_;
    o.mq_ = static_cast<mqd_t>(-1);
  }
  return *this;
}

MessageQueue::~MessageQueue() {
  if (valid()) mq_close(mq_);
}

StatusOr<MessageQueue> MessageQueue::Create(const std::string& name, long max_messages) {
  mq_unlink(name.c_str());
  struct mq_attr attr {};
  attr.mq_maxmsg = max_messages;
  attr.mq_msgsize = static_cast<long>(kMaxMessageBytes);
  mqd_t q = mq_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NONBLOCK | O_CLOEXEC, 0600, &attr);
  if (q == static_cast<mqd_t>(-1)) {
    int err = errno;
    Status s = Status::FromErrno("mq_open(create) " + name, err);
    // EMFILE is usually the user's queue byte budget, not open files: say what to do about it.
    if (err == EMFILE)
      return Status::IOError(s.message() + " (either this process's descriptors, RLIMIT_NOFILE, or, more likely, "
                             "the POSIX message queue budget of this user, RLIMIT_MSGQUEUE / `ulimit -q`, is used "
                             "up: raise it, or remove the queues of runs that were killed, /dev/mqueue/ens-" +
                             std::to_string(::getuid()) + "-*, when no ensembled of theirs runs)");
    if (err == ENOSPC)
      return Status::IOError(s.message() + " (the system's queue limit, /proc/sys/fs/mqueue/queues_max, is reached)");
    return s;
  }
  MessageQueue m;
  m.mq_ = q;
  m.name_ = name;
  m.msgsize_ = attr.mq_msgsize;
  return m;
}

StatusOr<MessageQueue> MessageQueue::Open(const std::string& name) {
  mqd_t q = mq_open(name.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (q == static_cast<mqd_t>(-1)) return Status::FromErrno("mq_open " + name, errno);
  struct mq_attr attr {};
  mq_getattr(q, &attr);
  MessageQueue m;
  m.mq_ = q;
  m.name_ = name;
  m.msgsize_ = attr.mq_msgsize;
  return m;
}

void MessageQueue::Unlink(const std::string& name) { mq_unlink(name.c_str()); }

namespace {

// Waits for `events` on fd up to timeout_ms; true when ready.
bool WaitFor(int fd, short events, int timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    int wait = timeout_ms < 0 ? -1
                              : static_cast<int>(std::max<int64_t>(
                                    0, std::chrono::duration_cast<std::chrono::milliseconds>(
                                           deadline - std::chrono::steady_clock::now())
                                           .count()));
    struct pollfd p {fd, events, 0};
    int r = ::poll(&p, 1, wait);
    if (r > 0) return true;
    if (r == 0) return false;
    if (errno != EINTR) return false;
  }
}

}  // namespace

Status MessageQueue::Send(std::string_view bytes, int timeout_ms) {
  if (bytes.size() > static_cast<size_t>(msgsize_))
    return Status::InvalidArgument("message of " + std::to_string(bytes.size()) +
                                   " bytes is larger than queue " + name_ + " allows");
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max(timeout_ms, 0));
  for (;;) {
    if (mq_send(mq_, bytes.data(), bytes.size(), 0) == 0) return Status::Ok();
    if (errno == EINTR) continue;
    if (errno != EAGAIN) return Status::FromErrno("mq_send " + name_, errno);
    int left = timeout_ms < 0 ? -1
                              : static_cast<int>(std::max<int64_t>(
                                    0, std::chrono::duration_cast<std::chrono::milliseconds>(
                                           deadline - std::chrono::steady_clock::now())
                                           .count()));
    if (left == 0 || !WaitFor(fd(), POLLOUT, left)) return Status::Timeout("queue " + name_ + " is full");
  }
}

StatusOr<std::optional<std::string>> MessageQueue::Receive(int timeout_ms) {
  std::vector<char> buf(static_cast<size_t>(msgsize_));
  for (;;) {
    ssize_t n = mq_receive(mq_, buf.data(), buf.size(), nullptr);
    if (n >= 0) return std::optional<std::string>(std::string(buf.data(), static_cast<size_t>(n)));
    if (errno == EINTR) continue;
    if (errno != EAGAIN) return Status::FromErrno("mq_receive " + name_, errno);
    if (timeout_ms == 0 || !WaitFor(fd(), POLLIN, timeout_ms)) return std::optional<std::string>();
  }
}

}  // namespace ens
