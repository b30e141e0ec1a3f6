// One WebSocket client on /ws: one message per text frame. Created by HttpSession after the
// upgrade request passed the Host, Origin and token checks.
#pragma once

#include <memory>
#include <string>

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/websocket/stream.hpp>

#include "server/stream_session.hpp"
#include "wire/tls_stream.hpp"

namespace gpustream::transport {

class WsSession final : public StreamSession {
 public:
  WsSession(std::shared_ptr<ServerCore> core, MaybeTlsStream stream, boost::asio::ip::address peer);
  void run(boost::beast::http::request<boost::beast::http::string_body> upgrade);

 private:
  bool write(std::shared_ptr<const std::string> msg) override;
  void close_transport(bool graceful) override;
  void do_read();
  std::shared_ptr<WsSession> self() {
    return std::static_pointer_cast<WsSession>(shared_from_this());
  }

  boost::beast::websocket::stream<MaybeTlsStream> ws_;
  boost::beast::flat_buffer rbuf_;
  boost::beast::http::request<boost::beast::http::string_body> upgrade_;
  bool accepted_ = false;
};

}  // namespace gpustream::transport
