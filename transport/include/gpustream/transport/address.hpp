// gpustream/transport/address.hpp — "HOST:PORT" listen addresses and loopback checks.
//
// Accepted forms: "127.0.0.1:9400", "[::1]:9400", "localhost:9400" (→ 127.0.0.1),
// "0.0.0.0:9400", "[::]:9400". Port 0 asks the system for an ephemeral port. Host names other
// than "localhost" are refused: a listen address names an interface, not a DNS name.
//
// Thread safety: reentrant functions.
#pragma once

#include <string>
#include <string_view>

#include <boost/asio/ip/tcp.hpp>

namespace gpustream::transport {

/// Throws std::invalid_argument with a message for the user.
boost::asio::ip::tcp::endpoint parse_listen_address(std::string_view text);

/// "127.0.0.1:9400", "[::1]:9400".
std::string to_string(const boost::asio::ip::tcp::endpoint& ep);

/// True for 127.0.0.0/8, ::1 and IPv4-mapped loopback.
bool is_loopback(const boost::asio::ip::address& a) noexcept;

/// A URL list fit for logs and messages: the user:password@ (or token@) of each comma-separated
/// URL becomes "***@" ("nats://u:p@h:4222" -> "nats://***@h:4222").
std::string redact_url_credentials(std::string_view urls);

}  // namespace gpustream::transport
