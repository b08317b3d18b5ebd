#include "common/ipc/supervisor_link.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace ens {

using json = nlohmann::json;
namespace asio = boost::asio;

std::string TokenHex(uint64_t token) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(token));
  return buf;
}

std::optional<uint64_t> ParseTokenHex(const std::string& hex) {
  if (hex.size() != 16 || hex.find_first_not_of("0123456789abcdef") != std::string::npos) return std::nullopt;
  uint64_t t = std::stoull(hex, nullptr, 16);
  if (t == 0) return std::nullopt;
  return t;
}

std::string EncodeHello(const Hello& h) {
  return json{{"hello", 1}, {"token", TokenHex(h.token)}, {"secret", h.secret}}.dump();
}

StatusOr<Hello> DecodeHello(const std::string& bytes) {
  json j = json::parse(bytes, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || j.value("hello", 0) != 1 || !j.contains("token") || !j["token"].is_string() ||
      !j.contains("secret") || !j["secret"].is_string())
    return Status::InvalidArgument("not a worker's hello");
  auto token = ParseTokenHex(j["token"].get<std::string>());
  if (!token) return Status::InvalidArgument("hello with a malformed spawn token");
  return Hello{*token, j["secret"].get<std::string>()};
}

StatusOr<std::string> ReadRunSecret(const std::string& secret_file) {
  std::ifstream in(secret_file);
  std::string secret;
  if (!in || !std::getline(in, secret) || secret.empty())
    return Status::NotFound("cannot read the run's secret " + secret_file +
                            ": this node does not see the run's state directory (it must be on a "
                            "filesystem every node sees, e.g. NFS or Lustre)");
  return secret;
}

StatusOr<WorkerChannel> ConnectToSupervisor(const std::string& address, uint64_t token,
                                            const std::string& secret_file, double timeout_s) {
  auto secret = ReadRunSecret(secret_file);
  if (!secret.ok()) return secret.status();
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size())
    return Status::InvalidArgument("supervisor address '" + address + "' is not host:port");
  const std::string host = address.substr(0, colon), port = address.substr(colon + 1);
  asio::io_context ctx;
  asio::ip::tcp::resolver resolver(ctx);
  boost::system::error_code ec;
  auto endpoints = resolver.resolve(host, port, ec);
  if (ec) return Status::IOError("cannot resolve supervisor address " + address + ": " + ec.message());
  asio::ip::tcp::socket socket(ctx);
  boost::system::error_code connect_ec = asio::error::timed_out;
  asio::async_connect(socket, endpoints,
                      [&](const boost::system::error_code& e, const asio::ip::tcp::endpoint&) { connect_ec = e; });
  ctx.run_for(std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::duration<double>(timeout_s)));
  if (connect_ec) return Status::IOError("cannot connect to the supervisor at " + address + ": " + connect_ec.message());
  socket.set_option(asio::ip::tcp::no_delay(true), ec);
  auto channel = WorkerChannel::AdoptStream(socket.release(ec));
  if (!channel.ok()) return channel.status();
  const int timeout_ms = static_cast<int>(timeout_s * 1000);
  if (Status s = channel->Send(EncodeHello({token, *secret}), timeout_ms); !s.ok())
    return Status::IOError("hello to the supervisor at " + address + ": " + s.message());
  auto reply = channel->Receive(timeout_ms);
  if (!reply.ok()) return reply.status();
  if (reply->kind != WorkerChannel::Received::kMessage)
    return Status::InvalidArgument("the supervisor at " + address +
                                   " refused this worker (a wrong secret, or a spawn token it does not expect)");
  json w = json::parse(reply->bytes, nullptr, false);
  if (!w.is_object() || w.value("welcome", 0) != 1)
    return Status::InvalidArgument("the supervisor at " + address + " answered the hello with something else");
  return std::move(*channel);
}

}  // namespace ens
