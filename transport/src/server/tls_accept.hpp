// The server's side of a TLS connection's start: tells TLS from plaintext by the first bytes
// (Beast's detect_ssl), answers a plaintext client in its own language and closes, or does the
// TLS handshake; all of it within limits.handshake_timeout (the tcp_stream's expiry), so a
// client that says nothing or stops halfway never holds its connection slot longer. Failures are
// counted by reason (ServerMetrics::tls_handshake_failures) and logged once per reason.
//
// Thread safety: on the session's strand. Cancellation: closing the socket ends it (done(false)).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include <boost/asio/ssl/context.hpp>
#include <boost/beast/core/flat_buffer.hpp>

#include "server/server_metrics.hpp"
#include "wire/tls_stream.hpp"

namespace gpustream::transport {

/// What a plaintext HTTP client on a TLS listener reads: a 400 saying to use https://.
std::string plaintext_http_answer();
/// What a plaintext TCP client reads: an `error` line saying to connect with tls://.
std::string plaintext_tcp_answer();

/// Starts TLS on `stream` (use_tls(context), then the handshake) and calls done(true); or, for
/// a plaintext client, writes `plaintext_answer`, closes, and calls done(false); on a failure or
/// the timeout, closes and calls done(false). `stream` and `buffer` must outlive the operation
/// (done keeps their owner alive). `listener` names the listener in the log ("HTTP", "TCP").
void accept_tls(MaybeTlsStream& stream, boost::beast::flat_buffer& buffer,
                std::shared_ptr<boost::asio::ssl::context> context,
                std::chrono::milliseconds timeout, std::string plaintext_answer,
                const char* listener, ServerMetrics& metrics, std::function<void(bool)> done);

}  // namespace gpustream::transport
