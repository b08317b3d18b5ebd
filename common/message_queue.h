// MessageQueue: a POSIX message queue (mq_open), owned by the kernel.
//
// Why POSIX and not boost::interprocess::message_queue: the kernel holds no user-space lock
// on our behalf, so a process killed at any instant (even mid-send) cannot leave the queue
// wedged for the others; and the descriptor is pollable on Linux, so the supervisor waits on
// reports, signals and timers in one poll(). Queues are created 0600.
// Names: QueueName() builds "/ens-<uid>-<run id>-<suffix>", so two runs never collide.
// A MessageQueue is move-only; one instance per thread.
#pragma once

#include <mqueue.h>

#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace ens {

std::string QueueName(const std::string& run_id, const std::string& suffix);

class MessageQueue {
 public:
  MessageQueue() = default;
  MessageQueue(MessageQueue&& o) noexcept;
  MessageQueue& operator=(MessageQueue&& o) noexcept;
  MessageQueue(const MessageQueue&) = delete;
  MessageQueue& operator=(const MessageQueue&) = delete;
  ~MessageQueue();

  // Removes any stale queue of that name, then creates a fresh one (0600).
  static StatusOr<MessageQueue> Create(const std::string& name, long max_messages = 10);
  // Opens an existing queue (a worker opening the queues its supervisor made).
  static StatusOr<MessageQueue> Open(const std::string& name);
  static void Unlink(const std::string& name);

  // Sends one message, waiting up to timeout_ms for room (negative: forever).
  Status Send(std::string_view bytes, int timeout_ms);
  // Receives one message, waiting up to timeout_ms (0: poll). nullopt on timeout.
  StatusOr<std::optional<std::string>> Receive(int timeout_ms);

  int fd() const { return static_cast<int>(mq_); }
  const std::string& name() const { return name_; }
  bool valid() const { return mq_ != static_cast<mqd_t>(-1); }

 private:
  mqd_t mq_ = static_cast<mqd_t>(-1);
  std::string name_;
  long msgsize_ = 0;
};

}  // namespace ens
