// gpustream/transport/fleet_codec.hpp — the compact bus encoding of the fleet (docs/fleet.md,
// docs/protocol.md "Fleet bus messages").
//
//   gpustream::transport::BusEncoder enc("node-7");       // one per agent
//   nats_publish(subject, enc.encode(snapshot));           // full every 10th, deltas between
//
//   gpustream::transport::BusDecoder dec;                  // one per consumer
//   if (auto d = dec.decode(bytes)) use(d->snapshot);      // d->snapshot.node == "node-7"
//
// A bus message is one header line then a body:
//
//   GSB1 <f|d> <z|p> <node> <probe> <epoch> <seq> <base> <body_bytes> <agent>\n<body>
//
// `f` (full): the body is the gpustream/1 snapshot JSON (docs/protocol.md), node included.
// `d` (delta): the body is a patch of that JSON against the full message `base` of the same
// stream (node, probe, epoch): only what changed since that full. Deltas are taken against the
// last full, not the previous delta, so a lost delta costs nothing, and a consumer that joins
// mid-stream rebuilds the full state from the next full message or from the last full kept in
// the key-value bucket. `z`: the body is raw-deflated (RFC 1951), `p`: plain. `epoch` is a
// random id of the encoder (an agent restart starts a new stream), `seq` counts the stream's
// messages from 1, `body_bytes` is the body's size once inflated.
//
// The patch form: an object whose keys are the changed keys (array indexes as decimal strings
// when an array kept its length); each value is `[v]` (the new value), `null` (key removed) or a
// nested patch object.
//
// Decoding is bounded: a message longer than BusLimits::max_message_bytes, a header that does not
// parse, a patch that does not apply or a snapshot that does not decode is a BusError — never a
// crash. A compressed body inflates to at most
//   min(header body_bytes, max_body_bytes, max_inflation_ratio × its compressed bytes)
// (default 64: a 1 MiB message at most 8 MiB, an 8 KB one at most 512 KiB); a header declaring
// more is refused from the header alone, and inflation (libdeflate's, into a buffer of exactly the
// declared size) stops where the stream would go past it, so a deflate bomb costs at most one
// pass over that bound. A snapshot may carry at most
// max_devices devices and max_processes processes (devices' and the host's together), counted
// on the JSON document before it becomes a snapshot, for a full and after applying a delta.
// The kept base of a stream is the last full's snapshot when its document is exactly as this
// release writes that snapshot (every agent of this format: the decoder compares the texts);
// a delta is then read onto a copy of it, only the paths its patch names
// (gpustream/detail/json_patch.hpp): it costs O(patch) plus the copy, which is the snapshot it
// returns, and a refused delta never touched the base. Any other document (another producer's
// spelling, keys this reader ignores) is kept as the document, and a delta is applied to it in
// place with an undo record, converted, then undone: O(patch) plus the conversion of the base.
// Either way BusDecoder::cost_bytes counts the base. What a decoder keeps is bounded too: at
// most max_streams streams and max_state_bytes of them together (the stream heard from longest
// ago is evicted first).
//
// Sequence rule, per (node, probe) stream, so that a replay cannot freeze a stream: a message
// of the stream's epoch whose seq is <= the last taken is dropped (stale()); one whose seq is more
// than seq_window past the last taken is a jump, dropped (jumps()) and never taken as-is. After
// resync_after consecutive drops of that stream (stale or jump), its next full message is taken
// whatever its seq and rebases the stream (resyncs()) — if its snapshot is newer than the newest
// the stream has taken, and not more than resync_max_future ahead of this machine's clock: an
// agent whose sequence really moved (or that an attacker's forged seq got ahead of) is back
// within a few messages and a full, while a replayed message — however often repeated — is never
// taken (its time is not newer: old values are never shown as current), and a single forged one
// moves nothing. A new epoch starts a new stream; only a full
// starts it (deltas of an epoch not seen wait, waiting()); the stream remembers the last 4 epochs
// it left, whose messages (late after an agent restart, or replayed) are dropped as stale and
// count as drops. All of it is decided from the header, before inflating: a dropped message
// costs a header parse. What it does not stop (a publisher that may speak as the node can): a
// full of a new epoch, or any full sent after resync_after drops, is taken, and holds until the
// agent's next full and resync_after of its messages (or, when the forger dated it ahead, until
// the agent's clock passes that time: at most resync_max_future; the view shows the stream stale
// meanwhile).
//
// Thread safety: an encoder or a decoder is used by one thread at a time; distinct ones are
// independent.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/json/value.hpp>

#include "gpustream/model.hpp"

namespace gpustream::transport {

inline constexpr std::string_view kBusMagic = "GSB1";

/// Why a bus message was refused (BusError::reason(), BusDecoderCounters).
enum class BusRefusal {
  malformed,         // a header, body, patch or snapshot that does not parse or apply
  too_large,         // over max_message_bytes or max_body_bytes
  inflation,         // a body declared (or inflating) past max_inflation_ratio × its bytes
  too_many_devices,  // over max_devices or max_processes
  too_many_streams,  // a new stream beyond max_streams
};

/// A malformed, oversized or inapplicable bus message.
class BusError : public std::runtime_error {
 public:
  explicit BusError(const std::string& what, BusRefusal reason = BusRefusal::malformed)
      : std::runtime_error(what), reason_(reason) {}
  explicit BusError(const char* what, BusRefusal reason = BusRefusal::malformed)
      : std::runtime_error(what), reason_(reason) {}
  BusRefusal reason() const noexcept { return reason_; }

 private:
  BusRefusal reason_;
};

/// Why `name` cannot be a node name, or nullopt when it can: 1 to 64 characters of
/// [A-Za-z0-9_-] (a NATS subject token and a key-value key, with no wildcard or separator).
std::optional<std::string> node_name_error(std::string_view name);
/// This machine's host name made a valid node name (other characters become '_', cut at 64).
std::string default_node_name();

struct BusLimits {
  std::size_t max_message_bytes = 1024 * 1024;   // one message as received
  std::size_t max_body_bytes = 8 * 1024 * 1024;  // its body once inflated
  std::size_t max_streams = 100000;              // (node, probe) streams a decoder keeps
  /// Bytes the kept streams may hold together (their base snapshots' approx_bytes or base
  /// documents as allocated, keys and bookkeeping). Beyond it the stream heard from longest ago is
  /// evicted: it rebuilds from its next full message. A single full message bigger than this is
  /// decoded but not kept.
  std::size_t max_state_bytes = std::size_t{512} << 20;
  /// A compressed body inflates to at most this many times its compressed bytes.
  std::size_t max_inflation_ratio = 64;
  std::size_t max_devices = 1024;     // devices in one snapshot
  std::size_t max_processes = 16384;  // processes in one snapshot: all devices' and the host's
  /// A seq more than this past the stream's last is a jump: dropped, counted in jumps().
  std::uint64_t seq_window = 4096;
  /// After this many consecutive drops (stale or jump) of a stream, its next full is taken
  /// whatever its seq (a resync).
  std::uint32_t resync_after = 3;
  /// A resync's snapshot may be dated at most this far (ns) ahead of this machine's wall clock.
  std::int64_t resync_max_future_ns = 60'000'000'000;
};

/// The header line of a bus message.
struct BusHeader {
  bool full = false;
  bool compressed = false;
  std::string node;
  std::string probe;  // the probe's name as a subject token
  std::uint64_t epoch = 0;
  std::uint64_t seq = 0;
  std::uint64_t base = 0;  // the full message a delta applies to (a full: its own seq)
  std::size_t body_bytes = 0;
  std::string agent;  // the agent's version, e.g. "gpustream/0.1.0"
};

/// Parses the header line of `message`; throws BusError (a declared body over max_body_bytes or,
/// compressed, over max_inflation_ratio × the bytes after the header, is refused here).
BusHeader parse_bus_header(std::string_view message, const BusLimits& limits = {});

struct BusEncoderOptions {
  std::uint32_t full_every = 10;  // one message in this many is a full snapshot (1: all)
  bool compress = true;           // raw deflate of the body
  int level = 6;                  // deflate level 1..9
  /// A body that deflates more than this many times over is sent plain: decoders refuse it
  /// compressed (BusLimits::max_inflation_ratio, the same default).
  std::size_t max_inflation_ratio = 64;
};

/// Encodes one agent's snapshots: a stream per probe.
class BusEncoder {
 public:
  /// `node` must be a valid node name (throws std::invalid_argument otherwise).
  explicit BusEncoder(std::string node, std::string agent = {}, BusEncoderOptions options = {});

  /// The message for `s` (its node is set to this encoder's). Throws what the JSON encoder throws.
  const std::string& encode(const GpuSnapshot& s);
  /// The next message of every stream is a full one (after a reconnect: a consumer that lost its
  /// state rebuilds it from the next message rather than after full_every).
  void force_full() noexcept {
    for (auto& entry : streams_) entry.second.base = 0;
  }
  /// Whether the last encode() produced a full message.
  bool last_was_full() const noexcept { return last_full_; }
  /// The last full message of each probe's stream (probe token → message): the node's state.
  const std::map<std::string, std::string>& last_fulls() const noexcept { return fulls_; }
  const std::string& node() const noexcept { return node_; }

 private:
  struct Stream {
    std::uint64_t seq = 0;
    std::uint64_t base = 0;
    boost::json::value base_doc;  // the last full, as a consumer parses it
  };
  std::string node_;
  std::string agent_;
  BusEncoderOptions options_;
  std::uint64_t epoch_;
  std::map<std::string, Stream> streams_;
  std::map<std::string, std::string> fulls_;
  std::string out_;
  std::string body_;
  std::string packed_;
  bool last_full_ = false;
};

/// What a BusDecoder dropped or refused, by reason (each message counts once).
struct BusDecoderCounters {
  std::uint64_t waiting = 0;           // deltas of a full not seen (joined mid-stream)
  std::uint64_t stale = 0;             // seq <= the stream's last, or an epoch it left
  std::uint64_t jumps = 0;             // seq > the stream's last + seq_window
  std::uint64_t resyncs = 0;           // fulls taken after resync_after consecutive drops
  std::uint64_t too_large = 0;         // BusRefusal::too_large
  std::uint64_t inflation = 0;         // BusRefusal::inflation
  std::uint64_t too_many_devices = 0;  // BusRefusal::too_many_devices (devices or processes)
  std::uint64_t too_many_streams = 0;  // BusRefusal::too_many_streams
  std::uint64_t malformed = 0;         // BusRefusal::malformed
  std::uint64_t evicted = 0;           // streams evicted, fulls too big to keep
};

namespace detail {
class BusArena;  // fleet_codec.cpp: a bump allocator for JSON documents
}

/// Decodes the bus: keeps the last full message of each stream to apply deltas to, as its
/// snapshot (the file comment) or, for a document this release would not write, as the
/// document in an arena of its own (one block sized to it: no allocator header per key and
/// object); a message's body is parsed into the decoder's scratch arena (reused, nothing
/// allocated per message below 256 KiB of parsed document).
class BusDecoder {
 public:
  struct Decoded {
    BusHeader header;
    GpuSnapshot snapshot;  // snapshot.node == header.node
  };
  explicit BusDecoder(BusLimits limits = {});
  ~BusDecoder();
  BusDecoder(const BusDecoder&) = delete;
  BusDecoder& operator=(const BusDecoder&) = delete;
  BusDecoder(BusDecoder&&) noexcept;
  BusDecoder& operator=(BusDecoder&&) noexcept;

  /// The snapshot `message` carries. nullopt: a delta whose full this decoder has not seen (the
  /// consumer joined mid-stream; counted in waiting()), or a message the sequence rule drops
  /// (the file comment; counted in stale() or jumps()). Throws BusError on anything malformed or
  /// over a limit, counted by BusError::reason() in counters().
  std::optional<Decoded> decode(std::string_view message);
  /// What decoding a message with header `h` costs, known before decoding it: its inflated body
  /// bytes plus, for a delta, the bytes of the kept base it applies to (copying the base
  /// snapshot, or converting the patched base document, walks all of it; 0 when this decoder
  /// has no such base: the delta would wait). The view's decode budget charges these before
  /// decoding (measured, BM_BusDeltaOnBigBase in docs/benchmarks.md: a tiny delta on a
  /// 1,000-device base of 4 MB of JSON costs ≈ 0.3 ms kept as its snapshot, ≈ 5 ms as the
  /// document).
  std::size_t cost_bytes(const BusHeader& h) const;
  /// Drops the streams of `node` (it is gone).
  void forget(std::string_view node);

  std::uint64_t waiting() const noexcept { return counters_.waiting; }
  std::uint64_t stale() const noexcept { return counters_.stale; }
  std::uint64_t jumps() const noexcept { return counters_.jumps; }
  std::uint64_t resyncs() const noexcept { return counters_.resyncs; }
  const BusDecoderCounters& counters() const noexcept { return counters_; }
  const BusLimits& limits() const noexcept { return limits_; }
  std::size_t streams() const noexcept { return streams_.size(); }
  /// Bytes the kept streams hold now (at most BusLimits::max_state_bytes).
  std::size_t state_bytes() const noexcept { return state_bytes_; }
  /// Streams evicted to stay within max_state_bytes, and full messages too big to keep.
  std::uint64_t evicted() const noexcept { return counters_.evicted; }

 private:
  using Key = std::pair<std::string, std::string>;  // (node, probe)
  static constexpr std::size_t kRetiredEpochs = 4;
  struct Stream {
    std::uint64_t epoch = 0;
    /// The epochs it had before (newest first; 0: none): their messages are old.
    std::array<std::uint64_t, kRetiredEpochs> retired{};
    std::uint64_t base = 0;
    std::uint64_t last_seq = 0;
    std::uint32_t dropped = 0;           // consecutive messages dropped by the sequence rule
    std::int64_t newest_ns = INT64_MIN;  // the newest time_unix_ns taken (a resync must pass it)
    std::uint64_t tick = 0;              // when a message of it was last taken (the eviction order)
    std::size_t bytes = 0;               // what it holds: its base as counted, key, bookkeeping
    std::size_t fixed_bytes = 0;         // of which key and bookkeeping
    std::shared_ptr<std::size_t> doc_bytes;  // base_doc's arena's bytes, as they change
    std::size_t kept_bytes = 0;              // *doc_bytes when it was kept (or compacted)
    boost::json::value base_doc;             // allocated from its own arena; null when:
    /// the last full's snapshot, when its document was as this release writes it (the bytes
    /// are its approx_bytes); deltas are applied to a copy of it, base_doc is not kept.
    std::unique_ptr<const GpuSnapshot> base_snapshot;
  };
  using Streams = std::map<Key, Stream, std::less<>>;
  void touch(Streams::iterator it);
  void erase(Streams::iterator it);
  /// Stores `doc` as the base of `key`'s stream, evicting the stalest others to make room.
  /// Returns the stream, or streams_.end() when `doc` alone is over max_state_bytes.
  /// `snapshot`: doc's snapshot, kept instead of doc when set (doc is as this release writes
  /// it, so deltas patch a copy of the snapshot).
  Streams::iterator keep(const Key& key, Streams::iterator it, const boost::json::value& doc,
                         std::unique_ptr<const GpuSnapshot> snapshot);
  /// base_doc copied into a new arena of the size it was kept with, when patches undone since
  /// then left more than as much again in its arena (they are not freed one by one), or `now`.
  void compact(Streams::iterator it, bool now = false);
  /// Re-counts the bytes of `it` (an in-place patch may have grown its containers), evicting the
  /// stalest others when over max_state_bytes.
  void recount(Streams::iterator it);
  std::optional<Decoded> decode_counted(std::string_view message);

  BusLimits limits_;
  Streams streams_;
  std::map<std::uint64_t, const Key*> by_tick_;  // oldest first
  std::uint64_t next_tick_ = 0;
  std::size_t state_bytes_ = 0;
  BusDecoderCounters counters_;
  std::unique_ptr<detail::BusArena> scratch_;  // the message's parsed body, reset after each
};

/// A node's state as kept in the key-value bucket: the last full message of each of its probes,
/// "GSK1 <count>\n" then, for each, "<bytes>\n<message>".
std::string encode_node_state(const std::map<std::string, std::string>& fulls);
/// The messages of a node state; throws BusError when malformed or over limits.max_message_bytes
/// per message (at most 64 messages).
std::vector<std::string_view> decode_node_state(std::string_view state,
                                                const BusLimits& limits = {});

/// The patch that turns `from` into `to` (see the file comment); nullopt when they are equal.
std::optional<boost::json::value> json_diff(const boost::json::value& from,
                                            const boost::json::value& to);
/// Applies `patch` to `doc` in place; throws BusError when it does not fit `doc`.
void json_patch(boost::json::value& doc, const boost::json::value& patch);

}  // namespace gpustream::transport
