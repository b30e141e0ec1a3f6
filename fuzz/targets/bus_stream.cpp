// The fleet's bus decoder over a stream of messages (transport/src/fleet/fleet_codec.cpp): one
// BusDecoder takes, in order, what the input describes, one line an operation:
//   d<bytes>             the agent's next snapshot (changed as the bytes say), encoded (a full
//                        every 4th, deltas between) and decoded
//   r<n>                 a replay of the agent's n-th message so far (of any epoch)
//   s<n> <seq>           the n-th message with its seq (and a full's base) forged
//   p<json>              a raw delta against the stream's base, the line its patch
//   x<text>              a raw message ("\x01" in it stands for a newline)
//   e                    the agent restarts (a new epoch)
// so that the in-place patch and its undo (a patch refused half-way), the sequence rule
// (replays, jumps, resyncs) and the bounds are reached. Checked: only BusError escapes; whatever
// the agent's own message decodes to is exactly the snapshot it was made from, unless a message
// not of the agent's own making was taken as a full since its last full (a forged base); the kept
// state stays within its count and byte bounds.
#include <algorithm>
#include <charconv>
#include <string>
#include <vector>

#include "common.hpp"
#include "gpustream/json.hpp"
#include "gpustream/transport/fleet_codec.hpp"

namespace {

using gpustream::DeviceSample;
using gpustream::GpuSnapshot;
using gpustream::Metric;
using gpustream::Source;
using gpustream::transport::BusDecoder;
using gpustream::transport::BusEncoder;
using gpustream::transport::BusError;
using gpustream::transport::BusLimits;

BusLimits limits() {
  BusLimits l;
  l.max_message_bytes = 64 * 1024;
  l.max_body_bytes = 256 * 1024;
  l.max_streams = 4;
  l.max_state_bytes = 64 * 1024;
  l.max_devices = 12;
  l.max_processes = 24;
  l.seq_window = 16;
  l.resync_after = 2;
  return l;
}

GpuSnapshot start() {
  GpuSnapshot s;
  s.probe = "simulated";
  s.node = "node-1";
  s.sequence = 1;
  for (int i = 0; i < 2; ++i) {
    DeviceSample d;
    d.id = "d" + std::to_string(i);
    d.index = i;
    d.name = "gpu";
    d.metrics.set(Metric::power_watts, 100 + i, Source::simulated);
    s.devices.push_back(std::move(d));
  }
  return s;
}

/// The agent's next snapshot: each byte changes one thing (devices, processes, values, names).
void change(GpuSnapshot& s, std::string_view bytes) {
  ++s.sequence;
  for (const char ch : bytes) {
    const auto b = static_cast<unsigned char>(ch);
    const std::size_t n = s.devices.size();
    switch (b % 8) {
      case 0:
        if (n < 16) {
          DeviceSample d;
          d.id = "d" + std::to_string(n);
          d.index = static_cast<int>(n);
          s.devices.push_back(std::move(d));
        }
        break;
      case 1:
        if (n > 0) s.devices.pop_back();
        break;
      case 2:
        if (n > 0) s.devices[b / 8 % n].metrics.set(Metric::power_watts, b, Source::simulated);
        break;
      case 3:
        if (n > 0)
          s.devices[b / 8 % n].metrics.set_absent(Metric::power_watts,
                                                  gpustream::Absence::unsupported);
        break;
      case 4:
        if (n > 0) {
          gpustream::ProcessSample p;
          p.pid = b;
          p.name = "p";
          s.devices[b / 8 % n].processes.push_back(p);
        }
        break;
      case 5:
        if (n > 0) s.devices[b / 8 % n].processes.clear();
        break;
      case 6:
        if (n > 0) s.devices[b / 8 % n].name = std::string(b / 8 % 5, 'a' + b % 26);
        break;
      default:
        if (s.errors.size() < 4)
          s.errors.push_back({"x", std::string(1, 'a' + b % 26), ""});
        else
          s.errors.clear();
        break;
    }
  }
}

std::uint64_t number(std::string_view s) {
  std::uint64_t v = 0;
  std::from_chars(s.data(), s.data() + s.size(), v);
  return v;
}

struct Sent {
  std::string message;
  GpuSnapshot snapshot;
};

class Run {
 public:
  Run() : l_(limits()), dec_(l_) { restart(); }

  void line(std::string_view op) {
    if (op.empty()) return;
    const std::string_view arg = op.substr(1);
    switch (op[0]) {
      case 'd':
        change(snap_, arg);
        sent_.push_back({enc_.encode(snap_), snap_});
        own(sent_.back());
        break;
      case 'r':
        if (!sent_.empty()) own(sent_[number(arg) % sent_.size()]);
        break;
      case 's': {
        if (sent_.empty()) break;
        const auto sp = arg.find(' ');
        const auto& m = sent_[number(arg.substr(0, sp)) % sent_.size()].message;
        const std::uint64_t seq = sp == std::string_view::npos ? ~0ULL : number(arg.substr(sp + 1));
        try {
          auto h = gpustream::transport::parse_bus_header(m, l_);
          std::string forged =
              "GSB1 " + std::string(h.full ? "f " : "d ") + (h.compressed ? "z " : "p ") + h.node +
              " " + h.probe + " " + hex(h.epoch) + " " + std::to_string(seq) + " " +
              std::to_string(h.full ? seq : h.base) + " " + std::to_string(h.body_bytes) + " a\n";
          forged += m.substr(m.find('\n') + 1);
          foreign(forged);
        } catch (const BusError&) {}
        break;
      }
      case 'p': {
        const std::uint64_t seq = ++forged_seq_;
        foreign("GSB1 d p node-1 simulated " + hex(epoch_) + " " + std::to_string(seq) + " " +
                std::to_string(base_) + " " + std::to_string(arg.size()) + " a\n" +
                std::string(arg));
        break;
      }
      case 'x': {
        std::string m(arg);
        for (auto at = m.find("\\x01"); at != std::string::npos; at = m.find("\\x01"))
          m.replace(at, 4, "\n");
        foreign(m);
        break;
      }
      case 'e':
        restart();
        break;
      default:
        break;
    }
    FUZZ_CHECK(dec_.streams() <= l_.max_streams);
    FUZZ_CHECK(dec_.state_bytes() <= l_.max_state_bytes);
  }

 private:
  static std::string hex(std::uint64_t v) {
    char b[17];
    const auto r = std::to_chars(b, b + sizeof(b), v, 16);
    return {b, r.ptr};
  }

  /// A new encoder (epoch); what the old one sent can still be replayed (`r`, `s`).
  void restart() {
    enc_ = BusEncoder("node-1", "fuzz", {.full_every = 4});
    snap_ = start();
  }
  /// One of the agent's own messages: if taken, it is exactly the snapshot it was made from.
  void own(const Sent& s) {
    try {
      const auto h = gpustream::transport::parse_bus_header(s.message, l_);
      FUZZ_CHECK(dec_.cost_bytes(h) >= h.body_bytes);
      const auto d = dec_.decode(s.message);
      if (!d) return;
      if (h.full) {
        forged_base_ = false;
        epoch_ = h.epoch;
        base_ = h.seq;
      }
      forged_seq_ = std::max(forged_seq_, h.seq);
      FUZZ_CHECK(d->snapshot.node == "node-1");
      if (!forged_base_) FUZZ_CHECK(d->snapshot == s.snapshot);
    } catch (const BusError& e) {
      // The agent's own messages are refused only for their size (or against a forged base).
      FUZZ_CHECK(forged_base_ || e.reason() == gpustream::transport::BusRefusal::too_many_devices);
    }
  }

  /// A message not of the agent's making: it may be refused; a full it makes the base of.
  void foreign(const std::string& m) {
    try {
      const auto d = dec_.decode(m);
      if (d && d->header.full && d->header.node == "node-1") forged_base_ = true;
      if (d) {
        const std::string again = gpustream::to_json_string(d->snapshot);
        FUZZ_CHECK(gpustream::snapshot_from_json_string(again) == d->snapshot);
      }
    } catch (const BusError&) {}
  }

  BusLimits l_;
  BusDecoder dec_;
  BusEncoder enc_{"node-1"};
  GpuSnapshot snap_;
  std::vector<Sent> sent_;
  std::uint64_t epoch_ = 0;
  std::uint64_t base_ = 0;
  std::uint64_t forged_seq_ = 0;
  bool forged_base_ = false;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto input = gpustream::fuzz::text_of(data, size);
  if (input.size() > 8 * 1024) return 0;  // a stream of 64 operations at most: many per second
  Run run;
  for (const auto op : gpustream::fuzz::split_lines(input, 64)) run.line(op);
  return 0;
}
