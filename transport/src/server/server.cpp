// Server: the public face of ServerCore.
#include "gpustream/transport/server.hpp"

#include "server/server_core.hpp"

namespace gpustream::transport {

// The public signature takes the executor by value (server.hpp).
// NOLINTNEXTLINE(performance-unnecessary-value-param)
Server::Server(boost::asio::any_io_executor ex, SnapshotChannel& channel, ServerOptions options,
               StatsSource stats)
    : core_(std::make_shared<ServerCore>(std::move(ex), channel, std::move(options),
                                         std::move(stats))) {}

Server::~Server() {
  // Force-close whatever is left; the core lives on in pending handlers until they finish.
  if (core_) core_->stop({}, true);
}

void Server::start() { core_->start(); }

void Server::stop(std::function<void()> on_stopped) { core_->stop(std::move(on_stopped), false); }

std::optional<boost::asio::ip::tcp::endpoint> Server::http_endpoint() const {
  return core_->http_endpoint();
}

std::optional<boost::asio::ip::tcp::endpoint> Server::tcp_endpoint() const {
  return core_->tcp_endpoint();
}

ServerCounters Server::counters() const { return core_->counters(); }

bool Server::set_token(std::string token) { return core_->set_token(std::move(token)); }

}  // namespace gpustream::transport

namespace gpustream::transport {

std::string Server::reload_tls(const std::optional<TlsFiles>& files) {
  return core_->reload_tls(files);
}

}  // namespace gpustream::transport
