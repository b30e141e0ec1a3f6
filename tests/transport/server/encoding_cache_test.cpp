// EncodingCache: one serialization per (sequence, selection), bounded in sequences and bytes,
// the oldest sequence going first; the gauges and the serialization counter.
#include "server/encoding_cache.hpp"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace gpustream::transport::test {
namespace {

SnapshotPtr snapshot(std::uint64_t sequence, std::size_t devices = 2) {
  GpuSnapshot s;
  s.probe = "gpu";
  s.sequence = sequence;
  for (std::size_t i = 0; i < devices; ++i) {
    DeviceSample d;
    d.id = "GPU-" + std::to_string(i);
    d.index = static_cast<int>(i);
    d.name = "Test GPU";
    d.metrics.set(Metric::utilization_percent, 10.0 + static_cast<double>(i), Source::nvml);
    d.metrics.set(Metric::temperature_celsius, 50.0, Source::nvml);
    s.devices.push_back(std::move(d));
  }
  return std::make_shared<const GpuSnapshot>(std::move(s));
}

const Selection kPlain{};
constexpr std::size_t kNoCap = std::size_t{1} << 40;  // no message is too large

Selection only(const GpuSnapshot& s, std::vector<std::string> devices) {
  return Projection::make(std::move(devices), {}).of(s);
}

TEST(EncodingCache, SerializesEachSelectionOfASnapshotOnce) {
  ServerMetrics m;
  EncodingCache cache(8, 1 << 20, kNoCap, m);
  const auto s = snapshot(1);
  const auto a = cache.get(s, kPlain);
  EXPECT_EQ(*a, encode_snapshot_message(*s, kPlain));
  EXPECT_EQ(cache.get(s, kPlain), a);  // the same buffer, shared
  EXPECT_EQ(m.serializations.load(), 1u);

  const auto sel = only(*s, {"GPU-1"});
  const auto b = cache.get(s, sel);
  EXPECT_EQ(*b, encode_snapshot_message(*s, sel));
  EXPECT_NE(*b, *a);
  EXPECT_EQ(cache.get(s, only(*s, {"GPU-1", "GPU-unknown"})), b);  // same bytes, same key
  EXPECT_EQ(m.serializations.load(), 2u);
  EXPECT_EQ(cache.entries(), 2u);
  EXPECT_EQ(m.encoded_cache_entries.load(), 2u);
  EXPECT_EQ(m.encoded_cache_bytes.load(), cache.bytes());
  EXPECT_GT(cache.bytes(), a->size() + b->size());  // keys and entries are counted too
}

TEST(EncodingCache, KeepsAtMostMaxSequencesTheOldestGoingFirst) {
  ServerMetrics m;
  EncodingCache cache(2, 1 << 20, kNoCap, m);
  const auto s1 = snapshot(1), s2 = snapshot(2), s3 = snapshot(3);
  cache.get(s1, kPlain);
  cache.get(s2, kPlain);
  cache.get(s3, kPlain);
  EXPECT_EQ(cache.entries(), 2u);
  EXPECT_EQ(m.serializations.load(), 3u);
  cache.get(s2, kPlain);
  cache.get(s3, kPlain);
  EXPECT_EQ(m.serializations.load(), 3u);  // both still there
  cache.get(s1, kPlain);
  EXPECT_EQ(m.serializations.load(), 4u);  // 1 was evicted
}

TEST(EncodingCache, StaysWithinItsByteBudget) {
  ServerMetrics m;
  constexpr std::size_t kBudget = 16 * 1024;
  EncodingCache cache(1000, kBudget, kNoCap, m);
  std::size_t kept_at_most = 0;
  for (std::uint64_t seq = 1; seq <= 40; ++seq) {
    cache.get(snapshot(seq, 4), kPlain);
    EXPECT_LE(cache.bytes(), kBudget) << seq;
    EXPECT_EQ(m.encoded_cache_bytes.load(), cache.bytes());
    kept_at_most = std::max(kept_at_most, cache.entries());
  }
  EXPECT_LT(cache.entries(), 40u);
  EXPECT_GT(cache.entries(), 1u);
  EXPECT_EQ(m.encoded_cache_entries.load(), cache.entries());
}

// Issue 27 (5): a message larger than the budget was returned without being kept, so each
// client serialized its own copy. It is kept (the newest encoding always is) and shared.
TEST(EncodingCache, AMessageLargerThanTheBudgetIsStillSerializedOnceAndShared) {
  ServerMetrics m;
  EncodingCache cache(8, 0, kNoCap, m);  // the budget is raised to its floor, 4096 bytes
  const auto big = snapshot(1, 64);
  const auto a = cache.get(big, kPlain);
  ASSERT_GT(a->size(), 4096u);
  EXPECT_EQ(*a, encode_snapshot_message(*big, kPlain));
  std::vector<std::shared_ptr<const std::string>> clients;
  for (int i = 0; i < 40; ++i) clients.push_back(cache.get(big, kPlain));
  for (const auto& c : clients) EXPECT_EQ(c, a);  // one buffer
  EXPECT_EQ(m.serializations.load(), 1u);
  EXPECT_EQ(m.encoded_bytes_live->load(), a->size());  // counted once, not 41 times
  // The next sequence evicts it; the holders keep theirs, and it is counted until they let go.
  cache.get(snapshot(2, 64), kPlain);
  EXPECT_EQ(cache.entries(), 1u);
  clients.clear();
  EXPECT_EQ(m.encoded_bytes_live->load(), a->size() * 2);  // `a` and sequence 2's
}

TEST(EncodingCache, AMessageLargerThanTheMessageCapIsRefusedAndNotSerializedAgain) {
  ServerMetrics m;
  const auto big = snapshot(1, 64);
  const auto size = encode_snapshot_message(*big, kPlain).size();
  EncodingCache cache(8, 1 << 20, size - 1, m);
  EXPECT_EQ(cache.get(big, kPlain), nullptr);
  EXPECT_EQ(cache.get(big, kPlain), nullptr);
  EXPECT_EQ(m.serializations.load(), 1u);  // the marker remembers the refusal
  EXPECT_LT(cache.bytes(), 1024u);         // and holds no message
  EXPECT_EQ(m.encoded_bytes_live->load(), 0u);
  const auto small = snapshot(2, 1);
  ASSERT_NE(cache.get(small, kPlain), nullptr);  // a smaller one still goes
}

TEST(EncodingCache, OneSequenceWithTooManyProjectionsKeepsTheNewestOnes) {
  ServerMetrics m;
  const auto s = snapshot(1, 6);
  std::vector<Selection> sels;  // one device each
  for (int i = 0; i < 6; ++i) sels.push_back(only(*s, {"GPU-" + std::to_string(i)}));
  // Room for about three of them: each fits alone, all six do not.
  const std::size_t one = encode_snapshot_message(*s, sels[0]).size();
  const std::size_t budget = std::max<std::size_t>(4096, 3 * one);
  ASSERT_GT(6 * one, budget);
  EncodingCache cache(8, budget, kNoCap, m);
  for (const auto& sel : sels) {
    cache.get(s, sel);
    EXPECT_LE(cache.bytes(), budget);
  }
  EXPECT_GE(cache.entries(), 1u);
  EXPECT_LT(cache.entries(), 6u);
  // The last one is kept; the first one was dropped and is serialized again.
  const auto before = m.serializations.load();
  cache.get(s, sels.back());
  EXPECT_EQ(m.serializations.load(), before);
  cache.get(s, sels.front());
  EXPECT_EQ(m.serializations.load(), before + 1);
}

}  // namespace
}  // namespace gpustream::transport::test
