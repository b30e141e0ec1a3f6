// The HTTP endpoints: /, /ws (upgrade checks), /metrics, /api/v1/* (fit included), /healthz.
#include <algorithm>
#include <limits>
#include <optional>

#include <boost/beast/http/field.hpp>
#include <boost/beast/websocket/rfc6455.hpp>
#include <boost/json.hpp>

#include "exposition/prometheus_dcgm.hpp"
#include "gpustream/json.hpp"
#include "gpustream/transport/dashboard.hpp"
#include "gpustream/transport/prometheus.hpp"
#include "gpustream/transport/prometheus_events.hpp"
#include "gpustream/transport/protocol_event.hpp"
#include "server/http_session.hpp"
#include "wire/gzip.hpp"
#include "wire/request_target.hpp"

namespace gpustream::transport {
namespace beast = boost::beast;
namespace http = beast::http;
namespace json = boost::json;

namespace {

constexpr std::string_view kJson = "application/json";

std::string_view sv(beast::string_view s) { return {s.data(), s.size()}; }

/// The GPUs readable now: the devices of the latest snapshots with at least one value (a stale
/// node's copy has none), leaving out the snapshots of a probe whose stats say it is not
/// sampling (unavailable, backing off, stopped: its last snapshot is no longer read).
/// O(snapshots x (probes + devices x metrics)), no allocation beyond the stats' copy.
std::size_t readable_gpus(ServerCore& core) {
  const auto stats = core.probe_stats();
  std::size_t n = 0;
  for (const auto& s : core.channel().latest()) {
    if (!s) continue;
    const auto st = std::find_if(stats.begin(), stats.end(),
                                 [&](const ProbeStats& p) { return p.probe == s->probe; });
    if (st != stats.end() && st->state != ProbeState::available) continue;
    for (const auto& d : s->devices) {
      for (std::size_t i = 0; i < kMetricCount; ++i) {
        if (d.metrics[static_cast<Metric>(i)].has_value()) {
          ++n;
          break;
        }
      }
    }
  }
  return n;
}

/// /healthz: "ok" unless --expect-gpus N says more GPUs must be readable than are (503).
HttpResponse healthz(ServerCore& core, const HttpRequest& req) {
  if (const auto& extra = core.options().extra_health)
    if (auto why = extra())
      return text_response(req, http::status::service_unavailable, "unhealthy: " + *why + "\n");
  const auto expected = core.options().expect_gpus;
  if (expected == 0) return text_response(req, http::status::ok, "ok\n");
  const auto readable = readable_gpus(core);
  const auto counts = std::to_string(readable) + " GPU(s) readable, " + std::to_string(expected) +
                      " expected (--expect-gpus)\n";
  if (readable >= expected) return text_response(req, http::status::ok, "ok: " + counts);
  return text_response(req, http::status::service_unavailable, "unhealthy: " + counts);
}

/// The /metrics families of the GPU count /healthz checks (alert rules compare them).
std::string gpu_count_metrics(ServerCore& core) {
  return "# HELP gpustream_gpus_readable GPUs with at least one value in their latest sample, of "
         "the probes that are sampling.\n"
         "# TYPE gpustream_gpus_readable gauge\n"
         "gpustream_gpus_readable " +
         std::to_string(readable_gpus(core)) +
         "\n"
         "# HELP gpustream_gpus_expected GPUs that must be readable (--expect-gpus; 0: not "
         "set).\n"
         "# TYPE gpustream_gpus_expected gauge\n"
         "gpustream_gpus_expected " +
         std::to_string(core.options().expect_gpus) + "\n";
}

std::string api_snapshot(ServerCore& core, std::string_view target) {
  // ?node=NAME: only that node's snapshots (a fleet's; docs/fleet.md).
  const auto node = query_parameter(target, "node");
  std::string out = "{\"schema\":\"";
  out += kSchema;
  out += "\",\"snapshots\":[";
  bool first = true;
  std::size_t too_large = 0;
  for (const auto& s : core.channel().latest()) {
    if (node && s->node != *node) continue;
    // A snapshot whose message is larger than limits.send_queue_bytes is refused here as on
    // the streams; "too_large" says how many were left out.
    const auto message = core.encoded(s, Projection{}.of(*s));
    if (!message) {
      ++too_large;
      continue;
    }
    if (!first) out += ',';
    first = false;
    out += snapshot_json_of_message(*message);
  }
  out += "]";
  if (too_large > 0) out += ",\"too_large\":" + std::to_string(too_large);
  out += "}\n";
  return out;
}

std::string api_devices(ServerCore& core) {
  json::array devices;
  for (const auto& d : devices_of(core.channel().latest())) devices.push_back(to_json(d));
  json::object o{{"schema", kSchema}, {"devices", std::move(devices)}};
  return to_compact_json(o) + "\n";
}

/// The newest GPU events (the channel's recent ring), oldest first, with the channel's counters.
std::string api_events(ServerCore& core) {
  const auto& ch = core.channel().events();
  json::array events;
  for (const auto& e : ch.recent()) events.push_back(event_to_json(*e));
  const auto c = ch.counters();
  json::object o{{"last_sequence", ch.last_sequence()},
                 {"published", c.published},
                 {"dropped", c.dropped},
                 {"events", std::move(events)}};
  return to_compact_json(o) + "\n";
}

std::string api_stats(ServerCore& core) {
  json::array probes;
  for (const auto& s : core.probe_stats()) probes.push_back(to_json(s));
  const auto c = core.counters();
  json::object server{{"connections_accepted", c.connections_accepted},
                      {"connections_rejected", c.connections_rejected},
                      {"http_open", c.http_open},
                      {"websocket_open", c.websocket_open},
                      {"tcp_open", c.tcp_open},
                      {"http_requests", c.http_requests},
                      {"requests_forbidden", c.requests_forbidden},
                      {"requests_unauthorized", c.requests_unauthorized},
                      {"messages_rejected", c.messages_rejected},
                      {"slow_clients_disconnected", c.slow_clients_disconnected},
                      {"snapshots_received", c.snapshots_received},
                      {"serializations", c.serializations},
                      {"snapshots_sent", c.snapshots_sent},
                      {"snapshots_dropped", c.snapshots_dropped},
                      {"idle_closed", c.idle_closed},
                      {"encoded_cache_bytes", c.encoded_cache_bytes},
                      {"encoded_cache_entries", c.encoded_cache_entries},
                      {"messages_too_large", c.messages_too_large},
                      {"http_busy", c.http_busy},
                      {"http_response_bytes", c.http_response_bytes},
                      {"encoded_bytes_live", c.encoded_bytes_live},
                      {"http_stream_bytes", c.http_stream_bytes},
                      {"last_sequence", core.cursor()}};
  if (c.tls) {
    json::object failures;
    for (std::size_t i = 0; i < kTlsFailureReasons; ++i)
      failures[to_string(static_cast<TlsFailure>(i))] = c.tls_handshake_failures[i];
    server["tls"] = json::object{{"handshakes", c.tls_handshakes},
                                 {"handshake_failures", std::move(failures)},
                                 {"reloads", c.tls_reloads},
                                 {"reload_failures", c.tls_reload_failures},
                                 {"certificate_not_after", c.tls_certificate_not_after}};
  }
  json::object o{{"schema", kSchema}, {"probes", std::move(probes)}, {"server", std::move(server)}};
  if (const auto& extra = core.options().extra_stats) {
    boost::system::error_code ec;
    auto more = json::parse("{" + extra() + "}", ec);
    if (!ec && more.is_object())
      for (auto& member : more.as_object()) o[member.key()] = std::move(member.value());
  }
  return to_compact_json(o) + "\n";
}

/// Whether `req` accepts a gzip body (Accept-Encoding; identity otherwise).
bool gzip_accepted(const HttpRequest& req) {
  const auto it = req.find(http::field::accept_encoding);
  return it != req.end() && accepts_gzip(sv(it->value()));
}

/// A /metrics or /api/v1/* answer as the client accepts it: every such answer says it varies
/// with Accept-Encoding; a 200 whose client accepts gzip gets its body compressed
/// (kGzipLevel). A shared body is compressed once per generation and shared in turn
/// (ServerCore::shared_body under the key "<key> gzip").
HttpResponse negotiated(ServerCore& core, const HttpRequest& req, HttpResponse res,
                        std::shared_ptr<const std::string>* shared, const std::string& key) {
  res.set(http::field::vary, "Accept-Encoding");
  if (res.result() != http::status::ok || !gzip_accepted(req)) return res;
  if (shared && *shared) {
    const auto identity = *shared;
    *shared = core.shared_body(key + " gzip", [&] { return gzip_compress(*identity); });
  } else {
    res.body() = gzip_compress(res.body());
  }
  res.set(http::field::content_encoding, "gzip");
  return res;
}

/// The /metrics body in its order: the device families under dcgm-exporter's names
/// (`--metrics-compat dcgm`) and the exposition, each made family by family as it is sent,
/// then the event counters, the GPU counts and the extra families (a fleet's): small, made now.
/// Everything it reads is taken now: the latest snapshots (held, not copied), the recent
/// events' last Xids, the probes' statistics and the server's counters of this request.
class MetricsBody final : public BodySource {
 public:
  MetricsBody(std::optional<DcgmWriter> dcgm, PrometheusWriter writer, std::string tail)
      : dcgm_(std::move(dcgm)), writer_(std::move(writer)), tail_(std::move(tail)) {}

  bool next(std::string& out, std::size_t want) override {
    const std::size_t before = out.size();
    while (stage_ < 3 && (out.size() < want || out.size() == before)) {
      if (stage_ == 0) {
        if (!dcgm_ || !dcgm_->next(out, want)) {
          dcgm_.reset();
          ++stage_;
        }
        continue;
      }
      if (stage_ == 1) {
        if (!writer_.next(out, want)) ++stage_;
        continue;
      }
      // The tail is copied in slices up to `want`: never makes the caller's buffer bigger than
      // it asked for.
      const std::size_t room = out.size() < want ? want - out.size() : 1;
      const std::size_t n = std::min(tail_.size() - offset_, room);
      out.append(tail_, offset_, n);
      offset_ += n;
      if (offset_ == tail_.size()) {
        std::string().swap(tail_);
        ++stage_;
      }
    }
    return out.size() != before;
  }

 private:
  std::optional<DcgmWriter> dcgm_;
  PrometheusWriter writer_;
  std::string tail_;
  std::size_t offset_ = 0;  // of the tail: what was copied
  int stage_ = 0;           // 0: dcgm's families, 1: the writer, 2: tail, 3: done
};

std::unique_ptr<BodySource> metrics_body(ServerCore& core) {
  const auto counters = core.counters();
  auto latest = core.channel().latest();
  std::optional<DcgmWriter> dcgm;
  PrometheusOptions po{core.options().metrics_processes};
  if (core.options().metrics_compat == MetricsCompat::dcgm) {
    // dcgm-exporter's device series instead of ours; the rest keeps gpustream's names.
    static const std::string kHostname = dcgm_local_hostname();
    dcgm.emplace(latest, core.channel().events().recent(), DcgmOptions{kHostname});
    po.device_families = false;
  }
  std::string tail =
      render_event_metrics(core.channel().events().totals(), &counters) + gpu_count_metrics(core);
  if (const auto& extra = core.options().extra_metrics) tail += extra();
  return std::make_unique<MetricsBody>(
      std::move(dcgm), PrometheusWriter(std::move(latest), core.probe_stats(), counters, po),
      std::move(tail));
}

/// The /api/v1/* answers and the extra routes (a fleet's pages and API); a body shared by every
/// client of a generation leaves its key in `shared_key`.
HttpResponse routed(ServerCore& core, const HttpRequest& req, std::string_view target,
                    std::string_view path, std::shared_ptr<const std::string>* shared,
                    std::string& shared_key) {
  if (path == "/api/v1/events")
    return text_response(req, http::status::ok, api_events(core), kJson);
  // The big answers, the same for every client of a generation: built once and shared by
  // every response that sends them (issue 27: one copy per slow reader).
  if (path == "/api/v1/snapshot" || path == "/api/v1/devices") {
    const bool snapshot = path == "/api/v1/snapshot";
    const auto build = [&] { return snapshot ? api_snapshot(core, target) : api_devices(core); };
    if (!shared) return text_response(req, http::status::ok, build(), kJson);
    // Keyed by what makes the body (the node filter), not by the whole target: other query
    // parameters cannot make the server hold more distinct bodies.
    std::string key(path);
    if (const auto node = query_parameter(target, "node"); snapshot && node)
      key += "?node=" + *node;
    *shared = core.shared_body(key, build);
    shared_key = std::move(key);
    return text_response(req, http::status::ok, {}, kJson);
  }
  if (path == "/api/v1/stats") return text_response(req, http::status::ok, api_stats(core), kJson);
  if (path == "/api/v1/fit") {
    // The `fit` message's planner (a fleet's fit source, or this machine's devices), every
    // device that fits: the same entries as fit_result, without its limit.
    // ?bytes=N&exclude=ID,ID&fatal_event_window_s=S (docs/protocol.md).
    if (!fit_bytes_parameter(target))
      return text_response(req, http::status::bad_request, std::string(kFitBytesError), kJson);
    FitRequest r;
    try {
      r = fit_request_of_target(target);
    } catch (const ProtocolError& e) {
      return text_response(req, http::status::bad_request,
                           to_compact_json(boost::json::object{{"error", e.what()}}) + "\n", kJson);
    }
    return text_response(req, http::status::ok, fit_json(core.fits(r), r.bytes), kJson);
  }
  if (const auto& extra = core.options().extra_routes) {
    if (auto r = extra(path, target)) {
      auto res = text_response(req, static_cast<http::status>(r->status), std::move(r->body),
                               r->content_type);
      if (r->content_type.starts_with("text/html")) res.set("X-Frame-Options", "DENY");
      return res;
    }
  }
  return text_response(req, http::status::not_found, "not found\n");
}

}  // namespace

HttpResponse text_response(const HttpRequest& req, http::status status, std::string body,
                           std::string_view content_type) {
  HttpResponse res{status, req.version()};
  res.set(http::field::server, kServerName);
  res.set(http::field::content_type, content_type);
  res.set(http::field::cache_control, "no-store");
  res.set("X-Content-Type-Options", "nosniff");
  // The token may be in the page's URL (?token=): never send it on as a Referer.
  res.set("Referrer-Policy", "no-referrer");
  res.keep_alive(req.keep_alive());
  res.body() = std::move(body);
  return res;
}

bool reserved_path(std::string_view path) { return path == "/healthz" || path == "/metrics"; }

HttpResponse handle_http_request(ServerCore& core, const HttpRequest& req,
                                 std::shared_ptr<const std::string>* shared,
                                 std::unique_ptr<BodySource>* streamed) {
  auto& c = core.context().metrics;
  const auto target = sv(req.target());
  const auto path = target_path(target);
  const auto& access = core.context().access;

  // RFC 9112 §3.2: a request with more than one Host field (names compare without case) is
  // answered 400 — which one a proxy in front of us used is unknowable.
  if (req.count(http::field::host) > 1) {
    ServerMetrics::bump(c.messages_rejected);
    auto res = text_response(req, http::status::bad_request, "more than one Host header\n");
    res.keep_alive(false);
    return res;
  }
  if (!access.host_allowed(sv(req[http::field::host]))) {
    c.requests_forbidden.fetch_add(1);
    return text_response(req, http::status::forbidden,
                         "Host not allowed (DNS rebinding protection; see --allow-host)\n");
  }
  // GET only, everywhere (HEAD included: docs/protocol.md, "HTTP endpoints").
  if (req.method() != http::verb::get) {
    auto res = text_response(req, http::status::method_not_allowed, "only GET\n");
    res.set(http::field::allow, "GET");
    if (req.method() == http::verb::head) res.keep_alive(false);  // a HEAD reader skips bodies
    return res;
  }
  if (path == "/healthz") return healthz(core, req);
  if (!access.request_authorized(sv(req[http::field::authorization]), target)) {
    c.requests_unauthorized.fetch_add(1);
    auto res =
        text_response(req, http::status::unauthorized,
                      "a token is required: 'Authorization: Bearer TOKEN' or ?token=TOKEN\n");
    res.set(http::field::www_authenticate, "Bearer realm=\"gpustream\"");
    return res;
  }
  if (core.options().health_only && path != "/metrics")  // serve --health: a headless agent's
    return text_response(req, http::status::not_found, "not found (health listener)\n");
  if (beast::websocket::is_upgrade(req)) {
    if (path != "/ws") return text_response(req, http::status::not_found, "not found\n");
    std::optional<std::string_view> origin;
    if (const auto it = req.find(http::field::origin); it != req.end()) origin = sv(it->value());
    if (!access.origin_allowed(origin)) {
      c.requests_forbidden.fetch_add(1);
      return text_response(req, http::status::forbidden,
                           "Origin not allowed (see --allow-origin)\n");
    }
    return text_response(req, http::status::switching_protocols, {});
  }
  if (path == "/" || path == "/index.html") {
    auto res = text_response(req, http::status::ok, std::string(dashboard_html()),
                             "text/html; charset=utf-8");
    res.set("X-Frame-Options", "DENY");
    return res;
  }
  if (path == "/metrics") {
    auto body = metrics_body(core);
    if (!streamed) {
      std::string text;
      while (body->next(text, std::numeric_limits<std::size_t>::max())) {}
      return negotiated(
          core, req, text_response(req, http::status::ok, std::move(text), kPrometheusContentType),
          nullptr, {});
    }
    // Streamed (issue #32): the session makes the body while it writes it, gzip'd when
    // accepted; the headers say so now.
    auto res = text_response(req, http::status::ok, {}, kPrometheusContentType);
    res.set(http::field::vary, "Accept-Encoding");
    if (gzip_accepted(req)) res.set(http::field::content_encoding, "gzip");
    *streamed = std::move(body);
    return res;
  }
  if (path == "/ws")
    return text_response(req, http::status::upgrade_required, "use a WebSocket client\n");
  std::string shared_key;
  auto res = routed(core, req, target, path, shared, shared_key);
  if (path.starts_with("/api/v1/"))
    return negotiated(core, req, std::move(res), shared, shared_key);
  return res;
}

}  // namespace gpustream::transport
