// SupervisorLink: the remote worker's side of the TCP transport (orchestrator/workers/transport.h).
//
// A remote worker (a Slurm pilot job) connects to the address it was given, sends one hello
// frame, {"hello": 1, "token": "<16 hex>", "secret": "<the run's secret>"}, and waits for
// {"welcome": 1} (or the connection's close: refused). From then on the connection is an
// ordinary WorkerChannel (length-framed, see worker_channel.h).
// The secret lives in the state directory (RunLayout::TransportSecretFile, mode 0600): a
// worker that cannot read it is on a node that does not see the run's files, and says so.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/base/status.h"
#include "common/ipc/worker_channel.h"

namespace ens {

inline constexpr double kHelloTimeoutS = 10;

struct Hello {
  uint64_t token = 0;
  std::string secret;
};
std::string EncodeHello(const Hello& h);
// InvalidArgument for anything that is not a well-formed hello.
StatusOr<Hello> DecodeHello(const std::string& bytes);
std::string TokenHex(uint64_t token);
std::optional<uint64_t> ParseTokenHex(const std::string& hex);

// Reads the run's secret. NotFound/IOError name the file and say that the state directory
// must be on a filesystem every node sees.
StatusOr<std::string> ReadRunSecret(const std::string& secret_file);

// Connects to "host:port", says hello, waits for the welcome. Errors name what failed.
StatusOr<WorkerChannel> ConnectToSupervisor(const std::string& address, uint64_t token,
                                            const std::string& secret_file, double timeout_s);

}  // namespace ens
