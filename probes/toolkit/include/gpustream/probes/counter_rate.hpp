// gpustream/probes/counter_rate.hpp — cumulative counter → rate, one rule for every probe.
//
// A counter (engine busy ns, GPU cycles, energy µJ) becomes a rate between two readings:
// (value now − value before) / (base now − base before), where the base is what the counter is
// measured against (a sample time in ns, a total-cycles counter, a device timestamp). The rules:
//   * the first reading only seeds: no rate (Absence::not_yet_seeded for the caller);
//   * a counter that went backwards was reset (driver reload, restarted process, reused pid or
//     client id): no rate, this reading seeds again — never a negative or spiking value;
//     unless the counter's width is known (`wrap_bits`), when a decrease is a wrap-around and the
//     delta is taken modulo 2^wrap_bits;
//   * a base that did not advance gives no rate (and keeps the older baseline);
//   * CounterRates forgets a key that was not updated during a whole round (a process that
//     exited, a device that vanished), so it comes back seeding.
// Scaling (percent, capacity, µJ → J) is the caller's.
//
// Thread safety: none; the owner serialises calls. Cancellation: nothing to cancel.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <utility>

namespace gpustream::rate {

struct Options {
  /// Width of a counter that wraps around (e.g. 32); 0: a decrease is a reset.
  unsigned wrap_bits = 0;
};

/// What one reading gave.
struct Step {
  std::optional<double> rate;  // delta value / delta base; absent while seeding
  bool reset = false;          // the counter went backwards (and did not wrap): it seeds again
  /// With a rate: its two deltas (for a caller that scales the base itself, e.g. ns → s).
  std::uint64_t delta = 0;
  std::uint64_t base_delta = 0;
};

/// One counter.
class CounterRate {
 public:
  CounterRate() = default;
  explicit CounterRate(Options options) : options_(options) {}
  Step update(std::uint64_t value, std::uint64_t base);
  /// Forgets the baseline: the next reading seeds.
  void clear() noexcept { last_.reset(); }
  bool seeded() const noexcept { return last_.has_value(); }

 private:
  struct Reading {
    std::uint64_t value, base;
  };
  Options options_;
  std::optional<Reading> last_;
};

/// Many counters named by a key, read in rounds (one round per sample).
template <class Key>
class CounterRates {
 public:
  CounterRates() = default;
  explicit CounterRates(Options options) : options_(options) {}

  /// Starts a round: keys not updated since the previous begin() are forgotten.
  void begin() {
    std::erase_if(counters_, [&](const auto& kv) { return kv.second.round != round_; });
    ++round_;
  }
  /// The rate of `key`'s counter since its previous reading. Updating one key twice in a round
  /// (several descriptors of one client) compares both with the same earlier reading.
  Step update(const Key& key, std::uint64_t value, std::uint64_t base) {
    auto [it, inserted] =
        counters_.try_emplace(key, Entry{CounterRate(options_), CounterRate(options_), 0});
    auto& e = it->second;
    if (!inserted && e.round == round_) {
      e.counter = e.before_this_round;  // a second reading of the same key in this round
    } else {
      e.before_this_round = e.counter;
    }
    e.round = round_;
    return e.counter.update(value, base);
  }
  /// Keys updated in this round (kept for the next one).
  std::size_t tracked() const noexcept {
    std::size_t n = 0;
    for (const auto& [key, e] : counters_) n += e.round == round_ ? 1 : 0;
    return n;
  }

 private:
  struct Entry {
    CounterRate counter;
    CounterRate before_this_round;
    std::uint64_t round;
  };
  Options options_;
  std::uint64_t round_ = 1;
  std::map<Key, Entry> counters_;
};

}  // namespace gpustream::rate
