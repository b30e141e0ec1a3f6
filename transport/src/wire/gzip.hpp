// gzip (RFC 1952) for HTTP bodies: the server's /metrics and /api/v1/* answers when the client
// accepts it (RFC 9110 §12.5.3 Accept-Encoding), and the OTLP exporter's request bodies. Beast's
// deflate (a port of zlib's) makes the DEFLATE stream; the gzip header and the CRC-32 trailer are
// written here. No new library: Beast is already linked.
//
// Thread safety: reentrant functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace gpustream::transport {

/// The level every HTTP body is compressed with: level 1 (zlib's fastest, deflate_fast) costs
/// about a third of level 6's CPU for /metrics at a size within a few percent of it
/// (docs/benchmarks.md, "gzip").
inline constexpr int kGzipLevel = 1;

/// Appends `in` to `out` as raw DEFLATE (RFC 1951, no wrapper) at `level` 0..9: the fleet bus's
/// compressed bodies and the stream inside a gzip member. O(in); throws std::runtime_error when
/// the deflater fails.
void deflate_into(std::string& out, std::string_view in, int level);

/// `data` as one gzip member (header, DEFLATE at `level` 0..9, CRC-32 and size trailer).
/// O(data); allocates the output and the deflater's state (about 256 KiB) once.
std::string gzip_compress(std::string_view data, int level = kGzipLevel);

/// One gzip member written in pieces (a streamed /metrics body): write() appends what the
/// deflater has ready for the text given so far, finish() the rest and the trailer. The same
/// bytes as gzip_compress() of the whole text. Its state (the deflater's window and tables) is
/// about kStateBytes, allocated once; what it holds back between calls is part of that.
///
/// Thread safety: one owner; not copyable.
class GzipWriter {
 public:
  /// The deflater's memory at windowBits 15, memLevel 8 (its window, hash chains and pending
  /// buffer), as counted against the server's response budget.
  static constexpr std::size_t kStateBytes = 272 * 1024;

  explicit GzipWriter(int level = kGzipLevel);
  ~GzipWriter();
  GzipWriter(const GzipWriter&) = delete;
  GzipWriter& operator=(const GzipWriter&) = delete;

  /// Compresses `in` and appends what is ready to `out` (the header first). Throws
  /// std::runtime_error when the deflater fails, std::logic_error after finish().
  void write(std::string_view in, std::string& out);
  /// The end of the DEFLATE stream and the CRC-32/size trailer, appended to `out`.
  void finish(std::string& out);

 private:
  void run(std::string_view in, std::string& out, bool last);
  struct State;
  std::unique_ptr<State> state_;
};

/// The content of one gzip member, or nullopt when `data` is not a valid gzip member (header,
/// stream, CRC-32, size, nothing after it) or inflates past `max_bytes` (inflation stops at the
/// first byte over: a bomb costs `max_bytes` of output at most).
std::optional<std::string> gunzip(std::string_view data, std::size_t max_bytes);

/// True when an Accept-Encoding field value accepts gzip: a `gzip` (or `x-gzip`) coding with a
/// weight above 0, or else `*` with a weight above 0 (RFC 9110 §12.5.3; codings compare without
/// case; `q=0`, `q=0.0`... refuse; a malformed weight refuses). Empty: identity only.
bool accepts_gzip(std::string_view accept_encoding);

}  // namespace gpustream::transport
