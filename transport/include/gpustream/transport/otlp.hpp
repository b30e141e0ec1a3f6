// gpustream/transport/otlp.hpp — OTLP/HTTP JSON push of the latest snapshots (docs/operations.md,
// "OTLP"): every interval, the channel's latest snapshots as one ExportMetricsServiceRequest in
// the protobuf JSON mapping of the OTLP specification, POSTed to an OTLP/HTTP receiver
// (`/v1/metrics` of an OpenTelemetry collector), gzip-compressed by default.
//
// Names follow the OpenTelemetry hardware semantic conventions (kOtlpSchemaUrl) where they
// exist (hw.gpu.utilization, hw.gpu.memory.usage, hw.gpu.memory.limit, hw.power, hw.energy,
// hw.temperature, with hw.id, hw.name, hw.vendor and hw.type=gpu); every other device metric is
// gpustream.gpu.<name> with its unit. An absent metric is not sent (never 0).
//
// Delivery: a queue of encoded exports bounded in bytes and in exports (the oldest dropped
// first, counted); one request in flight, with a timeout; retried with exponential backoff and
// jitter after a connection failure, a timeout, 429, 502, 503 or 504 (Retry-After honoured);
// dropped without retry on any other answer (counted, logged once per status).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/asio/any_io_executor.hpp>

#include "gpustream/channel.hpp"

namespace gpustream::transport {

/// The semantic conventions the names, units and attributes follow.
inline constexpr std::string_view kOtlpSchemaUrl = "https://opentelemetry.io/schemas/1.37.0";

/// Who is sending: the resource attributes host.name (a fleet's snapshot: its node instead),
/// service.name=gpustream, service.instance.id, service.version.
struct OtlpResource {
  std::string host_name;
  std::string instance_id;
  std::string service_version = "0.1.0";
};

/// What an encoder remembers between exports: the start time of each cumulative sum (hw.energy,
/// the ECC counters), reset when the value goes down, and the last sequence sent of each
/// (node, probe) so a snapshot is sent once. Bounded by the series of the latest snapshots (a
/// series no longer there is forgotten). Not thread-safe: one per exporter.
class OtlpEncoderState {
 public:
  struct Sum {
    double last = 0;
    std::int64_t start_unix_ns = 0;
    std::int64_t last_unix_ns = 0;
  };
  std::map<std::string, Sum, std::less<>> sums;
  std::map<std::string, std::uint64_t, std::less<>> sent;
};

/// The ExportMetricsServiceRequest JSON of the snapshots of `latest` not sent yet (per
/// `state`), or an empty string when there is no data point to send. Data points carry their
/// snapshot's time. O(devices x metrics) with one allocation per point's attributes.
std::string encode_otlp_metrics(const std::vector<SnapshotPtr>& latest,
                                const OtlpResource& resource, OtlpEncoderState& state);

/// OTLP/HTTP export settings (the flags --otlp, --otlp-header, --otlp-interval, ...).
struct OtlpOptions {
  std::string url;  // http://HOST[:PORT]/PATH or https://HOST[:PORT]/PATH
  std::vector<std::pair<std::string, std::string>> headers;  // e.g. {"Authorization", "..."}
  // https:// only: the receiver's certificate is verified against tls_ca_file (empty: the
  // system's trusted CAs) and must name the URL's host; tls_cert_file + tls_key_file: a client
  // certificate presented to a receiver that asks for one (mutual TLS).
  std::string tls_ca_file;
  std::string tls_cert_file;
  std::string tls_key_file;
  std::chrono::milliseconds interval{10'000};
  std::chrono::milliseconds timeout{10'000};  // per request: resolve, connect, write, read
  bool gzip = true;
  std::size_t queue_bytes = std::size_t{16} << 20;  // encoded (compressed) exports held
  std::size_t queue_exports = 64;
  std::chrono::milliseconds backoff_initial{1'000};
  std::chrono::milliseconds backoff_max{60'000};
  std::chrono::milliseconds retry_after_max{300'000};  // a longer Retry-After is cut to this
  OtlpResource resource;
};

/// The URL's parts, or std::invalid_argument saying what is wrong.
struct OtlpTarget {
  std::string host;
  std::string port;  // 80 for http://, 443 for https:// when the URL gives none
  std::string path;
  bool tls = false;  // https://
};
OtlpTarget parse_otlp_url(std::string_view url);
/// Checks an https:// URL's TLS files as the exporter will load them (readable, PEM, a key that
/// belongs to its certificate), or std::invalid_argument saying which and why. TLS files with an
/// http:// URL are refused too (they would be silently unused). Nothing to check: returns.
void check_otlp_tls(const OtlpOptions& options);
/// A header given as "Name: value" (--otlp-header), or std::invalid_argument (no colon, a name
/// that is not an HTTP token, a control character, a header the exporter sets itself).
std::pair<std::string, std::string> parse_otlp_header(std::string_view text);

/// What the exporter did (OtlpExporter::stats()).
struct OtlpStats {
  std::uint64_t exports_ok = 0;        // delivered (2xx)
  std::uint64_t exports_retried = 0;   // attempts that failed and were retried
  std::uint64_t exports_rejected = 0;  // answered with a status that is not retried: dropped
  std::uint64_t exports_dropped = 0;   // dropped from a full queue (the oldest first)
  std::uint64_t dropped_bytes = 0;
  std::uint64_t encoded = 0;            // exports encoded
  std::uint64_t encode_ns = 0;          // CPU spent encoding and compressing them, wall ns
  std::uint64_t queue_bytes = 0;        // now
  std::uint64_t queue_exports = 0;      // now
  std::uint64_t queue_bytes_limit = 0;  // the bound
};

/// Pushes the channel's latest snapshots to an OTLP/HTTP receiver every interval, on `ex` (the
/// server's io_context: encoding runs there, everything else is asynchronous; nothing blocks).
///
/// Thread safety: stats() from any thread; start() and stop() from any thread (they post to the
/// exporter's strand). Cancellation: stop() cancels the timers and the request in flight; the
/// queue is dropped. The destructor stops.
class OtlpExporter {
 public:
  /// Throws std::invalid_argument for a bad URL (parse_otlp_url), std::runtime_error for a TLS
  /// file that cannot be used (unreadable, not PEM, a key that is not the certificate's).
  OtlpExporter(const boost::asio::any_io_executor& ex, const SnapshotChannel& channel,
               OtlpOptions options);
  ~OtlpExporter();
  OtlpExporter(const OtlpExporter&) = delete;
  OtlpExporter& operator=(const OtlpExporter&) = delete;

  /// The first export one interval from now.
  void start();
  void stop();
  /// Encodes and queues one export now (as a tick does), then sends.
  void export_now();
  OtlpStats stats() const;
  const OtlpOptions& options() const noexcept;

  class Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

/// The exporter's /metrics families: gpustream_otlp_exports_total{result="ok|retried|rejected|
/// dropped"}, gpustream_otlp_dropped_bytes_total, gpustream_otlp_queue_bytes,
/// gpustream_otlp_queue_exports, gpustream_otlp_queue_bytes_limit,
/// gpustream_otlp_encode_seconds_total.
std::string otlp_metrics(const OtlpStats& s);
/// The same as members of a JSON object (for /api/v1/stats: "otlp":{...}).
std::string otlp_stats_json(const OtlpStats& s);

}  // namespace gpustream::transport
