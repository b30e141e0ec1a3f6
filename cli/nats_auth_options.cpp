// The NATS credential flags (nats_auth_options.hpp).
#include "nats_auth_options.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <string_view>
#include <utility>

#include "gpustream/config.hpp"
#include "gpustream/terminal_text.hpp"
#include "token_file.hpp"

namespace gpustream::cli {

namespace {

constexpr std::size_t kMaxSeedFileBytes = 4096;

/// Opens and closes `path` for reading, so that a missing or unreadable file is a usage error at
/// start rather than a connect failure that libnats retries forever.
void check_readable(std::string_view flag, const std::string& path) {
  int fd;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0)
    throw ConfigError(std::string(flag) + ": cannot read '" + path +
                      "': " + std::generic_category().message(errno));
  ::close(fd);
}

/// A file's secret through read_token_file, its errors prefixed with the flag.
std::string read_secret(std::string_view flag, const std::string& path) {
  try {
    return read_token_file(path);
  } catch (const ConfigError& e) {
    // "the token file 'F'" is the token's words: here it is the flag's file.
    std::string what = e.what();
    const std::string_view theirs = "the token file ";
    if (const auto at = what.find(theirs); at != std::string::npos) what.erase(at, theirs.size());
    throw ConfigError(std::string(flag) + ": " + what);
  }
}

/// The public key (U..., 56 characters) in an nkey seed file as `nk -gen user -pubout` writes it
/// (the seed's line, then the public key's). The seed itself stays in the file: libnats reads it
/// when it signs the server's challenge.
std::string nkey_public_key(const std::string& path) {
  check_readable("--nats-nkey", path);
  std::string content;
  {
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) throw ConfigError("--nats-nkey: cannot read '" + path + "'");
    content.resize(kMaxSeedFileBytes + 1);
    std::size_t got = 0;
    while (got < content.size()) {
      const ssize_t n = ::read(fd, content.data() + got, content.size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += static_cast<std::size_t>(n);
    }
    ::close(fd);
    content.resize(got);
  }
  if (content.size() > kMaxSeedFileBytes)
    throw ConfigError("--nats-nkey: '" + path + "' is larger than 4096 bytes");
  bool seed = false;
  std::string public_key;
  std::string_view rest = content;
  while (!rest.empty()) {
    const auto nl = rest.find('\n');
    std::string_view line = rest.substr(0, nl);
    rest.remove_prefix(nl == std::string_view::npos ? rest.size() : nl + 1);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
    if (line.size() == 58 && line.substr(0, 2) == "SU") seed = true;
    if (line.size() == 56 && line[0] == 'U') public_key = std::string(line);
  }
  if (!seed)
    throw ConfigError("--nats-nkey: '" + path + "' holds no user nkey seed (a line SU...)");
  if (public_key.empty())
    throw ConfigError("--nats-nkey: '" + path +
                      "' holds no public key (a line U...: nk -gen user -pubout writes both)");
  return public_key;
}

}  // namespace

const std::vector<FlagRow<NatsAuthFlags>>& nats_auth_flag_table() {
  // One row per flag; serve and fleet both register them (docs/fleet.md "Credentials").
  static const std::vector<FlagRow<NatsAuthFlags>> rows = {
      {"--nats-creds", "nats_creds",
       "NATS: a .creds FILE (the user's JWT and nkey seed), for an operator-mode server",
       &NatsAuthFlags::creds, std::nullopt},
      {"--nats-nkey", "nats_nkey",
       "NATS: an nkey user's FILE holding its seed (SU...) and public key (U...), as "
       "nk -gen user -pubout writes them",
       &NatsAuthFlags::nkey, std::nullopt},
      {"--nats-user", "nats_user", "NATS: the user NAME, with --nats-password-file",
       &NatsAuthFlags::user, std::nullopt},
      {"--nats-password-file", "nats_password_file",
       "NATS: the FILE holding the user's password (read at start; never on the command line)",
       &NatsAuthFlags::password_file, std::nullopt},
      {"--nats-token-file", "nats_token_file",
       "NATS: the FILE holding the server's authorization token (read at start)",
       &NatsAuthFlags::token_file, std::nullopt},
      {"--nats-ca", "nats_ca",
       "NATS: the PEM FILE of the CA(s) the server's certificate must chain to (turns TLS on)",
       &NatsAuthFlags::ca, std::nullopt},
      {"--nats-cert", "nats_cert",
       "NATS: this client's certificate chain (PEM FILE) for mutual TLS, with --nats-key",
       &NatsAuthFlags::cert, std::nullopt},
      {"--nats-key", "nats_key", "NATS: the private key (PEM FILE) of --nats-cert",
       &NatsAuthFlags::key, std::nullopt},
      {"--nats-inbox-prefix", "nats_inbox_prefix",
       "NATS: the PREFIX of this client's reply subjects, so that its permission is "
       "`subscribe PREFIX.>` rather than `_INBOX.>` (default _INBOX_gpustream.<node> for an "
       "agent, _INBOX_gpustream.fleet for the fleet view)",
       &NatsAuthFlags::inbox_prefix, std::nullopt},
  };
  return rows;
}

transport::NatsAuth make_nats_auth(const NatsAuthFlags& f) {
  if (!f.user.empty() && f.password_file.empty())
    throw ConfigError("--nats-user needs --nats-password-file");
  if (f.user.empty() && !f.password_file.empty())
    throw ConfigError("--nats-password-file needs --nats-user");
  if (f.cert.empty() != f.key.empty())
    throw ConfigError(f.cert.empty() ? "--nats-key needs --nats-cert"
                                     : "--nats-cert needs --nats-key");
  transport::NatsAuth a;
  a.user = f.user;
  if (!f.password_file.empty()) a.password = read_secret("--nats-password-file", f.password_file);
  if (!f.token_file.empty()) a.token = read_secret("--nats-token-file", f.token_file);
  if (!f.creds.empty()) check_readable("--nats-creds", f.creds);
  a.creds_file = f.creds;
  if (!f.nkey.empty()) a.nkey_public = nkey_public_key(f.nkey);
  a.nkey_seed_file = f.nkey;
  if (!f.ca.empty()) check_readable("--nats-ca", f.ca);
  a.ca_file = f.ca;
  if (!f.cert.empty()) check_readable("--nats-cert", f.cert);
  if (!f.key.empty()) check_readable("--nats-key", f.key);
  a.cert_file = f.cert;
  a.key_file = f.key;
  if (!f.inbox_prefix.empty())
    if (auto err = transport::nats_inbox_prefix_error(f.inbox_prefix); !err.empty())
      throw ConfigError("--nats-inbox-prefix: " + err);
  a.inbox_prefix = f.inbox_prefix;
  if (const auto err = transport::nats_auth_error(a); !err.empty())
    throw ConfigError("--nats-creds, --nats-nkey, --nats-user, --nats-token-file: " + err);
  return a;
}

Reloader nats_auth_reloader(NatsAuthFlags flags, transport::NatsAuth in_use, NatsAuthSetter apply) {
  auto last = std::make_shared<transport::NatsAuth>(std::move(in_use));
  return [flags = std::move(flags), last, apply = std::move(apply)](const ReloadInput&) {
    transport::NatsAuth next;
    try {
      next = make_nats_auth(flags);
    } catch (const std::exception& e) {
      return ReloadStep::failed(std::string("cannot read the NATS credentials: ") + e.what() +
                                "; the ones in use stay");
    }
    if (next == *last) return ReloadStep::unchanged();
    std::string error;
    switch (apply(next, &error)) {
      case transport::NatsAuthChange::refused:
        return ReloadStep::failed("the new NATS credentials are refused: " + terminal_safe(error) +
                                  "; the ones in use stay");
      case transport::NatsAuthChange::unchanged:
        *last = std::move(next);
        return ReloadStep::unchanged();
      case transport::NatsAuthChange::reconnecting:
        break;
    }
    *last = std::move(next);
    return ReloadStep::changed(
        "NATS credentials read again; the connection is replaced once they connect");
  };
}

}  // namespace gpustream::cli
