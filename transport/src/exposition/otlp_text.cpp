// The OTLP exporter's words: its URL and headers checked (--otlp, --otlp-header), and its
// counters as /metrics families and /api/v1/stats members.
#include <array>
#include <charconv>
#include <stdexcept>
#include <string>

#include "gpustream/transport/address.hpp"
#include "gpustream/transport/otlp.hpp"

namespace gpustream::transport {

namespace {

bool token_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

/// Nanoseconds as seconds in the shortest exact decimal form (std::to_string keeps 6 decimals).
std::string seconds_text(std::uint64_t ns) {
  std::array<char, 32> buf{};
  const auto r = std::to_chars(buf.data(), buf.data() + buf.size(), static_cast<double>(ns) / 1e9);
  return {buf.data(), r.ptr};
}

}  // namespace

OtlpTarget parse_otlp_url(std::string_view url) {
  const auto shown = redact_url_credentials(url);
  const bool tls = url.starts_with("https://");
  if (!tls && !url.starts_with("http://"))
    throw std::invalid_argument("--otlp: expected http://HOST[:PORT]/PATH or https://..., got '" +
                                shown + "'");
  auto rest = url.substr(tls ? 8 : 7);
  const auto slash = rest.find('/');
  auto authority = rest.substr(0, slash);
  OtlpTarget t;
  t.tls = tls;
  t.path = slash == std::string_view::npos ? "/v1/metrics" : std::string(rest.substr(slash));
  if (authority.find('@') != std::string_view::npos)
    throw std::invalid_argument(
        "--otlp: credentials in the URL are not sent; use --otlp-header 'Authorization: ...' "
        "(got '" +
        shown + "')");
  std::string_view port = tls ? "443" : "80";
  if (authority.starts_with("[")) {  // [v6]:port
    const auto close = authority.find(']');
    if (close == std::string_view::npos) throw std::invalid_argument("--otlp: bad IPv6 host");
    t.host = std::string(authority.substr(1, close - 1));
    if (close + 1 < authority.size()) {
      if (authority[close + 1] != ':') throw std::invalid_argument("--otlp: bad port");
      port = authority.substr(close + 2);
    }
  } else {
    const auto colon = authority.rfind(':');
    t.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port = authority.substr(colon + 1);
  }
  if (t.host.empty()) throw std::invalid_argument("--otlp: no host in '" + shown + "'");
  if (port.empty() || port.size() > 5 ||
      port.find_first_not_of("0123456789") != std::string_view::npos)
    throw std::invalid_argument("--otlp: bad port in '" + shown + "'");
  for (const char c : t.path)
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f)
      throw std::invalid_argument("--otlp: bad path in '" + shown + "'");
  t.port = std::string(port);
  return t;
}

std::pair<std::string, std::string> parse_otlp_header(std::string_view text) {
  const auto colon = text.find(':');
  if (colon == std::string_view::npos || colon == 0)
    throw std::invalid_argument("--otlp-header: expected 'Name: value'");
  const auto name = text.substr(0, colon);
  for (const char c : name)
    if (!token_char(c))
      throw std::invalid_argument("--otlp-header: the name '" + std::string(name) +
                                  "' is not an HTTP field name");
  auto value = text.substr(colon + 1);
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
  for (const char c : value)
    if ((static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7f)
      throw std::invalid_argument("--otlp-header " + std::string(name) +
                                  ": a control character in the value");
  const auto n = lower(name);
  for (const std::string_view own : {"host", "content-length", "content-type", "content-encoding",
                                     "transfer-encoding", "connection"})
    if (n == own)
      throw std::invalid_argument("--otlp-header: " + std::string(name) +
                                  " is set by the exporter itself");
  return {std::string(name), std::string(value)};
}

std::string otlp_metrics(const OtlpStats& s) {
  std::string out =
      "# HELP gpustream_otlp_exports_total OTLP exports by result: ok (delivered), retried (an "
      "attempt failed and is retried), rejected (an answer that is not retried: dropped), "
      "dropped (the queue was full).\n"
      "# TYPE gpustream_otlp_exports_total counter\n";
  for (const auto& [result, v] : {std::pair<const char*, std::uint64_t>{"ok", s.exports_ok},
                                  {"retried", s.exports_retried},
                                  {"rejected", s.exports_rejected},
                                  {"dropped", s.exports_dropped}})
    out += std::string("gpustream_otlp_exports_total{result=\"") + result + "\"} " +
           std::to_string(v) + "\n";
  const auto one = [&](const char* name, const char* type, const char* help,
                       const std::string& value) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" +
           name + " " + value + "\n";
  };
  one("gpustream_otlp_dropped_bytes_total", "counter",
      "Bytes of the OTLP exports dropped from a full queue.", std::to_string(s.dropped_bytes));
  one("gpustream_otlp_queue_bytes", "gauge",
      "Bytes of the OTLP exports waiting or in flight (compressed).",
      std::to_string(s.queue_bytes));
  one("gpustream_otlp_queue_exports", "gauge", "OTLP exports waiting or in flight.",
      std::to_string(s.queue_exports));
  one("gpustream_otlp_queue_bytes_limit", "gauge",
      "The OTLP queue's bound in bytes (--otlp-queue-bytes).", std::to_string(s.queue_bytes_limit));
  one("gpustream_otlp_encode_seconds_total", "counter",
      "Time spent encoding and compressing OTLP exports.", seconds_text(s.encode_ns));
  return out;
}

std::string otlp_stats_json(const OtlpStats& s) {
  return "\"exports_ok\":" + std::to_string(s.exports_ok) +
         ",\"exports_retried\":" + std::to_string(s.exports_retried) +
         ",\"exports_rejected\":" + std::to_string(s.exports_rejected) +
         ",\"exports_dropped\":" + std::to_string(s.exports_dropped) +
         ",\"dropped_bytes\":" + std::to_string(s.dropped_bytes) +
         ",\"encoded\":" + std::to_string(s.encoded) +
         ",\"encode_ns\":" + std::to_string(s.encode_ns) +
         ",\"queue_bytes\":" + std::to_string(s.queue_bytes) +
         ",\"queue_exports\":" + std::to_string(s.queue_exports) +
         ",\"queue_bytes_limit\":" + std::to_string(s.queue_bytes_limit);
}

}  // namespace gpustream::transport
