// The encoding cache: each snapshot message serialized once per selection (plain, or one per
// distinct projection clients use) and shared by every client that wants those bytes, whatever
// its size. The one owner of the bound on encoded bytes the server keeps: at most
// `max_sequences` snapshots and `max_bytes` bytes of encodings (keys included) together; the
// oldest sequence goes first, but the encoding just made is always kept (so one bigger than
// `max_bytes` is still made once). A message larger than `max_message_bytes` is refused: it is
// made once, then only a marker is kept, and get() returns null for it.
//
// Thread safety: none; used on the core's strand only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gpustream/channel.hpp"
#include "server/server_metrics.hpp"
#include "wire/encoder.hpp"

namespace gpustream::transport {

class EncodingCache {
 public:
  EncodingCache(std::size_t max_sequences, std::size_t max_bytes, std::size_t max_message_bytes,
                ServerMetrics& metrics);

  /// The message of `s` under `sel`, serialized on a miss; null when it is larger than
  /// max_message_bytes (refused, and not serialized again while the marker is kept).
  std::shared_ptr<const std::string> get(const SnapshotPtr& s, const Selection& sel);

  std::size_t bytes() const noexcept { return bytes_; }
  std::size_t entries() const noexcept { return entries_; }

 private:
  struct Entry {
    std::size_t hash;
    std::string key;
    std::shared_ptr<const std::string> message;  // null: refused (too large)
    std::size_t cost() const noexcept {
      return sizeof(Entry) + key.capacity() + (message ? message->size() : 0);
    }
  };
  void evict(std::uint64_t keep_sequence);
  void publish_gauges();

  std::size_t max_sequences_;
  std::size_t max_bytes_;
  std::size_t max_message_bytes_;
  ServerMetrics& metrics_;
  std::map<std::uint64_t, std::vector<Entry>> by_sequence_;
  std::size_t bytes_ = 0;
  std::size_t entries_ = 0;
};

}  // namespace gpustream::transport
