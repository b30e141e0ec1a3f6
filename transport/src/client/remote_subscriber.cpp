// RemoteSubscriber: connect, hello, subscribe (resume by sequence), deliver, reconnect.
//
// One coroutine on a strand runs the whole life: connect → read messages → on failure wait
// (backoff) → connect again, until stop(). All state below `// strand` is touched only there.
// What to send, deliver and when to retry is decided by transport::ClientSession
// (client_session.hpp, no I/O); this file is the I/O around it.
#include "gpustream/transport/remote_subscriber.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <variant>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "client/client_session.hpp"
#include "client/remote_connection.hpp"
#include "gpustream/log.hpp"
#include "wire/tls_context.hpp"

namespace gpustream {
namespace asio = boost::asio;
using boost::system::error_code;
using transport::RemoteConnection;

namespace {

// One "logged once" record for the process: the warnings are about a URL, whichever subscriber.
LogOnce g_log_once;  // NOLINT(cppcoreguidelines-avoid-non-const-global-variables)

std::string describe(const error_code& ec, const RemoteConnection& c) {
  if (!c.failure_detail().empty()) return c.failure_detail();
  // Over TLS a close without a close_notify is a "stream truncated": the same end for us.
  if (ec == asio::error::eof || ec == asio::ssl::error::stream_truncated)
    return "the server closed the connection";
  return ec.message();
}

std::shared_ptr<asio::ssl::context> client_tls(const RemoteSubscriberOptions& o) {
  try {
    return transport::make_client_tls_context(o.tls_ca_file, o.tls_cert_file, o.tls_key_file);
  } catch (const std::runtime_error& e) {
    throw std::invalid_argument(std::string("TLS: ") + e.what());
  }
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

/// The I/O shell around transport::ClientSession: the connection, its writes, the connect
/// deadline, the retry timer and the user's callbacks. The protocol decisions are the session's.
class RemoteSubscriber::Impl : public std::enable_shared_from_this<Impl> {
 public:
  Impl(const asio::any_io_executor& ex, RemoteSubscriberOptions o)
      : strand_(asio::make_strand(ex)),
        options_(std::move(o)),
        url_(transport::parse_remote_url(options_.url)),
        tls_(url_.tls ? client_tls(options_) : nullptr),
        retry_timer_(strand_),
        deadline_(strand_),
        session_(options_, std::random_device{}()) {}

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

  void fit(transport::FitRequest r, std::function<void(RemoteFitAnswer)> handler) {
    asio::post(strand_,
               [self = shared_from_this(), r = std::move(r), h = std::move(handler)]() mutable {
                 transport::ClientActions actions;
                 self->session_.fit(std::move(r), std::move(h), actions);
                 self->perform(actions);
               });
  }

  RemoteStatus status() const {
    std::lock_guard lock(status_mu_);
    return status_;
  }

  RemoteCounters counters() const { return session_.counters(); }

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

  void set_status(const RemoteStatus& s) {
    {
      std::lock_guard lock(status_mu_);
      if (stopped()) return;
      status_ = s;
    }
    if (on_status) invoke([&] { on_status(s); });
  }

  /// Does what the session asked, in order. Returns the reason of a Drop, if one came.
  std::optional<std::string> perform(transport::ClientActions& actions) {
    namespace act = transport::client_action;
    std::optional<std::string> drop;
    for (auto& a : actions) {
      if (auto* send_action = std::get_if<act::Send>(&a)) {
        send(std::move(send_action->message));
      } else if (auto* snapshot = std::get_if<act::Snapshot>(&a)) {
        if (on_snapshot) invoke([&] { on_snapshot(snapshot->snapshot); });
      } else if (auto* gap = std::get_if<act::GapFound>(&a)) {
        if (on_gap) invoke([&] { on_gap(gap->gap); });
      } else if (auto* hello = std::get_if<act::HelloReceived>(&a)) {
        if (on_hello) invoke([&] { on_hello(hello->hello); });
      } else if (auto* event = std::get_if<act::Event>(&a)) {
        if (on_event) invoke([&] { on_event(event->event); });
      } else if (auto* status = std::get_if<act::Status>(&a)) {
        set_status(status->status);
      } else if (auto* answer = std::get_if<act::FitAnswer>(&a)) {
        invoke([&] { answer->handler(std::move(answer->answer)); });
      } else if (auto* d = std::get_if<act::Drop>(&a)) {
        drop = std::move(d->reason);
      }
    }
    return drop;
  }

  asio::awaitable<void> run(std::shared_ptr<Impl> /*keep_alive*/) {
    while (!stopped()) {
      set_status(session_.connecting());
      const std::string reason = co_await connection();
      if (stopped()) break;
      const RemoteStatus s = session_.retry(reason);
      set_status(s);
      retry_timer_.expires_after(s.retry_in);
      error_code ec;
      co_await retry_timer_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    }
  }

  /// One connection, from connect to its end. Returns why it ended.
  asio::awaitable<std::string> connection() {
    transport::RemoteConnectionOptions co;
    co.token = options_.token;
    co.tls = tls_;
    co.idle_timeout = options_.idle_timeout;
    co.max_message_bytes = options_.max_message_bytes;
    auto conn = transport::make_remote_connection(strand_, url_, co);
    conn_ = conn;
    session_.opened();
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
    transport::ClientActions actions;
    while (!ec && !stopped()) {
      std::string_view text;
      ec = co_await conn->read(text);
      if (ec) {
        reason = session_.read_failed(describe(ec, *conn));
        break;
      }
      if (stopped()) break;
      actions.clear();
      session_.received(text, actions);
      flags->subscribed = session_.subscribed();
      if (auto drop = perform(actions)) {
        reason = std::move(*drop);
        break;
      }
      if (flags->subscribed) deadline_.cancel();
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
    actions.clear();
    session_.closed(reason, actions);
    perform(actions);
    co_return reason;
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

  asio::strand<asio::any_io_executor> strand_;
  RemoteSubscriberOptions options_;
  transport::RemoteUrl url_;
  std::shared_ptr<asio::ssl::context> tls_;  // tls:// and wss://: shared by every connection

  // strand
  asio::steady_timer retry_timer_;
  asio::steady_timer deadline_;
  std::shared_ptr<RemoteConnection> conn_;
  std::deque<std::string> outbox_;  // messages waiting for the write in flight
  bool writing_ = false;
  std::string write_error_;           // why a write failed (ends the session)
  transport::ClientSession session_;  // counters() also from any thread

  // any thread
  std::mutex cb_mu_;
  std::condition_variable cb_cv_;
  std::atomic<bool> stopped_{false};
  bool started_ = false;
  bool in_callback_ = false;
  std::thread::id cb_thread_;

  mutable std::mutex status_mu_;
  RemoteStatus status_;
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
  impl_->fit(transport::FitRequest{bytes, limit, {}, {}, {}}, std::move(handler));
}

void RemoteSubscriber::fit(std::uint64_t bytes, const FitOptions& options,
                           std::function<void(RemoteFitAnswer)> handler, std::size_t limit) {
  transport::FitRequest r{bytes, limit, {}, options.exclude, {}};
  r.fatal_event_window_s = static_cast<std::uint64_t>(
      std::clamp(options.fatal_event_window, std::chrono::seconds{0}, kMaxFatalEventWindow)
          .count());
  impl_->fit(std::move(r), std::move(handler));
}
void RemoteSubscriber::start() { impl_->start(); }
void RemoteSubscriber::stop() { impl_->stop(); }
RemoteStatus RemoteSubscriber::status() const { return impl_->status(); }
RemoteCounters RemoteSubscriber::counters() const { return impl_->counters(); }

}  // namespace gpustream
