// The OTLP push flags of `gpustream serve` and `gpustream fleet` (docs/cli.md, "OTLP"): --otlp,
// --otlp-header, --otlp-interval, --otlp-timeout, --otlp-compression, --otlp-queue-bytes,
// --otlp-ca, --otlp-cert, --otlp-key and their config keys; made into transport::OtlpOptions by
// make_otlp_options.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "gpustream/transport/otlp.hpp"
#include "server_options.hpp"

namespace gpustream::cli {

struct OtlpFlags {
  std::string url;                   // --otlp URL; empty: no push
  std::vector<std::string> headers;  // --otlp-header 'Name: value' (repeatable)
  double interval_seconds = 10;
  double timeout_seconds = 10;
  std::string compression = "gzip";  // gzip | none
  std::size_t queue_bytes = std::size_t{16} << 20;
  std::string ca;    // --otlp-ca FILE (https://; empty: the system's CAs)
  std::string cert;  // --otlp-cert FILE (mutual TLS, with --otlp-key)
  std::string key;   // --otlp-key FILE
};

const std::vector<FlagRow<OtlpFlags>>& otlp_flag_table();

/// The exporter's options from the flags, or nullopt without --otlp. `host_name`: the resource's
/// host.name (and service.instance.id with the process id). Throws ConfigError (a bad URL, a
/// bad header, a bad compression, a TLS file that cannot be used) — the message never holds a
/// header's value.
std::optional<transport::OtlpOptions> make_otlp_options(const OtlpFlags& flags,
                                                        const std::string& host_name);

/// The machine's host name as the system says it (the OTLP resource's host.name); "unknown".
std::string this_host_name();

/// What the exporter says at start: the URL (credentials redacted), the interval and the header
/// names, never their values.
std::string otlp_start_line(const transport::OtlpOptions& options);

}  // namespace gpustream::cli
