// Server: the public face of the Hub.
#include "gpustream/transport/server.hpp"

#include "server/hub.hpp"

namespace gpustream::transport {

Server::Server(boost::asio::any_io_executor ex, SnapshotChannel& channel, ServerOptions options,
               StatsSource stats)
    : hub_(std::make_shared<Hub>(std::move(ex), channel, std::move(options), std::move(stats))) {}

Server::~Server() {
  // Force-close whatever is left; the hub lives on in pending handlers until they finish.
  if (hub_) hub_->stop({}, true);
}

void Server::start() { hub_->start(); }

void Server::stop(std::function<void()> on_stopped) { hub_->stop(std::move(on_stopped), false); }

std::optional<boost::asio::ip::tcp::endpoint> Server::http_endpoint() const {
  return hub_->http_endpoint();
}

std::optional<boost::asio::ip::tcp::endpoint> Server::tcp_endpoint() const {
  return hub_->tcp_endpoint();
}

ServerCounters Server::counters() const { return hub_->counters(); }

}  // namespace gpustream::transport
