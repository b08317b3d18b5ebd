#include "orchestrator/service/http_server_limits.h"

#include <httplib.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

namespace ens {
namespace {

// A thread per connection being served, started when no thread is idle, up to max_threads;
// a thread idle for kIdleEnd ends. shutdown() (httplib's, when the server stops) runs what is
// queued, then waits for every thread to end.
class ConnectionThreads : public httplib::TaskQueue {
 public:
  explicit ConnectionThreads(size_t max_threads) : max_threads_(max_threads) {}
  ~ConnectionThreads() override = default;

  void enqueue(std::function<void()> fn) override {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.push_back(std::move(fn));
    if (idle_ < jobs_.size() && threads_ < max_threads_) {
      ++threads_;
      std::thread([this] { Work(); }).detach();
    }
    wake_.notify_one();
  }

  void shutdown() override {
    std::unique_lock<std::mutex> lock(mu_);
    stopping_ = true;
    wake_.notify_all();
    ended_.wait(lock, [this] { return threads_ == 0; });
  }

 private:
  static constexpr std::chrono::seconds kIdleEnd{10};

  void Work() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      ++idle_;
      bool job = wake_.wait_for(lock, kIdleEnd, [this] { return !jobs_.empty() || stopping_; }) && !jobs_.empty();
      --idle_;
      if (!job) break;
      std::function<void()> fn = std::move(jobs_.front());
      jobs_.pop_front();
      lock.unlock();
      fn();
      lock.lock();
    }
    --threads_;
    ended_.notify_all();
  }

  const size_t max_threads_;
  std::mutex mu_;
  std::condition_variable wake_, ended_;
  std::deque<std::function<void()>> jobs_;
  size_t threads_ = 0, idle_ = 0;
  bool stopping_ = false;
};

}  // namespace

Status BindHttpServer(httplib::Server& server, const std::string& bind, int port) {
  server.set_read_timeout(kHttpTimeoutS, 0);
  server.set_write_timeout(kHttpTimeoutS, 0);
  server.set_keep_alive_timeout(kHttpTimeoutS);
  server.set_keep_alive_max_count(kHttpKeepAliveRequests);
  server.set_payload_max_length(kHttpMaxBody);
  server.new_task_queue = [] { return new ConnectionThreads(kHttpMaxThreads); };
  // The listening socket, as bind_to_port makes it (the callback runs inside that call).
  auto listening = std::make_shared<int>(-1);
  server.set_socket_options([listening](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    *listening = sock;
  });
  if (!server.bind_to_port(bind.c_str(), port))
    return Status::IOError("cannot listen on " + bind + ":" + std::to_string(port) + " (address in use?)");
  // listen() again on a listening socket sets its backlog (Linux).
  if (*listening >= 0) ::listen(*listening, kHttpBacklog);
  return Status::Ok();
}

}  // namespace ens
