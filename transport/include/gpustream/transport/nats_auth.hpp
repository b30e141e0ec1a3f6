// gpustream/transport/nats_auth.hpp — how an agent (NatsBridgeOptions::auth) and the fleet view
// (FleetOptions::auth) prove who they are to a nats-server and check its TLS certificate.
//
//   gpustream::transport::NatsAuth a;
//   a.user = "node1";
//   a.password = secret;            // the secret itself: the caller read it from a file
//   a.ca_file = "/etc/gpustream/nats-ca.pem";
//
// At most one identity: a .creds file, an nkey seed, a user with its password, or a token (a
// URL's own user:password@ still works when none is set). TLS is on when a CA or a client
// certificate is given (the URL's tls:// turns it on too). The files (creds, nkey seed, CA,
// certificate, key) are read by libnats when it connects; the password and the token are held
// here, never logged. docs/fleet.md "Credentials".
//
// `inbox_prefix` replaces libnats's `_INBOX` as the first token(s) of the reply subjects (its
// JetStream requests' replies), so that a user's permission can be `subscribe
// _INBOX_gpustream.<node>.>` rather than `_INBOX.>` (which reads every other client's replies:
// docs/security.md "NATS permissions"). Empty: the caller's default (an agent's
// `_INBOX_gpustream.<node>`, NatsBridge; the fleet view's own).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace gpustream::transport {

/// The first token of gpustream's default reply subjects: an agent's inbox prefix is
/// "_INBOX_gpustream.<node>", the fleet view's "_INBOX_gpustream.fleet".
inline constexpr std::string_view kDefaultInboxRoot = "_INBOX_gpustream";

struct NatsAuth {
  std::string creds_file;      // a .creds file: the user's JWT and its nkey seed
  std::string nkey_seed_file;  // an nkey user's seed (SU...), read by libnats to sign
  std::string nkey_public;     // ... and its public key (U...), which names the user
  std::string user;            // with `password`
  std::string password;        // the secret itself, never a path
  std::string token;           // the secret itself, never a path
  std::string ca_file;         // PEM certificate(s) the server's certificate must chain to
  std::string cert_file;       // this client's certificate chain (PEM), with key_file
  std::string key_file;        // its private key (PEM)
  std::string inbox_prefix;    // reply subjects' prefix, e.g. _INBOX_gpustream.node1; see above

  bool tls() const { return !ca_file.empty() || !cert_file.empty(); }
  bool operator==(const NatsAuth&) const = default;
};

/// What set_auth() (NatsBridge's, FleetView's: a SIGHUP reload) did with new credentials.
enum class NatsAuthChange : std::uint8_t {
  unchanged,     // the same as the ones in use (or already on their way): nothing to do
  reconnecting,  // taken: a connection with them replaces the current one once it connects
  refused,       // inconsistent (nats_auth_error), or not running (the view): nothing changed
};

/// What is inconsistent in `a` (two identities; a user without a password or the reverse; a
/// certificate without its key or the reverse; a seed file without its
/// public key), in words naming the fields; empty when fine.
std::string nats_auth_error(const NatsAuth& a);

/// Why `prefix` cannot be an inbox prefix, in words; empty when it can. A prefix is at most
/// kMaxInboxPrefixBytes of dot-separated tokens, each non-empty and made of printable ASCII
/// other than the wildcards '*' and '>' (libnats appends ".<unique id>" to it).
std::string nats_inbox_prefix_error(std::string_view prefix);
inline constexpr std::size_t kMaxInboxPrefixBytes = 128;

}  // namespace gpustream::transport
