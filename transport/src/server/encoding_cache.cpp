// The encoding cache, bounded in sequences and bytes.
#include "server/encoding_cache.hpp"

#include <algorithm>

namespace gpustream::transport {

EncodingCache::EncodingCache(std::size_t max_sequences, std::size_t max_bytes,
                             std::size_t max_message_bytes, ServerMetrics& metrics)
    : max_sequences_(std::max<std::size_t>(max_sequences, 1)),
      max_bytes_(std::max<std::size_t>(max_bytes, 4096)),
      max_message_bytes_(max_message_bytes),
      metrics_(metrics) {}

std::shared_ptr<const std::string> EncodingCache::get(const SnapshotPtr& s, const Selection& sel) {
  auto& entries = by_sequence_[s->sequence];
  for (const auto& e : entries)
    if (e.hash == sel.hash && e.key == sel.key) return e.message;
  auto text = encode_snapshot_message(*s, sel);
  ServerMetrics::bump(metrics_.serializations);
  std::shared_ptr<const std::string> message;
  if (text.size() <= max_message_bytes_) message = metrics_.share(std::move(text));
  // Kept even when larger than the budget: the clients that want it now share it (evict()
  // keeps the newest encoding of the sequence being served).
  Entry e{sel.hash, sel.key, message};
  bytes_ += e.cost();
  entries.push_back(std::move(e));
  ++entries_;
  evict(s->sequence);
  publish_gauges();
  return message;
}

void EncodingCache::evict(std::uint64_t keep_sequence) {
  // Oldest sequences first (a replay or a slow client asks for old ones; live ones are new).
  while ((bytes_ > max_bytes_ || by_sequence_.size() > max_sequences_) &&
         by_sequence_.begin()->first != keep_sequence) {
    for (const auto& e : by_sequence_.begin()->second) {
      bytes_ -= e.cost();
      --entries_;
    }
    by_sequence_.erase(by_sequence_.begin());
  }
  // Still over: the sequence being served alone holds too many projections; drop its oldest
  // encodings but the one just made (the clients that hold them keep their copies).
  auto it = by_sequence_.find(keep_sequence);
  if (it == by_sequence_.end()) return;
  auto& entries = it->second;
  std::size_t drop = 0;
  std::size_t freed = 0;
  while (bytes_ - freed > max_bytes_ && drop + 1 < entries.size()) freed += entries[drop++].cost();
  if (drop == 0) return;
  entries.erase(entries.begin(), entries.begin() + static_cast<std::ptrdiff_t>(drop));
  bytes_ -= freed;
  entries_ -= drop;
}

void EncodingCache::publish_gauges() {
  ServerMetrics::set(metrics_.encoded_cache_bytes, bytes_);
  ServerMetrics::set(metrics_.encoded_cache_entries, entries_);
}

}  // namespace gpustream::transport
