// fleet/bus_deflate.hpp — the fleet bus's raw DEFLATE (RFC 1951) bodies, whole buffers, with
// libdeflate (private).
//
// A bus body is one whole raw-deflate stream whose inflated size its header declares
// (fleet_codec.hpp), so neither side needs a streaming deflater: libdeflate compresses and
// decompresses whole buffers, about twice as fast as Beast's zlib port at the same level and
// size (docs/benchmarks.md, "The bus's inflate (session 15)"). The wire format is plain RFC 1951:
// any inflater reads what bus_deflate_into writes, and bus_inflate_exact reads any deflater's
// stream (Beast's, zlib's), so agents and views of either kind mix.
//
// The HTTP bodies' gzip (wire/gzip.hpp) stays on Beast's streams: /metrics is compressed as it is
// written, which a whole-buffer API cannot do.
//
// Thread safety: reentrant. Each thread keeps its own compressors (one per level used) and
// decompressor, allocated on first use and reused: nothing is allocated per message but `out`'s
// growth.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace gpustream::transport {

/// Appends `in` to `out` as one raw DEFLATE stream at `level` (clamped to 1..9, the levels
/// zlib's and libdeflate's share; 6 is the bus encoder's default). O(in). Throws std::bad_alloc
/// when the compressor cannot be allocated.
void bus_deflate_into(std::string& out, std::string_view in, int level);

/// How bus_inflate_exact ended.
enum class BusInflateResult {
  ok,          // `in` is exactly one stream of exactly `expected` bytes
  past,        // the stream goes on past `expected` bytes (stopped at the bound); also a
               // stream cut short whose last bits, with the zeros libdeflate reads past the
               // end of its input (at most 8 bytes), decode to more than `expected`
  short_body,  // the stream ends short of `expected` bytes, or bytes follow it in `in`
  bad_data,    // not a valid raw DEFLATE stream (corrupt or truncated)
};

/// Inflates `in` into `out` (resized to `expected`), writing at most `expected` bytes: a stream
/// that would go on is stopped there (`past`), so a bomb costs one pass over `expected` bytes.
/// `out` holds the body only when the result is `ok`. Throws std::bad_alloc when the
/// decompressor cannot be allocated.
BusInflateResult bus_inflate_exact(std::string_view in, std::size_t expected, std::string& out);

}  // namespace gpustream::transport
