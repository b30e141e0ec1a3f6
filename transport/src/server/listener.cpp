// The listeners and admission.
#include "server/listener.hpp"

#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/steady_timer.hpp>

#include "gpustream/log.hpp"
#include "gpustream/transport/protocol.hpp"

namespace gpustream::transport {
namespace asio = boost::asio;
using boost::system::error_code;

namespace {

LogOnce g_accept_log;  // NOLINT(cppcoreguidelines-avoid-non-const-global-variables)

tcp::acceptor bind_one(const Strand& strand, const tcp::endpoint& ep) {
  tcp::acceptor a(strand);
  a.open(ep.protocol());
  a.set_option(asio::socket_base::reuse_address(true));
  if (ep.address().is_v6()) a.set_option(asio::ip::v6_only(true));
  a.bind(ep);
  a.listen(asio::socket_base::max_listen_connections);
  return a;
}

}  // namespace

std::string refusal_text(ConnKind kind, SessionRegistry::Admission why) {
  const std::string reason = why == SessionRegistry::Admission::address_full
                                 ? "too many connections from this address"
                                 : "too many connections";
  if (kind == ConnKind::tcp) return error_message(kErrLimit, reason);
  const std::string body = reason + "\n";
  return "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
         "Content-Length: " +
         std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
}

void refuse(tcp::socket& s, ConnKind kind, SessionRegistry::Admission why) {
  const auto message = refusal_text(kind, why);
  error_code ec;
  s.non_blocking(true, ec);
  s.write_some(asio::buffer(message.data(), message.size()), ec);
  s.shutdown(tcp::socket::shutdown_both, ec);
  s.close(ec);
}

Listener::Listener(Strand strand, const ServerLimits& limits, SessionRegistry& registry,
                   ServerMetrics& metrics, OnAccept on_accept)
    : strand_(std::move(strand)),
      limits_(limits),
      registry_(registry),
      metrics_(metrics),
      on_accept_(std::move(on_accept)) {}

void Listener::bind(const std::optional<tcp::endpoint>& http,
                    const std::optional<tcp::endpoint>& tcp_ep) {
  if (http) {
    http_acceptor_.emplace(bind_one(strand_, *http));
    http_bound_ = http_acceptor_->local_endpoint();
  }
  if (tcp_ep) {
    tcp_acceptor_.emplace(bind_one(strand_, *tcp_ep));
    tcp_bound_ = tcp_acceptor_->local_endpoint();
  }
}

void Listener::start() {
  accept(ConnKind::http);
  accept(ConnKind::tcp);
}

void Listener::close() {
  closed_ = true;
  error_code ec;
  if (http_acceptor_) http_acceptor_->close(ec);
  if (tcp_acceptor_) tcp_acceptor_->close(ec);
}

void Listener::accept(ConnKind kind) {
  auto& a = acceptor(kind);
  if (!a || closed_) return;
  a->async_accept(strand_, [self = shared_from_this(), kind](error_code ec, tcp::socket s) {
    if (ec == asio::error::operation_aborted || self->closed_) return;
    if (ec) {
      // Out of file descriptors and the like: say it once, retry a little later (no busy loop).
      if (g_accept_log.first("accept:" + ec.message()))
        logger()->warn("gpustream serve: accept failed: {} (retrying)", ec.message());
      auto t = std::make_shared<asio::steady_timer>(self->strand_, std::chrono::milliseconds{100});
      t->async_wait([self, t, kind](error_code) { self->accept(kind); });
      return;
    }
    self->on_accepted(kind, std::move(s));
    self->accept(kind);
  });
}

void Listener::on_accepted(ConnKind kind, tcp::socket s) {
  ServerMetrics::bump(metrics_.connections_accepted);
  error_code ec;
  const auto peer = s.remote_endpoint(ec);
  if (ec) return;  // already gone
  const auto admission = registry_.admit(kind, peer.address());
  if (admission == SessionRegistry::Admission::reserved)
    kind = ConnKind::http_reserved;
  else if (admission != SessionRegistry::Admission::ok) {
    ServerMetrics::bump(metrics_.connections_rejected);
    refuse(s, kind, admission);
    return;
  }
  s.set_option(tcp::no_delay(true), ec);
  if (const auto b = limits_.socket_send_buffer)
    s.set_option(asio::socket_base::send_buffer_size(*b), ec);
  on_accept_(std::move(s), kind);
}

}  // namespace gpustream::transport
