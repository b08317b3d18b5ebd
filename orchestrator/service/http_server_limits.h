// The limits both daemons' HTTP servers (one HttpEndpoint each, http_endpoint.h) run under, so that
// slow or silent clients cannot starve /metrics or the pages.
//
// cpp-httplib serves each connection on one thread of its task queue, blocking in reads.
// BindHttpServer() sets a short read and write timeout (a client that sends part of a request
// and stops gets a 400 after kHttpTimeoutS, and is closed after the keep-alive wait that
// follows: 2 x kHttpTimeoutS in all; measured 4.0 s), a short keep-alive (an
// idle connection holds its thread at most kHttpTimeoutS, and for at most
// kHttpKeepAliveRequests requests), a cap on a request body, a task queue that starts a thread
// per connection as connections need them, up to kHttpMaxThreads (threads idle for a while
// end), and a listen backlog of kHttpBacklog (httplib 0.11 listens with 5: a burst of
// connections overflowed it and a scrape's connect waited for SYN retransmits, 1 s and more).
// So up to kHttpMaxThreads - 1 slow clients at once leave a thread for the scrape (1,000 clients
// that send half a request held /metrics 17 s with 64 threads; 1.5 ms with 1,024: BENCHMARKS.md).
// Connections past that wait, in order, for a thread (httplib 0.11 has no bound on that queue:
// each waits at most kHttpTimeoutS per thread ahead of it, longer for a client that trickles
// bytes).
#pragma once

#include <cstddef>
#include <string>

#include "common/base/status.h"

namespace httplib {
class Server;
}

namespace ens {

inline constexpr int kHttpTimeoutS = 2;
inline constexpr int kHttpKeepAliveRequests = 10;
inline constexpr size_t kHttpMaxThreads = 1024;
inline constexpr size_t kHttpMaxBody = 64 * 1024;  // GETs only: nothing needs a body
inline constexpr int kHttpBacklog = 1024;

// Applies the limits above to `server` and binds it to bind:port, with SO_REUSEADDR and not
// SO_REUSEPORT (cpp-httplib's default, which would let two daemons share a port). Fails,
// naming address and port, when the port is taken. Then listen_after_bind() serves.
Status BindHttpServer(httplib::Server& server, const std::string& bind, int port);

}  // namespace ens
