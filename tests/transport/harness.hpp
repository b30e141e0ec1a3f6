// Test harness for the transport suite: a real Server on a real io_context (one thread, the
// test's), a SnapshotChannel the test publishes into, and TCP / WebSocket / HTTP clients that
// run on the same io_context. Time is never slept: run_until() runs the io_context until a
// condition holds, with a generous deadline that only matters when a test fails.
//
// The Beast-heavy implementation is compiled once, in harness_test.cpp.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/json/object.hpp>

#include "gpustream/channel.hpp"
#include "gpustream/transport/server.hpp"

namespace gpustream::transport::test {

using namespace std::chrono_literals;

inline constexpr std::chrono::milliseconds kDeadline{10000};

/// A snapshot of `devices` simulated GPUs ("<probe>-gpu<i>"), some metrics present, the rest
/// absent; `processes` processes per device (to make big messages); a host part if `host`.
GpuSnapshot make_snapshot(const std::string& probe, int devices = 2, int processes = 0,
                          bool host = false);

class Client;

struct Fixture {
  explicit Fixture(std::size_t history = 64);
  ~Fixture();

  /// Starts a server with `o` (http and tcp default to 127.0.0.1:0, ephemeral ports).
  void start(ServerOptions o = {}, Server::StatsSource stats = {});
  /// Graceful stop; true when it completed within the deadline.
  bool stop();

  /// Runs the io_context until `pred` holds; false on timeout.
  bool run_until(const std::function<bool()>& pred, std::chrono::milliseconds timeout = kDeadline);
  /// Runs whatever is ready now (and for `d` more), without a condition.
  void run_for(std::chrono::milliseconds d);

  SnapshotPtr publish(const std::string& probe = "sim", int devices = 2, int processes = 0);

  unsigned short http_port() const;
  unsigned short tcp_port() const;

  boost::asio::io_context io;
  SnapshotChannel channel;
  std::unique_ptr<Server> server;
  std::vector<std::weak_ptr<Client>> clients;  // closed by the destructor
};

/// One streaming client (TCP lines or WebSocket frames) on the fixture's io_context. Received
/// messages are parsed and kept in order; the connection state is observable.
class Client : public std::enable_shared_from_this<Client> {
 public:
  struct Options {
    std::string target = "/ws";                  // WebSocket only
    std::map<std::string, std::string> headers;  // WebSocket upgrade request headers
    std::optional<std::string> host;             // WebSocket Host header (default 127.0.0.1:port)
    bool read = true;                            // false: never read (a "slow" client)
    std::optional<int> receive_buffer;           // SO_RCVBUF before connecting
    std::optional<unsigned short> port;          // TCP: another port (default: the TCP port)
  };

  /// Clients live on in their pending handlers; Fixture closes them all when it ends.
  static std::shared_ptr<Client> tcp(Fixture& f, Options o);
  static std::shared_ptr<Client> tcp(Fixture& f) { return tcp(f, Options{}); }
  static std::shared_ptr<Client> ws(Fixture& f, Options o);
  static std::shared_ptr<Client> ws(Fixture& f) { return ws(f, Options{}); }

  virtual ~Client() = default;

  /// Starts connecting (and the WebSocket handshake); see connected() / failed().
  virtual void connect() = 0;
  /// Sends one message (a line on TCP — the '\n' is added — or a text frame).
  virtual void send(const std::string& text) = 0;
  /// Sends raw bytes (TCP) or a binary frame (WebSocket).
  virtual void send_raw(const std::string& bytes) = 0;
  virtual void close() = 0;
  /// TCP: shutdown(SHUT_WR) after what is queued (`nc -N`); the client keeps reading.
  virtual void shutdown_send() {}
  /// Starts reading (for a client created with read = false).
  virtual void start_reading() {}

  bool connected() const { return connected_; }
  /// The connection ended (refused, closed by the server, error).
  bool ended() const { return ended_; }
  /// WebSocket: the HTTP status of a refused upgrade (0 otherwise).
  int refused_status() const { return refused_status_; }
  /// WebSocket: the close code the server sent (0 when none).
  int close_code() const { return close_code_; }
  /// Why the connection ended (the error's message), empty while it is open.
  const std::string& end_reason() const { return end_reason_; }

  const std::vector<boost::json::object>& messages() const { return messages_; }
  std::vector<boost::json::object> of_type(std::string_view type) const;
  std::size_t count(std::string_view type) const;
  /// Sequences of the snapshot messages received, in order.
  std::vector<std::uint64_t> sequences() const;
  /// Raw texts that were not valid JSON (should stay empty).
  const std::vector<std::string>& garbage() const { return garbage_; }
  /// TCP: bytes after the last '\n' when the connection ended (a line cut mid-message).
  const std::string& partial() const { return partial_; }

 protected:
  void on_text(std::string_view text);
  bool connected_ = false;
  bool ended_ = false;
  int refused_status_ = 0;
  int close_code_ = 0;
  std::string end_reason_;
  std::vector<boost::json::object> messages_;
  std::vector<std::string> garbage_;
  std::string partial_;
};

struct HttpResult {
  int status = 0;  // 0: no answer (connection failed or closed)
  std::string body;
  std::map<std::string, std::string> headers;  // lower-case names
};

/// One GET (or `method`) on the fixture's HTTP port. Host defaults to 127.0.0.1:port.
HttpResult http_request(Fixture& f, const std::string& target,
                        std::map<std::string, std::string> headers = {},
                        const std::string& method = "GET", const std::string& body = {});

/// Connects, waits for hello; fails the test (ADD_FAILURE) on timeout.
std::shared_ptr<Client> connected_tcp(Fixture& f);
std::shared_ptr<Client> connected_ws(Fixture& f);

}  // namespace gpustream::transport::test
