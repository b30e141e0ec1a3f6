// TLS contexts over the system's OpenSSL (Asio's ssl::context): the server's (certificate, key,
// optional client CA for mutual TLS) and the client's (trusted CAs, optional client
// certificate), TLS 1.2 or newer, and the words for what went wrong in a handshake.
//
// Thread safety: the functions are; a context is shared read-only by the streams made from it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/ssl/context.hpp>
#include <boost/system/error_code.hpp>

#include "gpustream/transport/server.hpp"

struct ssl_st;  // OpenSSL's SSL

namespace gpustream::transport {

/// A server context made from `files`.
struct ServerTlsContext {
  std::shared_ptr<boost::asio::ssl::context> context;
  std::int64_t not_after = 0;         // the certificate's expiry, Unix seconds
  std::vector<std::string> warnings;  // e.g. an expired certificate: said once at load
};

/// Throws std::runtime_error naming the file and what is wrong with it (unreadable, not a PEM
/// certificate or key, a key that does not belong to the certificate, an encrypted key).
ServerTlsContext make_server_tls_context(const TlsFiles& files);

/// The client side: verify the server against `ca_file` (empty: the system's trusted CAs), and
/// present `cert_file` + `key_file` when both are set (mutual TLS). Throws std::runtime_error.
std::shared_ptr<boost::asio::ssl::context> make_client_tls_context(const std::string& ca_file,
                                                                   const std::string& cert_file,
                                                                   const std::string& key_file);

/// Sets SNI (a host name, not an address) and the name or address the server's certificate must
/// carry, on a client stream's SSL. False when OpenSSL refused it.
bool set_tls_peer_name(ssl_st* ssl, const std::string& host);

/// Why a client handshake failed, in OpenSSL's words: the certificate verification failure
/// ("certificate verify failed: unable to get local issuer certificate", "... hostname
/// mismatch") when there was one, else the error's own text.
std::string describe_client_tls_failure(const boost::system::error_code& ec, ssl_st* ssl);

/// The reason label of a failed server handshake.
TlsFailure classify_tls_failure(const boost::system::error_code& ec);

}  // namespace gpustream::transport
