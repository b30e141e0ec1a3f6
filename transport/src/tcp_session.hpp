// One TCP client: JSON lines both ways. With a token, the first line must be
// {"type":"auth","token":"..."} (within the handshake timeout) before anything is sent.
#pragma once

#include <memory>
#include <string>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include "stream_session.hpp"

namespace gpustream::transport {

class TcpSession final : public StreamSession {
 public:
  TcpSession(std::shared_ptr<Hub> hub, tcp::socket socket);
  void run();

 private:
  void write(std::shared_ptr<const std::string> msg) override;
  void close_transport(bool graceful) override;
  void do_read();
  void drain();
  void on_read(const boost::system::error_code& ec, std::size_t n);
  void on_line(std::string_view line);
  std::shared_ptr<TcpSession> self() {
    return std::static_pointer_cast<TcpSession>(shared_from_this());
  }

  tcp::socket socket_;
  std::string rbuf_;
  boost::asio::steady_timer timer_;  // auth deadline, then the graceful-close deadline
  bool authorized_ = false;
  bool reading_ = false;
  bool draining_ = false;  // graceful close: FIN sent, reading until the peer closes
};

}  // namespace gpustream::transport
