// ClientSession: the protocol side of RemoteSubscriber (see client_session.hpp).
#include "client/client_session.hpp"

#include <algorithm>
#include <memory>
#include <utility>

#include "gpustream/json.hpp"
#include "gpustream/log.hpp"
#include "gpustream/transport/address.hpp"
#include "gpustream/transport/protocol_event.hpp"

namespace gpustream::transport {

namespace {

// One "logged once" record for the process: the warnings are about a URL, whichever subscriber.
LogOnce g_client_log;  // NOLINT(cppcoreguidelines-avoid-non-const-global-variables)

/// Names what the server sent, bounded (whole names only, so the text stays valid UTF-8).
std::string fit_unsupported_reason(const Hello& h) {
  constexpr std::size_t kMaxNamed = 200;  // bytes of names quoted from the server
  std::string listed;
  for (const auto& r : *h.requests) {
    if (listed.size() + r.size() > kMaxNamed) {
      listed += listed.empty() ? "..." : ", ...";
      break;
    }
    listed += (listed.empty() ? "" : ", ") + r;
  }
  const std::string server = h.server.size() <= 64 ? h.server : "...";
  return "the server (" + server + ") does not support fit: its hello lists the requests [" +
         listed + "]";
}

}  // namespace

ClientSession::ClientSession(RemoteSubscriberOptions options, std::uint32_t seed)
    : options_(std::move(options)),
      log_url_(redact_url_credentials(options_.url)),
      rng_(seed),
      resume_(options_.since) {
  if (options_.reconnect_initial.count() <= 0)
    options_.reconnect_initial = std::chrono::milliseconds{1};
  options_.reconnect_max = std::max(options_.reconnect_max, options_.reconnect_initial);
}

RemoteStatus ClientSession::connecting() const {
  return RemoteStatus{RemoteStatus::State::connecting, {}, attempts_, {}};
}

void ClientSession::opened() {
  open_ = true;
  subscribed_ = false;
  awaiting_ack_ = true;
  hello_seen_ = false;
  preview_ok_ = false;
  server_error_.clear();
}

void ClientSession::received(std::string_view text, ClientActions& out) {
  using Kind = ServerMessage::Kind;
  ServerMessage m;
  try {
    m = parse_server_message(text);
  } catch (const JsonError& e) {
    decode_error(e.what());
    return;
  }
  switch (m.kind) {
    case Kind::snapshot:
      // Before our subscribe is answered the server streams everything (and will not send
      // those sequences again): keep what our filters keep, as the server would have.
      if (!awaiting_ack_ || (preview_ok_ && filter_locally(m.snapshot)))
        on_snapshot(std::move(m.snapshot), out);
      break;
    case Kind::hello:
      on_hello(m.hello, out);
      break;
    case Kind::subscribed:
      on_subscribed(m.subscribed, out);
      break;
    case Kind::gap:
      if (!awaiting_ack_) on_gap(std::move(m.gap), out);
      break;
    case Kind::fit_result:
      if (auto h = take_fit(m.fit.id)) {
        RemoteFitAnswer a;
        a.result = std::move(m.fit);
        out.emplace_back(client_action::FitAnswer{std::move(h), std::move(a)});
      }
      break;
    case Kind::error:
      on_error(m.error, out);
      break;
    case Kind::other:  // an `event`; newer servers may send more types: ignored
      on_other(text, out);
      break;
  }
}

void ClientSession::on_hello(const Hello& h, ClientActions& out) {
  if (!h.instance.empty()) {
    if (!instance_.empty() && h.instance != instance_ && resume_) server_restarted(out);
    instance_ = h.instance;
  }
  SubscribeRequest r{options_.probes, options_.devices, options_.fields, options_.max_rate_hz,
                     resume_.value_or(h.last_sequence)};
  // Resuming exactly at hello's sequence: what the server streams before answering is not sent
  // again. From further back it is (in order, after the older history).
  preview_ok_ = *r.since == h.last_sequence;
  // A hello that lists its requests without `fit`: fit() fails at once. Without the list (an
  // older server) a fit is sent and an "unknown message type" refusal answers.
  fit_unsupported_.clear();
  if (h.requests && std::find(h.requests->begin(), h.requests->end(), "fit") == h.requests->end())
    fit_unsupported_ = fit_unsupported_reason(h);
  hello_seen_ = true;
  out.emplace_back(client_action::HelloReceived{h});
  out.emplace_back(client_action::Send{encode_subscribe(r)});
}

void ClientSession::on_subscribed(const Subscribed& s, ClientActions& out) {
  // The effective `since`: lower than ours when the server was restarted with a new channel
  // (its sequences start again at 1).
  if (s.request.since) resume_ = *s.request.since;
  if (!s.unknown_probes.empty() || !s.unknown_devices.empty()) {
    if (g_client_log.first("remote-unknown:" + options_.url))
      logger()->warn(
          "{}: the server does not know {} of the probes and {} of the devices asked for (yet)",
          log_url_, s.unknown_probes.size(), s.unknown_devices.size());
  }
  awaiting_ack_ = false;
  subscribed_ = true;
  ++connections_;
  if (!warned_key_.empty()) {
    g_client_log.clear(warned_key_);
    logger()->info("{}: connected again", log_url_);
    warned_key_.clear();
  }
  out.emplace_back(client_action::Status{RemoteStatus{RemoteStatus::State::connected, {}, 0, {}}});
}

void ClientSession::on_error(const ServerError& e, ClientActions& out) {
  if (auto h = take_fit_for_error(e)) {
    out.emplace_back(client_action::FitAnswer{
        std::move(h), RemoteFitAnswer{std::nullopt, e.code + ": " + e.message}});
    return;
  }
  server_error_ = e.code + ": " + e.message;
  if (awaiting_ack_) {
    out.emplace_back(client_action::Drop{"server refused: " + server_error_});
    return;
  }
  if (g_client_log.first("remote-error:" + server_error_))
    logger()->warn("{}: server error {}", log_url_, server_error_);
}

bool ClientSession::event_wanted(const GpuEvent& e) const {
  const auto& o = options_;
  return (o.probes.empty() ||
          std::find(o.probes.begin(), o.probes.end(), e.probe) != o.probes.end()) &&
         (o.devices.empty() ||
          std::find(o.devices.begin(), o.devices.end(), e.device_id) != o.devices.end());
}

void ClientSession::on_other(std::string_view text, ClientActions& out) {
  std::optional<GpuEvent> e;
  try {
    e = parse_if_event_message(text);
  } catch (const JsonError& error) {
    decode_error(error.what());
    return;
  }
  // Events are live only (never replayed); before the ack they come unfiltered.
  if (!e || (awaiting_ack_ && !event_wanted(*e))) return;
  ++events_;
  out.emplace_back(client_action::Event{std::make_shared<const GpuEvent>(std::move(*e))});
}

std::string ClientSession::read_failed(std::string description) const {
  return server_error_.empty() ? std::move(description) : "server error " + server_error_;
}

void ClientSession::closed(const std::string& reason, ClientActions& out) {
  open_ = false;
  hello_seen_ = false;
  auto pending = std::move(fits_);
  fits_.clear();
  const std::string why = "the connection ended before the answer: " + reason;
  for (auto& p : pending)
    out.emplace_back(
        client_action::FitAnswer{std::move(p.handler), RemoteFitAnswer{std::nullopt, why}});
}

std::chrono::milliseconds ClientSession::backoff_base(unsigned attempts) const {
  auto d = options_.reconnect_initial;
  for (unsigned i = 1; i < attempts && d < options_.reconnect_max; ++i) d *= 2;
  return std::min(d, options_.reconnect_max);
}

RemoteStatus ClientSession::retry(const std::string& reason) {
  attempts_ = subscribed_ ? 1 : attempts_ + 1;
  const auto d = backoff_base(attempts_);
  // ±20% jitter, so that many clients of one restarted server do not come back in step.
  std::uniform_real_distribution<double> jitter(0.8, 1.2);
  const auto delay = std::chrono::milliseconds(
      std::max<std::int64_t>(1, static_cast<std::int64_t>(d.count() * jitter(rng_))));
  // Logged once per reason until a connection succeeds again.
  warned_key_ = "remote-disconnected:" + options_.url + "|" + reason;
  if (g_client_log.first(warned_key_))
    logger()->warn("{}: {}; retrying (in {} ms, then with backoff)", log_url_, reason,
                   delay.count());
  return RemoteStatus{RemoteStatus::State::disconnected, reason, attempts_, delay};
}

void ClientSession::fit(FitRequest r, FitHandler handler, ClientActions& out) {
  const auto refuse = [&](std::string why) {
    out.emplace_back(client_action::FitAnswer{std::move(handler),
                                              RemoteFitAnswer{std::nullopt, std::move(why)}});
  };
  // The server answers a fit at any time after its hello: a fit asked from on_hello (before
  // the subscribe is acknowledged) is sent right after the subscribe.
  if (!open_ || !hello_seen_) return refuse("not connected");
  if (!fit_unsupported_.empty()) return refuse(fit_unsupported_);
  if (r.limit < 1 || r.limit > kFitMaxLimit)
    return refuse("limit must be from 1 to " + std::to_string(kFitMaxLimit));
  if (r.exclude.size() > kFitMaxExclude)
    return refuse("more than " + std::to_string(kFitMaxExclude) + " device ids to exclude");
  if (fits_.size() >= kMaxFitsInFlight)
    return refuse("too many fit queries in flight (" + std::to_string(kMaxFitsInFlight) + ")");
  r.id = "f" + std::to_string(++fit_ids_);
  fits_.push_back({r.id, std::move(handler)});
  out.emplace_back(client_action::Send{encode_fit(r)});
}

FitHandler ClientSession::take_fit(const std::string& id) {
  const auto it =
      std::find_if(fits_.begin(), fits_.end(), [&](const PendingFit& p) { return p.id == id; });
  if (it == fits_.end()) return {};
  auto h = std::move(it->handler);
  fits_.erase(it);
  return h;
}

/// An error about one of our fits: by its id, or (an older server that does not know `fit` and
/// names no id) the oldest one.
FitHandler ClientSession::take_fit_for_error(const ServerError& e) {
  if (!e.id.empty()) return take_fit(e.id);
  if (fits_.empty() || e.message.find("'fit'") == std::string::npos) return {};
  return take_fit(fits_.front().id);
}

/// The subscription's probes, devices and fields applied to `s` here, with the result of
/// decoding the server's projected message (a metric left out reads as not_collected). False
/// when nothing of `s` is wanted.
bool ClientSession::filter_locally(GpuSnapshot& s) const {
  const auto& o = options_;
  if (!o.probes.empty() && std::find(o.probes.begin(), o.probes.end(), s.probe) == o.probes.end())
    return false;
  if (!o.devices.empty()) {
    std::erase_if(s.devices, [&](const DeviceSample& d) {
      return std::find(o.devices.begin(), o.devices.end(), d.id) == o.devices.end();
    });
    if (s.devices.empty()) return false;
  }
  if (!o.fields.empty())
    for (auto& d : s.devices)
      for (std::size_t i = 0; i < kMetricCount; ++i) {
        const auto m = static_cast<Metric>(i);
        if (std::find(o.fields.begin(), o.fields.end(), m) == o.fields.end())
          d.metrics.set_absent(m, Absence::not_collected);
      }
  return true;
}

void ClientSession::on_snapshot(GpuSnapshot snapshot, ClientActions& out) {
  if (resume_ && snapshot.sequence <= *resume_) {
    ++duplicates_;
    return;
  }
  auto s = std::make_shared<const GpuSnapshot>(std::move(snapshot));
  resume_ = s->sequence;
  last_sequence_ = s->sequence;
  ++snapshots_;
  out.emplace_back(client_action::Snapshot{std::move(s)});
}

/// The server's sequence space changed: say so with a gap and start again from its beginning.
void ClientSession::server_restarted(ClientActions& out) {
  Gap g{*resume_, 0, std::string(kGapServerRestarted)};
  logger()->info(
      "{}: the server was restarted (new instance); its snapshots are numbered from 1 again, "
      "delivering them from its first",
      log_url_);
  resume_ = 0;
  ++gaps_;
  out.emplace_back(client_action::GapFound{std::move(g)});
}

void ClientSession::on_gap(Gap g, ClientActions& out) {
  resume_ = std::max(resume_.value_or(0), g.after_sequence + g.missed);
  ++gaps_;
  out.emplace_back(client_action::GapFound{std::move(g)});
}

void ClientSession::decode_error(const std::string& what) {
  ++decode_errors_;
  if (g_client_log.first("remote-decode:" + options_.url))
    logger()->warn("{}: a message could not be decoded (reported once): {}", log_url_, what);
}

RemoteCounters ClientSession::counters() const {
  RemoteCounters c;
  c.connections = connections_.load();
  c.snapshots = snapshots_.load();
  c.duplicates = duplicates_.load();
  c.gaps = gaps_.load();
  c.decode_errors = decode_errors_.load();
  c.events = events_.load();
  c.last_sequence = last_sequence_.load();
  return c;
}

}  // namespace gpustream::transport
