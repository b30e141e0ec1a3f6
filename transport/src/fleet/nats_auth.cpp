// NatsAuth: its consistency check (always built) and, with libnats, its application to the
// connection options of the bridge and the fleet view.
#include "gpustream/transport/nats_auth.hpp"

#include <string>

#if defined(GPUSTREAM_HAS_NATS)
#include "fleet/nats_auth_apply.hpp"
#endif

namespace gpustream::transport {

std::string nats_auth_error(const NatsAuth& a) {
  const int identities = int{!a.creds_file.empty()} + int{!a.nkey_seed_file.empty()} +
                         int{!a.user.empty() || !a.password.empty()} + int{!a.token.empty()};
  if (identities > 1)
    return "give one NATS identity: a .creds file, an nkey seed, a user with a password, or a "
           "token";
  if (a.user.empty() != a.password.empty())
    return a.user.empty() ? "a NATS password needs its user" : "a NATS user needs its password";
  if (a.cert_file.empty() != a.key_file.empty())
    return a.cert_file.empty() ? "a NATS client key needs its certificate"
                               : "a NATS client certificate needs its key";
  if (!a.nkey_seed_file.empty() && a.nkey_public.empty())
    return "an nkey seed needs its public key";
  if (!a.inbox_prefix.empty())
    if (auto err = nats_inbox_prefix_error(a.inbox_prefix); !err.empty()) return err;
  return {};
}

std::string nats_inbox_prefix_error(std::string_view prefix) {
  if (prefix.empty()) return "the NATS inbox prefix is empty";
  if (prefix.size() > kMaxInboxPrefixBytes)
    return "the NATS inbox prefix is longer than " + std::to_string(kMaxInboxPrefixBytes) +
           " bytes";
  std::size_t token = 0;  // bytes of the current token
  for (const char c : prefix) {
    if (c == '.') {
      if (token == 0) break;
      token = 0;
      continue;
    }
    if (c == '*' || c == '>')
      return "the NATS inbox prefix holds a wildcard ('*' or '>'): it must be a plain subject";
    if (c <= ' ' || c > '~')
      return "the NATS inbox prefix holds a space or a character outside printable ASCII";
    ++token;
  }
  if (token == 0)
    return "the NATS inbox prefix has an empty token (two dots, or a dot at either end)";
  return {};
}

#if defined(GPUSTREAM_HAS_NATS)

std::string nats_status_text(natsStatus s) {
  const char* text = nats_GetLastError(nullptr);
  std::string out = natsStatus_GetText(s);
  if (text && *text && out != text) out += std::string(": ") + text;
  return out;
}

natsStatus apply_nats_auth(natsOptions* opts, const NatsAuth& a, std::string& error) {
  natsStatus s = NATS_OK;
  const char* what = "";
  if (!a.user.empty()) {
    what = "the user and password";
    s = natsOptions_SetUserInfo(opts, a.user.c_str(), a.password.c_str());
  }
  if (s == NATS_OK && !a.token.empty()) {
    what = "the token";
    s = natsOptions_SetToken(opts, a.token.c_str());
  }
  if (s == NATS_OK && !a.nkey_seed_file.empty()) {
    what = "the nkey";
    s = natsOptions_SetNKeyFromSeed(opts, a.nkey_public.c_str(), a.nkey_seed_file.c_str());
  }
  if (s == NATS_OK && !a.creds_file.empty()) {
    what = "the .creds file";
    s = natsOptions_SetUserCredentialsFromFiles(opts, a.creds_file.c_str(), nullptr);
  }
  if (s == NATS_OK && !a.inbox_prefix.empty()) {
    what = "the inbox prefix";
    s = natsOptions_SetCustomInboxPrefix(opts, a.inbox_prefix.c_str());
  }
  if (s == NATS_OK && a.tls()) {
    what = "TLS";
    s = natsOptions_SetSecure(opts, true);
  }
  if (s == NATS_OK && !a.ca_file.empty()) {
    what = "the CA file";
    s = natsOptions_LoadCATrustedCertificates(opts, a.ca_file.c_str());
  }
  if (s == NATS_OK && !a.cert_file.empty()) {
    what = "the client certificate and key";
    s = natsOptions_LoadCertificatesChain(opts, a.cert_file.c_str(), a.key_file.c_str());
  }
  if (s != NATS_OK) {
    // libnats names the file, never the password or the token (those calls only copy strings).
    error = std::string(what) + ": " + nats_status_text(s);
    if (s == NATS_ILLEGAL_STATE && a.tls()) error += " (this libnats has no TLS)";
  }
  return s;
}

#endif

}  // namespace gpustream::transport
