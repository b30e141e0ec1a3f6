// NatsAuth applied to libnats options: the one place both the bridge and the fleet view use.
#pragma once

#include <string>

#include <nats/nats.h>

#include "gpustream/transport/nats_auth.hpp"

namespace gpustream::transport {

/// Sets `a` on `opts` (user, token, nkey, .creds, inbox prefix, CA, client certificate, TLS).
/// NATS_OK, or the failing status with `error` saying which setting and why (libnats's own words,
/// e.g. a CA file it cannot parse) — never a secret.
natsStatus apply_nats_auth(natsOptions* opts, const NatsAuth& a, std::string& error);

/// libnats's words for a failed call: the status text and, when it says more, the thread's last
/// error ("Authorization Violation", "unable to get local issuer certificate").
std::string nats_status_text(natsStatus s);

}  // namespace gpustream::transport
