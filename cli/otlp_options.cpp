// The OTLP flag table and the exporter options it makes.
#include "otlp_options.hpp"

#include <array>
#include <charconv>
#include <stdexcept>

#include <unistd.h>

#include "gpustream/transport/address.hpp"

namespace gpustream::cli {

const std::vector<FlagRow<OtlpFlags>>& otlp_flag_table() {
  static const std::vector<FlagRow<OtlpFlags>> rows = {
      {"--otlp", "otlp",
       "Also push metrics to an OTLP/HTTP receiver as JSON, e.g. "
       "http://127.0.0.1:4318/v1/metrics (an OpenTelemetry collector), or https://... "
       "(docs/operations.md, \"OTLP\")",
       &OtlpFlags::url, std::nullopt},
      {"--otlp-header", "otlp_headers",
       "A header sent with every OTLP request, 'Name: value' (repeatable; e.g. an "
       "Authorization; its value is never logged)",
       &OtlpFlags::headers, std::nullopt},
      {"--otlp-interval", "otlp_interval_seconds", "Seconds between OTLP exports (default 10)",
       &OtlpFlags::interval_seconds, CLI::Range(0.1, 86400.0)},
      {"--otlp-timeout", "otlp_timeout_seconds",
       "Seconds an OTLP request may take (connect, send, answer) before it is retried "
       "(default 10)",
       &OtlpFlags::timeout_seconds, CLI::Range(0.05, 3600.0)},
      {"--otlp-compression", "otlp_compression", "gzip (default: Content-Encoding: gzip) or none",
       &OtlpFlags::compression, std::nullopt},
      {"--otlp-queue-bytes", "otlp_queue_bytes",
       "Bytes of OTLP exports held while the receiver is away (compressed; the oldest dropped "
       "first, counted; default 16777216)",
       &OtlpFlags::queue_bytes, CLI::Range(std::size_t{1024}, std::size_t{1} << 32)},
      {"--otlp-ca", "otlp_ca",
       "https:// --otlp: the PEM FILE of the CA(s) the receiver's certificate must chain to "
       "(default: the system's trusted CAs)",
       &OtlpFlags::ca, std::nullopt},
      {"--otlp-cert", "otlp_cert",
       "https:// --otlp: this client's certificate chain (PEM FILE) for a receiver that asks for "
       "one (mutual TLS), with --otlp-key",
       &OtlpFlags::cert, std::nullopt},
      {"--otlp-key", "otlp_key", "https:// --otlp: the private key (PEM FILE) of --otlp-cert",
       &OtlpFlags::key, std::nullopt},
  };
  return rows;
}

std::optional<transport::OtlpOptions> make_otlp_options(const OtlpFlags& f,
                                                        const std::string& host_name) {
  if (f.url.empty()) return std::nullopt;
  transport::OtlpOptions o;
  o.url = f.url;
  try {
    (void)transport::parse_otlp_url(f.url);
    for (const auto& h : f.headers) o.headers.push_back(transport::parse_otlp_header(h));
  } catch (const std::invalid_argument& e) {
    throw ConfigError(e.what());
  }
  if (f.compression != "gzip" && f.compression != "none")
    throw ConfigError("--otlp-compression: expected gzip or none, got '" + f.compression + "'");
  o.gzip = f.compression == "gzip";
  o.interval = millis_of_seconds(f.interval_seconds);
  o.timeout = millis_of_seconds(f.timeout_seconds);
  o.queue_bytes = f.queue_bytes;
  o.tls_ca_file = f.ca;
  o.tls_cert_file = f.cert;
  o.tls_key_file = f.key;
  try {
    transport::check_otlp_tls(o);
  } catch (const std::invalid_argument& e) {
    throw ConfigError(e.what());
  }
  o.resource.host_name = host_name;
  o.resource.instance_id = host_name + ":" + std::to_string(::getpid());
  return o;
}

std::string this_host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "unknown";
  return name;
}

std::string otlp_start_line(const transport::OtlpOptions& o) {
  std::array<char, 32> seconds{};
  const auto r = std::to_chars(seconds.data(), seconds.data() + seconds.size(),
                               static_cast<double>(o.interval.count()) / 1000.0);
  std::string line = "pushing OTLP metrics to " + transport::redact_url_credentials(o.url) +
                     " every " + std::string(seconds.data(), r.ptr) + " s" +
                     (o.gzip ? " (gzip)" : "");
  if (!o.tls_ca_file.empty()) line += ", verified against " + o.tls_ca_file;
  if (!o.tls_cert_file.empty()) line += ", as " + o.tls_cert_file;
  if (!o.headers.empty()) {
    line += " with header(s)";
    for (const auto& [name, value] : o.headers) line += " " + name;
    line += " (values not shown)";
  }
  return line;
}

}  // namespace gpustream::cli
