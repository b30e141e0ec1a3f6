// fleet/fleet_view_impl.hpp — FleetView's state, shared by its files (private):
// fleet_view.cpp (the delivery side, the decode worker, the sweep, the public members),
// fleet_view_nats.cpp (the NATS connection, its callbacks and the subscription) and
// fleet_view_bucket.cpp (the key-value bucket: created when missing, read).
//
// Threads: the view's worker thread reads the NATS sockets itself (libnats's external event loop,
// fleet/nats_event_loop.hpp: no libnats reader thread), takes each bus message from its
// (synchronous) NATS subscription, runs deliver() on it, and runs process() (as
// process_pending()'s caller does in tests), one at a time (worker_mu). libnats's callback thread
// runs the connection's
// callbacks (lost, back, closed, errors), which only count, log and wake kv_thread; the bucket
// (its creation, its reads: at start and after each reconnect) runs on kv_thread; the sweep on
// the strand. `mu` guards the table, the stats and pending_forget and is held briefly, never
// while decoding; the decoder is the worker's alone.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <nats/nats.h>
#include <spdlog/fmt/fmt.h>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include "fleet/fleet_intake.hpp"
#include "fleet/nats_event_loop.hpp"
#include "gpustream/log.hpp"
#include "gpustream/transport/fleet.hpp"

namespace gpustream::transport {

/// How long the worker, having decoded all it had while messages keep coming, leaves the sockets
/// unread to let more gather before it reads them again: it adds at most this to a message's
/// staleness, and a steady flow of messages costs a wake-up and a read per batch rather than per
/// message.
inline constexpr std::chrono::milliseconds kBusGather{2};
/// The longest the worker waits for the sockets when nothing is queued, before it looks at the
/// intake again (the bucket's entries, queued by kv_thread, do not wake it).
inline constexpr std::chrono::milliseconds kBusIdleWait{20};
/// The most bus messages the worker takes from libnats between two decodes (a flood is refused
/// a message at a time without holding up the decoding for long).
inline constexpr std::size_t kBusPullMax = 256;
/// Taken messages are destroyed together (libnats's garbage collector thread, when it runs on
/// another core, is woken once for them): before the worker sleeps, or once this many, or this
/// many bytes of data, are held.
inline constexpr std::size_t kBusSpentMax = 64;
inline constexpr std::size_t kBusSpentMaxBytes = std::size_t{1} << 20;
/// The most decoded messages whose snapshots wait for the worker to wake the channel's
/// subscribers (detail::DeferredWakes): a streaming client sees a snapshot at most this many
/// decodes late (about 2 ms at 8 GPUs a node), never later than the worker's next pause.
inline constexpr std::size_t kPublishBatch = 32;

struct FleetView::Impl : std::enable_shared_from_this<Impl> {
  using asio_strand = boost::asio::strand<boost::asio::any_io_executor>;
  using Clock = NodeTable::Clock;

  Impl(const boost::asio::any_io_executor& ex, SnapshotChannel& ch, FleetOptions o);

  asio_strand strand;
  SnapshotChannel& channel;
  FleetOptions options;
  std::function<Clock::time_point()> clock;
  std::function<std::chrono::nanoseconds()> cpu_clock;

  // The delivery side (any thread): counters and the publishers' queues.
  std::atomic<std::uint64_t> messages{0}, bytes{0}, decode_cpu_ns{0};
  std::array<std::atomic<std::uint64_t>, kFleetRefusalCount> refused;
  std::array<std::atomic<bool>, kFleetRefusalCount> logged;  // each reason is logged once
  PublisherIntake intake;

  // The worker side: one runner at a time (the worker thread, or process_pending()).
  std::mutex worker_mu;
  BusDecoder decoder;

  mutable std::mutex mu;  // table, st, pending_forget; held briefly, never while decoding
  NodeTable table;
  FleetStats st;
  std::vector<std::string> pending_forget;  // gone nodes whose decoder streams are to go
  std::condition_variable idle_cv;          // the bucket read and every entry of it handled

  std::thread worker;
  std::thread kv_thread;
  std::mutex kv_mu;
  kvWatcher* watcher = nullptr;      // under kv_mu: stop() stops it
  std::condition_variable kv_cv;     // kv_again, a new identity, or stopping
  bool kv_again = false;             // under kv_mu: NATS is back, see to the bucket again
  std::optional<NatsAuth> new_auth;  // under kv_mu: set_auth()'s, for kv_thread to connect with
  NatsAuth auth;                     // under kv_mu: the identity in use (inbox prefix filled)
  // Streams (node, probe) whose base this view missed (a delta came of a full it never got:
  // e.g. the agent's full after a reconnect, sent while this view was still disconnected):
  // their node's state is fetched from the bucket, where each agent puts its last fulls after
  // each full, rather than waiting up to full_every messages for the next. Under kv_mu; at most
  // kMaxBasesWanted waiting, each stream fetched at most once a reconnect_wait.
  static constexpr std::size_t kMaxBasesWanted = 1024;
  std::set<std::pair<std::string, std::string>> bases_wanted;
  std::map<std::pair<std::string, std::string>, std::chrono::steady_clock::time_point>
      bases_fetched;  // when each was last wanted (pruned past a reconnect_wait)
  // kv_thread's own: the last bucket problem and config difference logged (each said once,
  // again only when it changes).
  std::string kv_problem_logged;
  std::string kv_config_logged;

  // The connection's state (set by libnats's callbacks).
  std::atomic<std::uint64_t> outages{0}, reconnects{0}, kv_created{0}, kv_rereads{0};
  std::atomic<std::uint64_t> kv_base_fetches{0};  // node states fetched for a missed base
  std::atomic<std::uint64_t> auth_reloads{0}, auth_reload_failures{0};
  std::atomic<bool> in_outage{false};
  std::atomic<bool> is_connected{false};    // the current connection's, from its callbacks
  std::atomic<std::int64_t> lost_at_ns{0};  // steady clock, when the outage began
  std::mutex closed_mu;
  std::condition_variable closed_cv;
  std::vector<natsConnection*> closed_conns;  // under closed_mu: their closed callback ran
  std::mutex errors_mu;
  std::vector<int> errors_logged;  // under errors_mu: asynchronous errors logged, by status
  std::atomic<bool> stopping{false};
  std::atomic<bool> kv_done{false};
  std::atomic<bool> sweep_posted{false};
  std::atomic<bool> kv_reported{false};
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();

  // The current connection and its subscription: replaced only by kv_thread (a new identity,
  // set_auth()), under conn_mu; stop() takes conn_mu too. Callbacks of any other connection
  // (the one being replaced, or the new one before it is current) are ignored.
  std::mutex conn_mu;
  std::atomic<natsConnection*> nc{nullptr};
  // The bus's subscription, synchronous: only the worker takes its messages, with bus_mu held
  // (so that kv_thread and stop() swap or destroy it only between two of the worker's calls).
  // The worker never waits with bus_mu held (it waits in bus_loop.poll()): released for a
  // moment between two long holds, the mutex went back to the worker each time before a woken
  // kv_thread ran, and a credentials change starved while the bus was idle (session 17).
  std::mutex bus_mu;
  natsSubscription* sub = nullptr;  // under bus_mu
  // Every connection's sockets, read and written by the worker (the loop's owner). It goes on
  // reading after `stopping` (a request of kv_thread, a drain, may still wait for a reply) until
  // stop() has closed the connection and sets loop_done.
  NatsEventLoop bus_loop;
  std::atomic<bool> loop_done{false};
  std::chrono::steady_clock::time_point last_read;  // the worker's: its last read of the sockets
  // The worker's: messages delivered (their bytes copied into the intake or refused) and not yet
  // destroyed, at most kBusSpentMax of them and kBusSpentMaxBytes (their data).
  std::vector<natsMsg*> bus_spent;
  std::size_t bus_spent_bytes = 0;
  boost::asio::steady_timer timer;
  bool stopped = false;

  /// Counts a refusal and logs its reason once. `detail` is a callable giving the log line's
  /// detail: called for the first refusal of each reason only (a flood costs a count).
  template <class Detail>
  void refuse(FleetRefusal r, std::string_view node, Detail&& detail) {
    const auto i = static_cast<std::size_t>(r);
    ++refused[i];
    if (logged[i].exchange(true)) return;
    const auto reason = to_string(r);
    if (r == FleetRefusal::node_table_full)
      logger()->warn(
          "fleet: the node table is full ({} nodes, --max-nodes, none gone): the messages of a "
          "new node ('{}' first) are refused and counted (gpustream_fleet_nodes_refused_total) "
          "until a node is gone; logged once",
          options.max_nodes, node);
    else
      logger()->warn(
          "fleet: a message of node '{}' was refused ({}): {} (counted in "
          "gpustream_fleet_messages_refused_total{{reason=\"{}\"}}; logged once per reason)",
          node, reason, std::string(detail()), reason);
  }
  void refuse(FleetRefusal r, std::string_view node, const char* detail) {
    refuse(r, node, [detail] { return detail; });
  }

  /// Charges the CPU time of a decode to its publisher, however the decode ends.
  struct CpuMeter {
    Impl& self;
    const std::string& node;
    std::chrono::nanoseconds start;
    CpuMeter(Impl& s, const std::string& n) : self(s), node(n), start(s.cpu_clock()) {}
    ~CpuMeter() {
      const auto used = std::max(std::chrono::nanoseconds(0), self.cpu_clock() - start);
      self.decode_cpu_ns += static_cast<std::uint64_t>(used.count());
      self.intake.charge_cpu(node, used);
    }
  };

  // fleet_view.cpp: the delivery side (any thread; nothing decoded, nothing kept of a refusal).
  void deliver(std::string_view data, std::string_view subject, std::string_view republished_by);
  void admit(std::string_view data, IntakeItem&& item);
  // The worker side (worker_mu held).
  void apply_forgets();
  bool within_budget(const IntakeItem& item, std::size_t cost, Clock::time_point now);
  void process(const IntakeItem& item);
  bool run_one(std::optional<IntakeItem> item);
  void report_bucket();
  void run_worker();
  std::size_t pull_bus(std::size_t at_most);  // the worker: what libnats holds, without waiting
  bool wait_for_bus();                        // the worker: reads, waiting up to kBusIdleWait
  void gather_bus();                          // the worker: kBusGather unread, then reads
  void read_bus_if_due();                     // the worker, decoding: reads every kBusGather
  // The sweep (the strand).
  void post_sweep();
  void sweep(Clock::time_point now);
  void sync_decoder_stats();  // mu held
  void arm();
  FleetStats st_copy() const;

  // fleet_view_nats.cpp: the connection, its callbacks, the subscription.
  void take_bus_message(natsMsg* m);  // the worker: deliver(), then into bus_spent
  void release_bus_messages();        // the worker: bus_spent destroyed
  static void on_disconnected(natsConnection* nc, void* closure);
  static void on_reconnected(natsConnection* nc, void* closure);
  static void on_closed(natsConnection* nc, void* closure);
  static void on_error(natsConnection* nc, natsSubscription* sub, natsStatus err, void* closure);
  bool connected() const;
  natsStatus connect(const NatsAuth& a, natsConnection** out, std::string& error);
  natsStatus subscribe(natsConnection* c, natsSubscription** out);
  void close_and_destroy(natsConnection* c);
  void change_identity(const NatsAuth& a);  // kv_thread
  void start();
  void stop();
  // fleet_view_bucket.cpp: the bucket, on kv_thread.
  void run_bucket();
  void see_to_bucket(bool again);
  kvStore* bind_bucket(jsCtx* js);
  void check_bucket_config(jsCtx* js);
  std::string admin_command() const;
  void bucket_problem(const std::string& text);
  bool load_node_state(std::string_view key, std::string_view value, std::int64_t written_ns,
                       Clock::time_point now, std::int64_t now_ns, bool again,
                       const std::set<std::string>* only_probes = nullptr);
  void want_base(const std::string& node, const std::string& probe);              // the worker
  void fetch_bases(const std::set<std::pair<std::string, std::string>>& wanted);  // kv_thread
  void load_kv_watch(kvStore* kv, bool again);
  void load_kv_key_by_key(kvStore* kv, bool again);
  void finish_kv();
  bool wait_for_bucket(std::chrono::milliseconds timeout);
};

}  // namespace gpustream::transport
