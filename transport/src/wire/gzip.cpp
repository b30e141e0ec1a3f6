// gzip members over Beast's DEFLATE; Accept-Encoding negotiation.
#include "wire/gzip.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <stdexcept>

#include <boost/beast/core/string.hpp>
#include <boost/beast/zlib/deflate_stream.hpp>
#include <boost/beast/zlib/error.hpp>
#include <boost/beast/zlib/inflate_stream.hpp>

namespace gpustream::transport {
namespace zlib = boost::beast::zlib;

namespace {

// RFC 1952 §2.3: ID1 ID2, CM=8 (deflate), FLG=0, MTIME=0 (none), XFL=0, OS=255 (unknown).
constexpr std::array<unsigned char, 10> kHeader{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff};
constexpr std::size_t kTrailer = 8;  // CRC-32 and ISIZE, little-endian

/// CRC-32 (ISO-HDLC, gzip's: reflected polynomial 0xEDB88320) eight bytes at a time
/// ("slicing by 8", eight tables of 256 entries built at compile time): Boost's byte-at-a-time
/// table was ≈ 19 % of a fleet's /metrics scrape with gzip (docs/benchmarks.md).
using CrcTables = std::array<std::array<std::uint32_t, 256>, 8>;
constexpr CrcTables make_crc_tables() {
  CrcTables t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    t[0][i] = c;
  }
  for (std::size_t i = 0; i < 256; ++i)
    for (std::size_t k = 1; k < 8; ++k) t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xff];
  return t;
}
constexpr CrcTables kCrcTables = make_crc_tables();

/// `crc` (a running CRC-32, 0 to start) extended by `data`.
std::uint32_t crc32_update(std::uint32_t crc, std::string_view data) {
  const auto& t = kCrcTables;
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  std::size_t n = data.size();
  std::uint32_t c = ~crc;
  while (n >= 8) {
    const std::uint32_t lo =
        c ^ (static_cast<std::uint32_t>(p[0]) | static_cast<std::uint32_t>(p[1]) << 8 |
             static_cast<std::uint32_t>(p[2]) << 16 | static_cast<std::uint32_t>(p[3]) << 24);
    c = t[7][lo & 0xff] ^ t[6][(lo >> 8) & 0xff] ^ t[5][(lo >> 16) & 0xff] ^ t[4][lo >> 24] ^
        t[3][p[4]] ^ t[2][p[5]] ^ t[1][p[6]] ^ t[0][p[7]];
    p += 8;
    n -= 8;
  }
  while (n-- > 0) c = t[0][(c ^ *p++) & 0xff] ^ (c >> 8);
  return ~c;
}

std::uint32_t crc32_of(std::string_view data) { return crc32_update(0, data); }

void put_le32(std::string& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
}

std::uint32_t get_le32(std::string_view s) {
  std::uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(s[i]);
  return v;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

/// The weight of one Accept-Encoding element's parameters ("q=0.5"): 1 without one; nullopt
/// when malformed (RFC 9110 §12.4.2: "0" or "1" with up to three decimals).
std::optional<bool> weight_positive(std::string_view params) {
  bool positive = true;
  while (!params.empty()) {
    const auto semi = params.find(';');
    auto p = trim(params.substr(0, semi));
    params = semi == std::string_view::npos ? std::string_view{} : params.substr(semi + 1);
    if (p.empty()) continue;
    const auto eq = p.find('=');
    if (eq == std::string_view::npos || !boost::beast::iequals(trim(p.substr(0, eq)), "q"))
      continue;
    const auto v = trim(p.substr(eq + 1));
    if (v.empty() || (v[0] != '0' && v[0] != '1')) return std::nullopt;
    if (v.size() > 1 && (v[1] != '.' || v.size() > 5)) return std::nullopt;
    bool nonzero = v[0] == '1';
    for (std::size_t i = 2; i < v.size(); ++i) {
      if (v[i] < '0' || v[i] > '9') return std::nullopt;
      if (v[i] != '0' && v[0] == '1') return std::nullopt;  // "1.5": above 1
      if (v[i] != '0') nonzero = true;
    }
    positive = nonzero;
  }
  return positive;
}

}  // namespace

void deflate_into(std::string& out, std::string_view in, int level) {
  zlib::deflate_stream ds;
  ds.reset(std::clamp(level, 0, 9), 15, 8, zlib::Strategy::normal);
  const std::size_t start = out.size();
  out.resize(start + ds.upper_bound(in.size()) + 16);
  zlib::z_params zs;
  zs.next_in = in.data();
  zs.avail_in = in.size();
  zs.next_out = out.data() + start;
  zs.avail_out = out.size() - start;
  boost::system::error_code ec;
  ds.write(zs, zlib::Flush::finish, ec);
  if (ec && ec != zlib::error::end_of_stream) throw std::runtime_error("deflate: " + ec.message());
  out.resize(start + zs.total_out);
}

std::string gzip_compress(std::string_view data, int level) {
  // Raw DEFLATE (Beast writes no zlib wrapper): the gzip framing is ours.
  std::string out(reinterpret_cast<const char*>(kHeader.data()), kHeader.size());
  deflate_into(out, data, level);
  put_le32(out, crc32_of(data));
  put_le32(out, static_cast<std::uint32_t>(data.size() & 0xffffffffu));
  return out;
}

struct GzipWriter::State {
  zlib::deflate_stream ds;
  std::uint32_t crc = 0;
  std::uint64_t size = 0;
  bool header = false;
  bool finished = false;
};

GzipWriter::GzipWriter(int level) : state_(std::make_unique<State>()) {
  state_->ds.reset(std::clamp(level, 0, 9), 15, 8, zlib::Strategy::normal);
}

GzipWriter::~GzipWriter() = default;

void GzipWriter::write(std::string_view in, std::string& out) {
  if (state_->finished) throw std::logic_error("GzipWriter::write after finish");
  state_->crc = crc32_update(state_->crc, in);
  state_->size += in.size();
  run(in, out, false);
}

void GzipWriter::finish(std::string& out) {
  if (state_->finished) throw std::logic_error("GzipWriter::finish twice");
  run({}, out, true);
  state_->finished = true;
  put_le32(out, state_->crc);
  put_le32(out, static_cast<std::uint32_t>(state_->size & 0xffffffffu));
}

void GzipWriter::run(std::string_view in, std::string& out, bool last) {
  auto& st = *state_;
  if (!st.header) {
    out.append(reinterpret_cast<const char*>(kHeader.data()), kHeader.size());
    st.header = true;
  }
  zlib::z_params zs;
  zs.next_in = in.data();
  zs.avail_in = in.size();
  // Room for about half the input at a time (deflate's pending buffer drains into whatever
  // room it is given, and the loop gives more); the loop ends when the input is taken and, at
  // the end, when the stream is closed.
  constexpr std::size_t kStep = 4 * 1024;
  for (;;) {
    const std::size_t have = out.size();
    const std::size_t room = std::max(kStep, in.size() / 2 + 256);
    out.resize(have + room);
    zs.next_out = out.data() + have;
    zs.avail_out = room;
    boost::system::error_code ec;
    st.ds.write(zs, last ? zlib::Flush::finish : zlib::Flush::none, ec);
    out.resize(have + (room - zs.avail_out));
    if (last && ec == zlib::error::end_of_stream) return;
    if (ec && ec != zlib::error::need_buffers) throw std::runtime_error("deflate: " + ec.message());
    // need_buffers: no progress was possible (all input taken, nothing pending).
    if (!last && zs.avail_in == 0 && (zs.avail_out != 0 || ec == zlib::error::need_buffers)) return;
  }
}

std::optional<std::string> gunzip(std::string_view data, std::size_t max_bytes) {
  if (data.size() < kHeader.size() + kTrailer) return std::nullopt;
  const auto* h = reinterpret_cast<const unsigned char*>(data.data());
  if (h[0] != 0x1f || h[1] != 0x8b || h[2] != 8) return std::nullopt;
  const unsigned flags = h[3];
  std::size_t pos = kHeader.size();
  if (flags & 0xe0) return std::nullopt;  // reserved bits
  if (flags & 4) {                        // FEXTRA
    if (pos + 2 > data.size()) return std::nullopt;
    pos += 2 + (h[pos] | (h[pos + 1] << 8));
  }
  for (const unsigned bit : {8u, 16u}) {  // FNAME, FCOMMENT: zero-terminated
    if (!(flags & bit)) continue;
    const auto end = data.find('\0', pos);
    if (end == std::string_view::npos) return std::nullopt;
    pos = end + 1;
  }
  if (flags & 2) pos += 2;  // FHCRC
  if (pos + kTrailer > data.size()) return std::nullopt;
  const auto stream = data.substr(pos, data.size() - kTrailer - pos);
  const auto trailer = data.substr(data.size() - kTrailer);
  // Beast's inflate_stream may read one byte past a valid stream's end (fleet_codec.cpp says
  // why): the input gets one byte of padding; the output one spare byte to see a bomb.
  std::string padded(stream);
  padded += '\0';
  std::string out;
  zlib::inflate_stream is;
  zlib::z_params zs;
  zs.next_in = padded.data();
  zs.avail_in = padded.size();
  boost::system::error_code ec;
  constexpr std::size_t kChunk = 64 * 1024;
  for (;;) {
    const std::size_t have = out.size();
    const std::size_t room = std::min(kChunk, max_bytes + 1 - have);
    out.resize(have + room);
    zs.next_out = out.data() + have;
    zs.avail_out = room;
    is.write(zs, zlib::Flush::sync, ec);
    out.resize(have + (room - zs.avail_out));
    if (out.size() > max_bytes) return std::nullopt;
    if (ec == zlib::error::end_of_stream) break;
    if (ec == zlib::error::need_buffers && zs.avail_out == 0) {
      ec = {};
      continue;
    }
    if (ec) return std::nullopt;
    if (zs.avail_in == 0) return std::nullopt;   // truncated
    if (zs.avail_out != 0) return std::nullopt;  // no progress possible
  }
  const std::size_t read_ahead = static_cast<std::size_t>(zs.data_type & 63) / 8;
  if (zs.total_in - read_ahead != stream.size()) return std::nullopt;  // bytes after the stream
  if (get_le32(trailer) != crc32_of(out)) return std::nullopt;
  if (get_le32(trailer.substr(4)) != static_cast<std::uint32_t>(out.size() & 0xffffffffu))
    return std::nullopt;
  return out;
}

bool accepts_gzip(std::string_view accept_encoding) {
  std::optional<bool> gzip;
  std::optional<bool> any;
  while (!accept_encoding.empty()) {
    const auto comma = accept_encoding.find(',');
    const auto element = accept_encoding.substr(0, comma);
    accept_encoding =
        comma == std::string_view::npos ? std::string_view{} : accept_encoding.substr(comma + 1);
    const auto semi = element.find(';');
    const auto coding = trim(element.substr(0, semi));
    if (coding.empty()) continue;
    const auto w = weight_positive(semi == std::string_view::npos ? std::string_view{}
                                                                  : element.substr(semi + 1));
    const bool ok = w.value_or(false);
    if (boost::beast::iequals(coding, "gzip") || boost::beast::iequals(coding, "x-gzip"))
      gzip = gzip.value_or(true) && ok;  // listed twice: both must accept
    else if (coding == "*")
      any = ok;
  }
  if (gzip) return *gzip;
  return any.value_or(false);
}

}  // namespace gpustream::transport
