// TLS contexts over OpenSSL, and the words for handshake failures.
#include "wire/tls_context.hpp"

#include <cerrno>
#include <cstdio>
#include <ctime>
#include <memory>
#include <stdexcept>
#include <system_error>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/beast/core/error.hpp>

namespace gpustream::transport {
namespace ssl = boost::asio::ssl;
using boost::system::error_code;

namespace {

// TLS 1.2 suites with forward secrecy and an AEAD cipher only (TLS 1.3's are OpenSSL's own).
constexpr const char* kCiphers12 =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"
    "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

/// Throws when `path` cannot be opened for reading, naming the option and the system's reason.
void check_readable(const char* what, const std::string& path) {
  if (path.empty()) throw std::runtime_error(std::string(what) + ": no file given");
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f)
    throw std::runtime_error(std::string(what) + " " + path + ": " +
                             std::generic_category().message(errno));
  std::fclose(f);
}

/// OpenSSL's last error queue as one line (and cleared), or `fallback`.
std::string openssl_errors(std::string fallback) {
  std::string out;
  while (const unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    if (!out.empty()) out += "; ";
    const char* reason = ERR_reason_error_string(e);
    out += reason ? reason : buf;
  }
  return out.empty() ? std::move(fallback) : out;
}

void common_options(ssl::context& ctx) {
  ctx.set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                  ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 |
                  ssl::context::no_compression | ssl::context::single_dh_use);
  SSL_CTX* h = ctx.native_handle();
  SSL_CTX_set_min_proto_version(h, TLS1_2_VERSION);
  SSL_CTX_set_options(h, SSL_OP_NO_RENEGOTIATION);
  SSL_CTX_set_cipher_list(h, kCiphers12);
  // An encrypted key would make OpenSSL ask on the terminal: refuse it instead.
  ctx.set_password_callback([](std::size_t, ssl::context::password_purpose) { return ""; });
}

/// OpenSSL's password callback: no password (an encrypted key is refused, never prompted for).
int refuse_password(char*, int, int, void*) { return 0; }

void load_identity(ssl::context& ctx, const char* cert_what, const std::string& cert,
                   const char* key_what, const std::string& key) {
  check_readable(cert_what, cert);
  check_readable(key_what, key);
  SSL_CTX* h = ctx.native_handle();
  ERR_clear_error();
  if (SSL_CTX_use_certificate_chain_file(h, cert.c_str()) != 1)
    throw std::runtime_error(std::string(cert_what) + " " + cert + ": not a PEM certificate (" +
                             openssl_errors("unreadable") + ")");
  // The key is read here, not by SSL_CTX_use_PrivateKey_file, to tell "not a key" from "not
  // this certificate's key".
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_file(key.c_str(), "r"), BIO_free);
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> pkey(
      bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, refuse_password, nullptr) : nullptr,
      EVP_PKEY_free);
  if (!pkey)
    throw std::runtime_error(std::string(key_what) + " " + key +
                             ": not an unencrypted PEM private key (" +
                             openssl_errors("unreadable") + ")");
  const X509* x = SSL_CTX_get0_certificate(h);
  if (!x || X509_check_private_key(x, pkey.get()) != 1) {
    ERR_clear_error();
    throw std::runtime_error(std::string(key_what) + " " + key +
                             " does not belong to the certificate in " + cert);
  }
  if (SSL_CTX_use_PrivateKey(h, pkey.get()) != 1)
    throw std::runtime_error(std::string(key_what) + " " + key + ": " +
                             openssl_errors("cannot be used"));
}

std::int64_t unix_time(const ASN1_TIME* t) {
  std::tm tm{};
  if (!t || ASN1_TIME_to_tm(t, &tm) != 1) return 0;
  return static_cast<std::int64_t>(timegm(&tm));
}

std::string utc_text(std::int64_t t) {
  const std::time_t tt = static_cast<std::time_t>(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

std::string_view to_string(TlsFailure f) noexcept {
  switch (f) {
    case TlsFailure::plaintext:
      return "plaintext";
    case TlsFailure::timeout:
      return "timeout";
    case TlsFailure::client_certificate:
      return "client_certificate";
    case TlsFailure::protocol:
      return "protocol";
    case TlsFailure::peer_refused:
      return "peer_refused";
    case TlsFailure::closed:
      return "closed";
  }
  return "unknown";
}

ServerTlsContext make_server_tls_context(const TlsFiles& files) {
  ServerTlsContext out;
  out.context = std::make_shared<ssl::context>(ssl::context::tls_server);
  auto& ctx = *out.context;
  common_options(ctx);
  SSL_CTX* h = ctx.native_handle();
  SSL_CTX_set_options(h, SSL_OP_CIPHER_SERVER_PREFERENCE);
  // An idle connection gives OpenSSL's record buffers back (most stream clients only read).
  SSL_CTX_set_mode(h, SSL_MODE_RELEASE_BUFFERS);
  load_identity(ctx, "--tls-cert", files.cert_file, "--tls-key", files.key_file);
  if (!files.client_ca_file.empty()) {
    check_readable("--tls-client-ca", files.client_ca_file);
    ERR_clear_error();
    if (SSL_CTX_load_verify_locations(h, files.client_ca_file.c_str(), nullptr) != 1)
      throw std::runtime_error("--tls-client-ca " + files.client_ca_file +
                               ": no PEM certificate in it (" + openssl_errors("unreadable") + ")");
    // Tell clients which CAs their certificate must come from.
    if (STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(files.client_ca_file.c_str()))
      SSL_CTX_set_client_CA_list(h, names);
    SSL_CTX_set_verify(h, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
    // Needed for session resumption when client certificates are verified.
    static const unsigned char kSessionContext[] = "gpustream";
    SSL_CTX_set_session_id_context(h, kSessionContext, sizeof kSessionContext - 1);
  }
  const X509* cert = SSL_CTX_get0_certificate(h);
  if (cert) {
    out.not_after = unix_time(X509_get0_notAfter(cert));
    const std::int64_t not_before = unix_time(X509_get0_notBefore(cert));
    const auto now = static_cast<std::int64_t>(std::time(nullptr));
    if (out.not_after != 0 && out.not_after <= now)
      out.warnings.push_back("the certificate in " + files.cert_file + " expired on " +
                             utc_text(out.not_after) +
                             ": clients that verify it will refuse to connect");
    else if (not_before > now)
      out.warnings.push_back("the certificate in " + files.cert_file + " is not valid before " +
                             utc_text(not_before));
  }
  return out;
}

std::shared_ptr<ssl::context> make_client_tls_context(const std::string& ca_file,
                                                      const std::string& cert_file,
                                                      const std::string& key_file) {
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_client);
  common_options(*ctx);
  SSL_CTX* h = ctx->native_handle();
  ERR_clear_error();
  if (ca_file.empty()) {
    SSL_CTX_set_default_verify_paths(h);
  } else {
    check_readable("CA file", ca_file);
    if (SSL_CTX_load_verify_locations(h, ca_file.c_str(), nullptr) != 1)
      throw std::runtime_error("CA file " + ca_file + ": no PEM certificate in it (" +
                               openssl_errors("unreadable") + ")");
  }
  SSL_CTX_set_verify(h, SSL_VERIFY_PEER, nullptr);
  if (!cert_file.empty() || !key_file.empty())
    load_identity(*ctx, "client certificate", cert_file, "client key", key_file);
  return ctx;
}

bool set_tls_peer_name(SSL* ssl, const std::string& host) {
  error_code ec;
  (void)boost::asio::ip::make_address(host, ec);
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
  if (!ec) return X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str()) == 1;
  X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
  return SSL_set_tlsext_host_name(ssl, host.c_str()) == 1 && SSL_set1_host(ssl, host.c_str()) == 1;
}

std::string describe_client_tls_failure(const error_code& ec, SSL* ssl) {
  if (ssl) {
    const long v = SSL_get_verify_result(ssl);
    if (v != X509_V_OK)
      return std::string("TLS: the server's certificate was refused: certificate verify failed: ") +
             X509_verify_cert_error_string(v);
  }
  if (ec == ssl::error::stream_truncated || ec == boost::asio::error::eof)
    return "TLS: the server closed the connection during the handshake (a client certificate "
           "missing or refused, or not a TLS server)";
  if (ec.category() == boost::asio::error::get_ssl_category()) {
    const int reason = ERR_GET_REASON(static_cast<unsigned long>(ec.value()));
    if (reason == SSL_R_WRONG_VERSION_NUMBER || reason == SSL_R_PACKET_LENGTH_TOO_LONG ||
        reason == SSL_R_RECORD_LENGTH_MISMATCH)
      return "TLS: the server does not speak TLS on this port (" + ec.message() + ")";
    return "TLS: " + ec.message();
  }
  return ec.message();
}

TlsFailure classify_tls_failure(const error_code& ec) {
  if (ec == boost::beast::error::timeout) return TlsFailure::timeout;
  if (ec.category() != boost::asio::error::get_ssl_category()) return TlsFailure::closed;
  const int reason = ERR_GET_REASON(static_cast<unsigned long>(ec.value()));
  switch (reason) {
    case SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE:
    case SSL_R_CERTIFICATE_VERIFY_FAILED:
      return TlsFailure::client_certificate;
    case SSL_R_TLSV1_ALERT_PROTOCOL_VERSION:
      return TlsFailure::protocol;
    default:
      break;
  }
  // Reasons from SSL_AD_REASON_OFFSET on are alerts the client sent: it refused us.
  if (reason >= SSL_AD_REASON_OFFSET && reason < SSL_AD_REASON_OFFSET + 256)
    return TlsFailure::peer_refused;
  return TlsFailure::protocol;
}

}  // namespace gpustream::transport
