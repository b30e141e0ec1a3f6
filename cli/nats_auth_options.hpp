// The NATS credential and TLS flags shared by `serve --nats` (an agent) and `fleet`: one table of
// rows (flag, config key, help), and the transport::NatsAuth they make (docs/fleet.md,
// "Credentials"). Every secret is in a file; the flags name files, never a secret.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "gpustream/transport/nats_auth.hpp"
#include "reload.hpp"
#include "server_options.hpp"

namespace gpustream::cli {

struct NatsAuthFlags {
  std::string creds;          // --nats-creds FILE
  std::string nkey;           // --nats-nkey FILE
  std::string user;           // --nats-user NAME
  std::string password_file;  // --nats-password-file FILE
  std::string token_file;     // --nats-token-file FILE
  std::string ca;             // --nats-ca FILE
  std::string cert;           // --nats-cert FILE
  std::string key;            // --nats-key FILE
  std::string inbox_prefix;   // --nats-inbox-prefix PREFIX (empty: the command's default)
};

/// The rows, in the order of the help text; their config keys are the flags' names with '_'
/// (nats_creds, nats_password_file ...), in the "serve" and the "fleet" sections alike.
const std::vector<FlagRow<NatsAuthFlags>>& nats_auth_flag_table();

/// The credentials those flags name: the password and the token read from their files (at most
/// 4096 bytes, surrounding whitespace and the trailing newline stripped, token_file.hpp), the
/// nkey's public key read from its seed file, and every other file checked readable now. Throws
/// ConfigError (a usage error) naming the flag and the file, never a file's content.
transport::NatsAuth make_nats_auth(const NatsAuthFlags& f);

/// Gives new credentials to the running agent or view: NatsBridge::set_auth, FleetView::set_auth
/// (connect with them, swap once connected), which say what they did (and why when refused).
using NatsAuthSetter =
    std::function<transport::NatsAuthChange(const transport::NatsAuth&, std::string* error)>;

/// SIGHUP's reloader of the NATS credentials (reload.hpp): reads the files `flags` name again
/// (the paths of the start: a changed path takes effect after a restart); contents equal to the
/// ones in use change nothing; new ones go to `apply`, whose answer the step says (refused:
/// failed, with the reason). A file that cannot be read, or refused credentials, keep the
/// credentials in use.
Reloader nats_auth_reloader(NatsAuthFlags flags, transport::NatsAuth in_use, NatsAuthSetter apply);

}  // namespace gpustream::cli
