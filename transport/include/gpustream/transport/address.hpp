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

/// A URL (or a comma-separated list of URLs) fit for logs and messages. Every URL that gpustream
/// logs or shows goes through this one function:
/// - the user:password@ (or token@) of each URL becomes "***@"
///   ("nats://u:p@h:4222" -> "nats://***@h:4222");
/// - the value of each query or fragment parameter whose name looks like a credential (contains
///   token, secret, pass, pwd, auth, key, sig, credential, session or cookie, in any case)
///   becomes "***" ("ws://h:9400/ws?token=abc&x=1" -> "ws://h:9400/ws?token=***&x=1"). A hidden
///   value ends at the next '&', ';' or '#' only, so a comma inside it is hidden too.
/// Text that is not a URL passes through unchanged.
std::string redact_url_credentials(std::string_view urls);

}  // namespace gpustream::transport
