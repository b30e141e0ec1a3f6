// RemoteSubscriber: connect, hello, subscribe (resume by sequence), deliver, reconnect.
//
// One coroutine on a strand runs the whole life: connect → read messages → on failure wait
// (backoff) → connect again, until stop(). All state below `// strand` is touched only there.
#include "gpustream/transport/remote_subscriber.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "client/remote_connection.hpp"
#include "gpustream/json.hpp"
#include "gpustream/log.hpp"
#include "gpustream/transport/address.hpp"
#include "gpustream/transport/protocol_event.hpp"

namespace gpustream {
namespace asio = boost::asio;
using boost::system::error_code;
using transport::RemoteConnection;

namespace {

// One "logged once" record for the process: the warnings are about a URL, whichever subscriber.
LogOnce g_log_once;  // NOLINT(cppcoreguidelines-avoid-non-const-global-variables)

/// fit() queries waiting for their answer, at most (a caller that never waits cannot grow it).
constexpr std::size_t kMaxFitsInFlight = 64;

std::string describe(const error_code& ec, const RemoteConnection& c) {
  if (!c.failure_detail().empty()) return c.failure_detail();
  if (ec == asio::error::eof) return "the server closed the connection";
  return ec.message();
}

}  // namespace

std::string_view to_string(RemoteStatus::State s) noexcept {
  switch (s) {
    case RemoteStatus::State::idle:
      return "idle";
    case RemoteStatus::State::connecting:
      return "connecting";
    case RemoteStatus::State::connected:
      return "connected";
    case RemoteStatus::State::disconnected:
      return "disconnected";
    case RemoteStatus::State::stopped:
      return "stopped";
  }
  return "unknown";
}

void validate_remote_url(std::string_view url) { (void)transport::parse_remote_url(url); }

class RemoteSubscriber::Impl : public std::enable_shared_from_this<Impl> {
 public:
  Impl(const asio::any_io_executor& ex, RemoteSubscriberOptions o)
      : strand_(asio::make_strand(ex)),
        options_(std::move(o)),
        url_(transport::parse_remote_url(options_.url)),
        log_url_(transport::redact_url_credentials(options_.url)),
        retry_timer_(strand_),
        deadline_(strand_),
        resume_(options_.since),
        rng_(std::random_device{}()) {
    if (options_.reconnect_initial.count() <= 0)
      options_.reconnect_initial = std::chrono::milliseconds{1};
    options_.reconnect_max = std::max(options_.reconnect_max, options_.reconnect_initial);
  }

  std::function<void(const SnapshotPtr&)> on_snapshot;
  std::function<void(const Gap&)> on_gap;
  std::function<void(const RemoteStatus&)> on_status;
  std::function<void(const RemoteHello&)> on_hello;
  std::function<void(const EventPtr&)> on_event;

  void start() {
    {
      std::lock_guard lock(cb_mu_);
      if (stopped_ || started_) return;
      started_ = true;
    }
    asio::co_spawn(strand_, run(shared_from_this()), [](const std::exception_ptr& e) {
      if (!e) return;
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& ex) {
        logger()->error("remote subscriber ended on an exception: {}", ex.what());
      } catch (...) {
        logger()->error("remote subscriber ended on an unknown exception");
      }
    });
  }

  void stop() {
    {
      std::unique_lock lock(cb_mu_);
      stopped_ = true;
      const auto me = std::this_thread::get_id();
      cb_cv_.wait(lock, [&] { return !in_callback_ || cb_thread_ == me; });
    }
    {
      std::lock_guard lock(status_mu_);
      status_ = RemoteStatus{RemoteStatus::State::stopped, {}, 0, {}};
    }
    asio::post(strand_, [self = shared_from_this()] {
      self->retry_timer_.cancel();
      self->deadline_.cancel();
      if (self->conn_) self->conn_->close(true);
    });
  }

  void fit(std::uint64_t bytes, std::size_t limit, std::function<void(RemoteFitAnswer)> handler) {
    asio::post(strand_,
               [self = shared_from_this(), bytes, limit, h = std::move(handler)]() mutable {
                 self->start_fit(bytes, limit, std::move(h));
               });
  }

  RemoteStatus status() const {
    std::lock_guard lock(status_mu_);
    return status_;
  }

  RemoteCounters counters() const {
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

 private:
  bool stopped() const { return stopped_.load(); }

  /// Runs `f` unless stopped, marking the callback as running for stop().
  template <class F>
  void invoke(F&& f) {
    {
      std::lock_guard lock(cb_mu_);
      if (stopped_) return;
      in_callback_ = true;
      cb_thread_ = std::this_thread::get_id();
    }
    try {
      f();
    } catch (const std::exception& e) {
      if (g_log_once.first(std::string("remote-callback:") + e.what()))
        logger()->error("a remote subscriber callback threw: {}", e.what());
    } catch (...) {
      if (g_log_once.first("remote-callback:unknown"))
        logger()->error("a remote subscriber callback threw a non-exception");
    }
    {
      std::lock_guard lock(cb_mu_);
      in_callback_ = false;
    }
    cb_cv_.notify_all();
  }

  void set_status(RemoteStatus::State state, std::string reason, unsigned attempts,
                  std::chrono::milliseconds retry_in) {
    RemoteStatus s{state, std::move(reason), attempts, retry_in};
    {
      std::lock_guard lock(status_mu_);
      if (stopped()) return;
      status_ = s;
    }
    if (on_status) invoke([&] { on_status(s); });
  }

  std::chrono::milliseconds backoff(unsigned attempts) {
    auto d = options_.reconnect_initial;
    for (unsigned i = 1; i < attempts && d < options_.reconnect_max; ++i) d *= 2;
    d = std::min(d, options_.reconnect_max);
    // ±20% jitter, so that many clients of one restarted server do not come back in step.
    std::uniform_real_distribution<double> jitter(0.8, 1.2);
    return std::chrono::milliseconds(
        std::max<std::int64_t>(1, static_cast<std::int64_t>(d.count() * jitter(rng_))));
  }

  asio::awaitable<void> run(std::shared_ptr<Impl> /*keep_alive*/) {
    unsigned attempts = 0;
    while (!stopped()) {
      set_status(RemoteStatus::State::connecting, {}, attempts, {});
      const SessionEnd end = co_await session();
      if (stopped()) break;
      attempts = end.subscribed ? 1 : attempts + 1;
      const std::string& reason = end.reason;
      const auto delay = backoff(attempts);
      // Logged once per reason until a connection succeeds again.
      warned_key_ = "remote-disconnected:" + options_.url + "|" + reason;
      if (g_log_once.first(warned_key_))
        logger()->warn("{}: {}; retrying (in {} ms, then with backoff)", log_url_, reason,
                       delay.count());
      set_status(RemoteStatus::State::disconnected, reason, attempts, delay);
      retry_timer_.expires_after(delay);
      error_code ec;
      co_await retry_timer_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    }
  }

  struct SessionEnd {
    bool subscribed = false;  // the server acknowledged our subscribe
    std::string reason;       // why it ended
  };

  /// One connection, from connect to its end.
  asio::awaitable<SessionEnd> session() {
    transport::RemoteConnectionOptions co;
    co.token = options_.token;
    co.idle_timeout = options_.idle_timeout;
    co.max_message_bytes = options_.max_message_bytes;
    auto conn = transport::make_remote_connection(strand_, url_, co);
    conn_ = conn;
    awaiting_ack_ = true;
    preview_ok_ = false;
    server_error_.clear();
    // Shared with the deadline's handler, which may run after this coroutine has returned.
    struct Flags {
      bool subscribed = false;
      bool timed_out = false;
    };
    auto flags = std::make_shared<Flags>();
    deadline_.expires_after(options_.connect_timeout);
    deadline_.async_wait([conn, flags](const error_code& ec) {
      if (ec || flags->subscribed) return;
      flags->timed_out = true;
      conn->close(false);
    });

    std::string reason;
    error_code ec = co_await conn->open();
    if (ec) reason = describe(ec, *conn);
    while (!ec && !stopped()) {
      std::string_view text;
      ec = co_await conn->read(text);
      if (ec) {
        reason = server_error_.empty() ? describe(ec, *conn) : "server error " + server_error_;
        break;
      }
      if (stopped()) break;
      std::optional<std::string> reply;
      if (!handle(text, reply, flags->subscribed, reason)) break;
      if (flags->subscribed) deadline_.cancel();
      if (reply) send(std::move(*reply));
    }
    if (flags->timed_out)
      reason = "no answer within " + std::to_string(options_.connect_timeout.count()) +
               " ms (connect, handshake or subscribe)";
    if (!write_error_.empty()) reason = write_error_;
    deadline_.cancel();
    conn->close(stopped());
    if (conn_ == conn) conn_.reset();
    outbox_.clear();
    write_error_.clear();
    fail_fits("the connection ended before the answer: " + reason);
    co_return SessionEnd{flags->subscribed, std::move(reason)};
  }

  /// Handles one message. Sets `reply` to a message to send back. Returns false to drop the
  /// connection (`reason` says why).
  bool handle(std::string_view text, std::optional<std::string>& reply, bool& subscribed,
              std::string& reason) {
    using Kind = transport::ServerMessage::Kind;
    transport::ServerMessage m;
    try {
      m = transport::parse_server_message(text);
    } catch (const JsonError& e) {
      decode_error(e.what());
      return true;
    }
    switch (m.kind) {
      case Kind::snapshot:
        // Before our subscribe is answered the server streams everything (and will not send
        // those sequences again): keep what our filters keep, as the server would have.
        if (!awaiting_ack_ || (preview_ok_ && filter_locally(m.snapshot)))
          on_snapshot_message(std::move(m.snapshot));
        break;
      case Kind::hello: {
        const auto& h = m.hello;
        if (!h.instance.empty()) {
          if (!instance_.empty() && h.instance != instance_ && resume_) server_restarted();
          instance_ = h.instance;
        }
        transport::SubscribeRequest r{options_.probes, options_.devices, options_.fields,
                                      options_.max_rate_hz, resume_.value_or(h.last_sequence)};
        // Resuming exactly at hello's sequence: what the server streams before answering is
        // not sent again. From further back it is (in order, after the older history).
        preview_ok_ = *r.since == h.last_sequence;
        reply = transport::encode_subscribe(r);
        // A hello that lists its requests without `fit`: fit() fails at once. Without the
        // list (an older server) a fit is sent and an "unknown message type" refusal answers.
        fit_unsupported_.clear();
        if (h.requests &&
            std::find(h.requests->begin(), h.requests->end(), "fit") == h.requests->end())
          fit_unsupported_ = fit_unsupported_reason(h);
        if (on_hello) invoke([&] { on_hello(h); });
        break;
      }
      case Kind::subscribed:
        // The effective `since`: lower than ours when the server was restarted with a new
        // channel (its sequences start again at 1).
        if (m.subscribed.request.since) resume_ = *m.subscribed.request.since;
        if (!m.subscribed.unknown_probes.empty() || !m.subscribed.unknown_devices.empty()) {
          if (g_log_once.first("remote-unknown:" + options_.url))
            logger()->warn(
                "{}: the server does not know {} of the probes and {} of the devices "
                "asked for (yet)",
                log_url_, m.subscribed.unknown_probes.size(), m.subscribed.unknown_devices.size());
        }
        awaiting_ack_ = false;
        subscribed = true;
        ++connections_;
        if (!warned_key_.empty()) {
          g_log_once.clear(warned_key_);
          logger()->info("{}: connected again", log_url_);
          warned_key_.clear();
        }
        set_status(RemoteStatus::State::connected, {}, 0, {});
        break;
      case Kind::gap:
        if (!awaiting_ack_) on_gap_message(std::move(m.gap));
        break;
      case Kind::fit_result:
        if (auto h = take_fit(m.fit.id)) {
          RemoteFitAnswer a;
          a.result = std::move(m.fit);
          invoke([&] { h(std::move(a)); });
        }
        break;
      case Kind::error:
        if (auto h = take_fit_for_error(m.error)) {
          invoke([&] { h(RemoteFitAnswer{std::nullopt, m.error.code + ": " + m.error.message}); });
          break;
        }
        server_error_ = m.error.code + ": " + m.error.message;
        if (awaiting_ack_) {
          reason = "server refused: " + server_error_;
          return false;
        }
        if (g_log_once.first("remote-error:" + server_error_))
          logger()->warn("{}: server error {}", log_url_, server_error_);
        break;
      case Kind::other:  // an `event`; newer servers may send more types: ignored
        on_other_message(text);
        break;
    }
    return true;
  }

  /// The subscription's probes and devices applied to an event here.
  bool event_wanted(const GpuEvent& e) const {
    const auto& o = options_;
    return (o.probes.empty() ||
            std::find(o.probes.begin(), o.probes.end(), e.probe) != o.probes.end()) &&
           (o.devices.empty() ||
            std::find(o.devices.begin(), o.devices.end(), e.device_id) != o.devices.end());
  }

  void on_other_message(std::string_view text) {
    std::optional<GpuEvent> e;
    try {
      e = transport::parse_if_event_message(text);
    } catch (const JsonError& error) {
      decode_error(error.what());
      return;
    }
    // Events are live only (never replayed); before the ack they come unfiltered.
    if (!e || (awaiting_ack_ && !event_wanted(*e))) return;
    ++events_;
    if (!on_event) return;
    const auto p = std::make_shared<const GpuEvent>(std::move(*e));
    invoke([&] { on_event(p); });
  }

  /// Queues `message` behind what is being written: one write in flight on the connection.
  void send(std::string message) {
    if (!conn_) return;
    outbox_.push_back(std::move(message));
    if (!writing_) asio::co_spawn(strand_, drain(conn_, shared_from_this()), asio::detached);
  }

  asio::awaitable<void> drain(std::shared_ptr<RemoteConnection> conn, std::shared_ptr<Impl>) {
    writing_ = true;
    while (!outbox_.empty() && conn == conn_) {
      auto m = std::move(outbox_.front());
      outbox_.pop_front();
      const error_code ec = co_await conn->write(std::move(m));
      if (ec) {
        write_error_ = describe(ec, *conn);
        conn->close(false);  // the read fails too and the session ends
        break;
      }
    }
    writing_ = false;
    // A new connection queued while the old one's last write was still out: its turn now.
    if (!outbox_.empty() && conn_ && conn_ != conn)
      asio::co_spawn(strand_, drain(conn_, shared_from_this()), asio::detached);
  }

  void start_fit(std::uint64_t bytes, std::size_t limit,
                 std::function<void(RemoteFitAnswer)> handler) {
    const auto refuse = [&](std::string why) {
      invoke([&] { handler(RemoteFitAnswer{std::nullopt, std::move(why)}); });
    };
    if (!conn_ || awaiting_ack_) return refuse("not connected");
    if (!fit_unsupported_.empty()) return refuse(fit_unsupported_);
    if (limit < 1 || limit > transport::kFitMaxLimit)
      return refuse("limit must be from 1 to " + std::to_string(transport::kFitMaxLimit));
    if (fits_.size() >= kMaxFitsInFlight)
      return refuse("too many fit queries in flight (" + std::to_string(kMaxFitsInFlight) + ")");
    transport::FitRequest r{bytes, limit, "f" + std::to_string(++fit_ids_)};
    fits_.push_back({r.id, std::move(handler)});
    send(transport::encode_fit(r));
  }

  std::function<void(RemoteFitAnswer)> take_fit(const std::string& id) {
    const auto it =
        std::find_if(fits_.begin(), fits_.end(), [&](const PendingFit& p) { return p.id == id; });
    if (it == fits_.end()) return {};
    auto h = std::move(it->handler);
    fits_.erase(it);
    return h;
  }

  /// Names what the server sent, bounded (whole names only, so the text stays valid UTF-8).
  static std::string fit_unsupported_reason(const RemoteHello& h) {
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

  /// An error about one of our fits: by its id, or (an older server that does not know `fit`
  /// and names no id) the oldest one.
  std::function<void(RemoteFitAnswer)> take_fit_for_error(const transport::ServerError& e) {
    if (!e.id.empty()) return take_fit(e.id);
    if (fits_.empty() || e.message.find("'fit'") == std::string::npos) return {};
    return take_fit(fits_.front().id);
  }

  void fail_fits(const std::string& why) {
    auto pending = std::move(fits_);
    fits_.clear();
    for (auto& p : pending) invoke([&] { p.handler(RemoteFitAnswer{std::nullopt, why}); });
  }

  /// The subscription's probes, devices and fields applied to `s` here, with the result of
  /// decoding the server's projected message (a metric left out reads as not_collected).
  /// False when nothing of `s` is wanted.
  bool filter_locally(GpuSnapshot& s) const {
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

  void on_snapshot_message(GpuSnapshot snapshot) {
    if (resume_ && snapshot.sequence <= *resume_) {
      ++duplicates_;
      return;
    }
    auto s = std::make_shared<const GpuSnapshot>(std::move(snapshot));
    resume_ = s->sequence;
    last_sequence_ = s->sequence;
    ++snapshots_;
    if (on_snapshot) invoke([&] { on_snapshot(s); });
  }

  /// The server's sequence space changed: say so with a gap and start again from its beginning.
  void server_restarted() {
    Gap g{*resume_, 0, std::string(kGapServerRestarted)};
    logger()->info(
        "{}: the server was restarted (new instance); its snapshots are numbered "
        "from 1 again, delivering them from its first",
        log_url_);
    resume_ = 0;
    ++gaps_;
    if (on_gap) invoke([&] { on_gap(g); });
  }

  void on_gap_message(Gap g) {
    resume_ = std::max(resume_.value_or(0), g.after_sequence + g.missed);
    ++gaps_;
    if (on_gap) invoke([&] { on_gap(g); });
  }

  void decode_error(const std::string& what) {
    ++decode_errors_;
    if (g_log_once.first("remote-decode:" + options_.url))
      logger()->warn("{}: a message could not be decoded (reported once): {}", log_url_, what);
  }

  asio::strand<asio::any_io_executor> strand_;
  RemoteSubscriberOptions options_;
  transport::RemoteUrl url_;
  std::string log_url_;  // options_.url without credentials: the only form that is logged

  // strand
  asio::steady_timer retry_timer_;
  asio::steady_timer deadline_;
  std::shared_ptr<RemoteConnection> conn_;
  std::string instance_;                 // the server instance resume_ refers to
  std::optional<std::uint64_t> resume_;  // the last sequence delivered (or skipped by a gap)
  bool awaiting_ack_ = true;
  bool preview_ok_ = false;  // snapshots before the ack are ours to deliver
  std::string server_error_;
  std::string warned_key_;          // the LogOnce key of the last disconnection warning
  std::deque<std::string> outbox_;  // messages waiting for the write in flight
  bool writing_ = false;
  std::string write_error_;  // why a write failed (ends the session)
  struct PendingFit {
    std::string id;
    std::function<void(RemoteFitAnswer)> handler;
  };
  std::deque<PendingFit> fits_;  // at most kMaxFitsInFlight
  std::string fit_unsupported_;  // the connection's hello lists no `fit`: why fit() fails
  std::uint64_t fit_ids_ = 0;
  std::minstd_rand rng_;

  // any thread
  std::mutex cb_mu_;
  std::condition_variable cb_cv_;
  std::atomic<bool> stopped_{false};
  bool started_ = false;
  bool in_callback_ = false;
  std::thread::id cb_thread_;

  mutable std::mutex status_mu_;
  RemoteStatus status_;
  std::atomic<std::uint64_t> connections_{0}, snapshots_{0}, duplicates_{0}, gaps_{0},
      decode_errors_{0}, last_sequence_{0}, events_{0};
};

// NOLINTNEXTLINE(performance-unnecessary-value-param): the public signature takes it by value
RemoteSubscriber::RemoteSubscriber(asio::any_io_executor ex, RemoteSubscriberOptions options)
    : impl_(std::make_shared<Impl>(ex, std::move(options))) {}

RemoteSubscriber::~RemoteSubscriber() { impl_->stop(); }

void RemoteSubscriber::on_snapshot(std::function<void(const SnapshotPtr&)> cb) {
  impl_->on_snapshot = std::move(cb);
}
void RemoteSubscriber::on_gap(std::function<void(const Gap&)> cb) { impl_->on_gap = std::move(cb); }
void RemoteSubscriber::on_status(std::function<void(const RemoteStatus&)> cb) {
  impl_->on_status = std::move(cb);
}
void RemoteSubscriber::on_hello(std::function<void(const RemoteHello&)> cb) {
  impl_->on_hello = std::move(cb);
}
void RemoteSubscriber::on_event(std::function<void(const EventPtr&)> cb) {
  impl_->on_event = std::move(cb);
}

void RemoteSubscriber::fit(std::uint64_t bytes, std::function<void(RemoteFitAnswer)> handler,
                           std::size_t limit) {
  impl_->fit(bytes, limit, std::move(handler));
}
void RemoteSubscriber::start() { impl_->start(); }
void RemoteSubscriber::stop() { impl_->stop(); }
RemoteStatus RemoteSubscriber::status() const { return impl_->status(); }
RemoteCounters RemoteSubscriber::counters() const { return impl_->counters(); }

}  // namespace gpustream
