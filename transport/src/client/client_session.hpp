// The protocol side of RemoteSubscriber, with no I/O: a state machine fed with what happened
// (a connection opened, a message arrived, the connection ended, a fit was asked for) that
// answers with what to do (send a message, deliver a snapshot/gap/hello/event, report a status,
// answer a fit, drop the connection) and when to try again. RemoteSubscriber's Impl is the I/O
// shell around it: sockets, timers, the strand and the user's callbacks.
//
// What it owns: the resume point (the last sequence delivered, or skipped by a gap) and the
// server instance it refers to, the subscribe sent after each hello, the filtering of what
// arrives before the server acknowledged the subscribe, the duplicate check, the fit queries in
// flight (matched to their answers by id), the reconnect backoff and the counters.
//
// Thread safety: one thread (or strand) drives it; counters() may be read from any thread.
// Cancellation: none of its own (it waits for nothing); the shell stops feeding it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "gpustream/transport/remote_subscriber.hpp"

namespace gpustream::transport {

/// fit() queries waiting for their answer, at most (a caller that never waits cannot grow it).
inline constexpr std::size_t kMaxFitsInFlight = 64;

using FitHandler = std::function<void(RemoteFitAnswer)>;

/// What the shell is asked to do, in order.
namespace client_action {
struct Send {  // write this message on the connection
  std::string message;
};
struct Snapshot {  // on_snapshot
  SnapshotPtr snapshot;
};
struct GapFound {  // on_gap
  Gap gap;
};
struct HelloReceived {  // on_hello
  Hello hello;
};
struct Event {  // on_event
  EventPtr event;
};
struct Status {  // the state changed (on_status)
  RemoteStatus status;
};
struct FitAnswer {  // call `handler` with `answer`
  FitHandler handler;
  RemoteFitAnswer answer;
};
struct Drop {  // close the connection: the session is over (`reason` says why)
  std::string reason;
};
}  // namespace client_action

using ClientAction =
    std::variant<client_action::Send, client_action::Snapshot, client_action::GapFound,
                 client_action::HelloReceived, client_action::Event, client_action::Status,
                 client_action::FitAnswer, client_action::Drop>;
using ClientActions = std::vector<ClientAction>;

class ClientSession {
 public:
  /// `options`: the filters, `since` and the reconnect delays (the rest is the shell's).
  /// `seed` drives the backoff's jitter.
  explicit ClientSession(RemoteSubscriberOptions options, std::uint32_t seed = 1);

  /// The status to report before an attempt to connect.
  RemoteStatus connecting() const;
  /// A connection is being opened: its messages follow.
  void opened();
  /// One message received. Appends what to do to `out`; a Drop comes last.
  void received(std::string_view text, ClientActions& out);
  /// The reason of a failed read: the server's last error when it sent one before closing.
  std::string read_failed(std::string description) const;
  /// The connection ended (for `reason`): the fits in flight are answered with an error.
  void closed(const std::string& reason, ClientActions& out);
  /// After closed(), unless stopped: the status to report, whose retry_in is the delay before
  /// the next attempt (backoff from reconnect_initial, doubling per failure up to
  /// reconnect_max, ±20% jitter; a connection that was subscribed starts again at 1 attempt).
  RemoteStatus retry(const std::string& reason);

  /// A fit query: sent once this connection's hello arrived (also before the subscribe is
  /// acknowledged: a fit from on_hello is sent after the subscribe) and when the server
  /// supports it, otherwise refused at once (the FitAnswer in `out`). `r.id` is set here.
  void fit(FitRequest r, FitHandler handler, ClientActions& out);
  void fit(std::uint64_t bytes, std::size_t limit, FitHandler handler, ClientActions& out) {
    fit(FitRequest{bytes, limit, {}, {}, {}}, std::move(handler), out);
  }

  /// The server acknowledged the subscribe of the current connection.
  bool subscribed() const noexcept { return subscribed_; }
  /// The last sequence delivered (or skipped by a gap); nullopt: none yet and no `since`.
  std::optional<std::uint64_t> resume() const noexcept { return resume_; }
  std::size_t fits_in_flight() const noexcept { return fits_.size(); }
  /// The backoff before the attempt after `attempts` failures, without jitter.
  std::chrono::milliseconds backoff_base(unsigned attempts) const;

  RemoteCounters counters() const;

 private:
  void on_hello(const Hello& h, ClientActions& out);
  void on_subscribed(const Subscribed& s, ClientActions& out);
  void on_error(const ServerError& e, ClientActions& out);
  void on_other(std::string_view text, ClientActions& out);
  void on_snapshot(GpuSnapshot snapshot, ClientActions& out);
  void on_gap(Gap g, ClientActions& out);
  void server_restarted(ClientActions& out);
  void decode_error(const std::string& what);
  bool event_wanted(const GpuEvent& e) const;
  bool filter_locally(GpuSnapshot& s) const;
  FitHandler take_fit(const std::string& id);
  FitHandler take_fit_for_error(const ServerError& e);

  RemoteSubscriberOptions options_;
  std::string log_url_;  // options_.url without credentials: the only form that is logged
  std::minstd_rand rng_;

  bool open_ = false;                    // between opened() and closed()
  bool subscribed_ = false;              // this connection's subscribe was acknowledged
  bool awaiting_ack_ = true;             // no acknowledgement yet on this connection
  bool hello_seen_ = false;              // this connection's hello arrived
  bool preview_ok_ = false;              // snapshots before the ack are ours to deliver
  unsigned attempts_ = 0;                // failed attempts since the last subscribed one
  std::string instance_;                 // the server instance resume_ refers to
  std::optional<std::uint64_t> resume_;  // the last sequence delivered (or skipped by a gap)
  std::string server_error_;             // the server's last error on this connection
  std::string warned_key_;               // the LogOnce key of the last disconnection warning
  struct PendingFit {
    std::string id;
    FitHandler handler;
  };
  std::deque<PendingFit> fits_;  // at most kMaxFitsInFlight
  std::string fit_unsupported_;  // the connection's hello lists no `fit`: why fit() fails
  std::uint64_t fit_ids_ = 0;

  std::atomic<std::uint64_t> connections_{0}, snapshots_{0}, duplicates_{0}, gaps_{0},
      decode_errors_{0}, last_sequence_{0}, events_{0};
};

}  // namespace gpustream::transport
