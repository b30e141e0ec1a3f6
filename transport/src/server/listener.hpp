// The listeners and admission: binds the HTTP and TCP acceptors, accepts, and lets a new socket
// in only when the registry has room for it (per transport, per address); a refused client is
// told why without blocking (`503` on HTTP, an `error` "limit" line on TCP) and closed.
//
// Thread safety: none; everything runs on the core's strand. Cancellation: close() closes the
// acceptors; pending accepts end with operation_aborted.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string_view>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/strand.hpp>

#include "server/session_registry.hpp"

namespace gpustream::transport {

using Strand = boost::asio::strand<boost::asio::any_io_executor>;
using tcp = boost::asio::ip::tcp;

/// Tells a refused client why (best effort, never blocks), then closes the socket.
void refuse(tcp::socket& s, ConnKind kind, SessionRegistry::Admission why);
/// The text of a refusal: the HTTP 503 response, or the TCP error line.
std::string refusal_text(ConnKind kind, SessionRegistry::Admission why);

class Listener : public std::enable_shared_from_this<Listener> {
 public:
  /// Called with every admitted socket (and its transport: http, http_reserved or tcp).
  using OnAccept = std::function<void(tcp::socket, ConnKind)>;

  Listener(Strand strand, const ServerLimits& limits, SessionRegistry& registry,
           ServerMetrics& metrics, OnAccept on_accept);

  /// Binds; throws boost::system::system_error.
  void bind(const std::optional<tcp::endpoint>& http, const std::optional<tcp::endpoint>& tcp);
  void start();
  void close();

  const std::optional<tcp::endpoint>& http_bound() const noexcept { return http_bound_; }
  const std::optional<tcp::endpoint>& tcp_bound() const noexcept { return tcp_bound_; }

 private:
  void accept(ConnKind kind);
  void on_accepted(ConnKind kind, tcp::socket s);
  std::optional<tcp::acceptor>& acceptor(ConnKind kind) noexcept {
    return kind == ConnKind::tcp ? tcp_acceptor_ : http_acceptor_;
  }

  Strand strand_;
  const ServerLimits& limits_;
  SessionRegistry& registry_;
  ServerMetrics& metrics_;
  OnAccept on_accept_;
  std::optional<tcp::acceptor> http_acceptor_, tcp_acceptor_;
  std::optional<tcp::endpoint> http_bound_, tcp_bound_;
  bool closed_ = false;
};

}  // namespace gpustream::transport
