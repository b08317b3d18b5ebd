// Transport: how a worker the supervisor starts gets its WorkerChannel (common/ipc/worker_channel.h).
//
//   LocalTransport  a socket pair per worker process; the worker's end is passed at fd 3.
//                   Nothing to authenticate: nobody else can hold either end.
//   TcpTransport    the supervisor listens on a TCP port (Boost.Asio); a remote worker (a Slurm
//                   pilot job) connects back and opens with a hello frame carrying its spawn
//                   token and the run's secret. The secret is a file only the run's user can
//                   read, in the state directory (`transport.secret`), which every node sees.
//                   A connection that does not present the secret and a token the supervisor is
//                   waiting for, within kHelloTimeoutS, is closed and counted (refused()).
//                   The link is not encrypted: it is meant for a cluster's private network.
// Offer() prepares a launch; the supervisor's end comes back at once (local) or later through
// Accept() once the worker has connected and proven itself (TCP).
// Single-threaded: driven by the supervisor loop (through WorkerPool).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/base/status.h"
#include "common/ipc/supervisor_link.h"
#include "common/ipc/worker_channel.h"
#include "orchestrator/workers/executor.h"

namespace ens {

class Transport {
 public:
  virtual ~Transport() = default;
  // Adds to `launch` what the worker needs to reach the supervisor. Returns the supervisor's
  // end when it exists now (local); an invalid channel when it arrives through Accept().
  // `worker_end` receives the worker's end when there is one (closed by the caller after Start).
  virtual StatusOr<WorkerChannel> Offer(WorkerLaunch* launch, WorkerChannel* worker_end) = 0;
  // A descriptor that is readable when Accept() has work (-1: none).
  virtual int listen_fd() const { return -1; }
  // Connections that proved themselves since the last call: (spawn token, supervisor's end).
  virtual std::vector<std::pair<uint64_t, WorkerChannel>> Accept() { return {}; }
  // The token will not be used any more (its worker ended): a late connection with it is refused.
  virtual void Forget(uint64_t token) {}
  virtual int refused() const { return 0; }
};

class LocalTransport : public Transport {
 public:
  StatusOr<WorkerChannel> Offer(WorkerLaunch* launch, WorkerChannel* worker_end) override;
};

class TcpTransport : public Transport {
 public:
  // Listens on bind_host:port (port 0: any free one); workers are told to connect to
  // advertise_host:<the port>. The secret is created in secret_file (mode 0600) when absent.
  static StatusOr<std::unique_ptr<TcpTransport>> Listen(const std::string& bind_host, int port,
                                                         const std::string& advertise_host,
                                                         const std::string& secret_file);
  ~TcpTransport() override;
  StatusOr<WorkerChannel> Offer(WorkerLaunch* launch, WorkerChannel* worker_end) override;
  int listen_fd() const override;
  std::vector<std::pair<uint64_t, WorkerChannel>> Accept() override;
  void Forget(uint64_t token) override;
  int refused() const override { return refused_; }
  int port() const { return port_; }
  const std::string& address() const { return address_; }  // host:port as workers are told

 private:
  TcpTransport() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string address_;
  std::string secret_file_;
  int port_ = 0;
  int refused_ = 0;
};

}  // namespace ens
