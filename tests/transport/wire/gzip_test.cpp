// gzip members (RFC 1952) and Accept-Encoding negotiation (RFC 9110 §12.5.3).
#include "wire/gzip.hpp"

#include <random>
#include <string>

#include <gtest/gtest.h>

namespace gpustream::transport {
namespace {

std::string bytes(std::initializer_list<unsigned char> b) { return {b.begin(), b.end()}; }

// `printf 123456789 | gzip -n`: GNU gzip's own member. Its trailer carries the CRC-32 check
// value of "123456789" (0xCBF43926, the standard's test vector) and the size 9.
const std::string kGnuGzip =
    bytes({0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0x33, 0x34, 0x32, 0x36, 0x31,
           0x35, 0x33, 0xb7, 0xb0, 0x04, 0x00, 0x26, 0x39, 0xf4, 0xcb, 0x09, 0x00, 0x00, 0x00});

TEST(Gzip, ReadsAMemberWrittenByGnuGzip) { EXPECT_EQ(gunzip(kGnuGzip, 100), "123456789"); }

TEST(Gzip, WritesTheHeaderTheCrcAndTheSizeOfTheStandard) {
  const auto z = gzip_compress("123456789");
  ASSERT_GE(z.size(), 18u);
  EXPECT_EQ(static_cast<unsigned char>(z[0]), 0x1f);
  EXPECT_EQ(static_cast<unsigned char>(z[1]), 0x8b);
  EXPECT_EQ(z[2], 8);  // deflate
  EXPECT_EQ(z[3], 0);  // no flags
  // The same trailer as GNU gzip's: the CRC-32 check value and ISIZE.
  EXPECT_EQ(z.substr(z.size() - 8), kGnuGzip.substr(kGnuGzip.size() - 8));
  EXPECT_EQ(gunzip(z, 9), "123456789");
}

TEST(Gzip, RoundTripsEveryLevelAndSize) {
  std::mt19937 rng(7);
  for (const std::size_t size : {0u, 1u, 100u, 65535u, 65536u, 200000u}) {
    std::string text;
    for (std::size_t i = 0; i < size; ++i)  // compressible and not: metric-like text and noise
      text += (i % 3 == 0) ? static_cast<char>(rng() & 0xff) : "gpustream_gpu_"[i % 14];
    for (int level = 0; level <= 9; ++level) {
      const auto z = gzip_compress(text, level);
      const auto back = gunzip(z, size);
      ASSERT_TRUE(back) << "size " << size << " level " << level;
      EXPECT_EQ(*back, text);
    }
  }
}

// GzipWriter (a streamed /metrics): text given in pieces of any size makes one member that
// inflates to the whole text, with the CRC-32 and size of the whole.
TEST(Gzip, AWriterFedInPiecesMakesTheMemberOfTheWhole) {
  std::mt19937 rng(11);
  std::string text;
  for (std::size_t i = 0; i < 300000; ++i)
    text += (i % 5 == 0) ? static_cast<char>(rng() & 0xff) : "gpustream_gpu_power_watts"[i % 25];
  for (const auto& [size, piece] : std::initializer_list<std::pair<std::size_t, std::size_t>>{
           {5000, 1}, {20000, 7}, {300000, 1000}, {300000, 16384}, {300000, 300000}}) {
    const std::string_view whole = std::string_view(text).substr(0, size);
    GzipWriter w;
    std::string z;
    for (std::size_t at = 0; at < whole.size(); at += piece) w.write(whole.substr(at, piece), z);
    w.finish(z);
    EXPECT_EQ(z, gzip_compress(whole)) << piece << ": the bytes of the one-shot member";
    const auto back = gunzip(z, whole.size());
    ASSERT_TRUE(back) << piece;
    EXPECT_EQ(*back, whole) << piece;
  }
  GzipWriter empty;
  std::string z;
  empty.finish(z);
  EXPECT_EQ(gunzip(z, 0), "");
  EXPECT_THROW(empty.finish(z), std::logic_error);
}

TEST(Gzip, RefusesACorruptOrTruncatedMemberOrTrailingBytes) {
  const std::string text(10000, 'x');
  const auto z = gzip_compress(text + "tail");
  EXPECT_TRUE(gunzip(z, 20000));
  auto bad_crc = z;
  bad_crc[bad_crc.size() - 6] ^= 1;
  EXPECT_FALSE(gunzip(bad_crc, 20000));
  auto bad_size = z;
  bad_size[bad_size.size() - 1] ^= 1;
  EXPECT_FALSE(gunzip(bad_size, 20000));
  EXPECT_FALSE(gunzip(z.substr(0, z.size() - 9), 20000));
  EXPECT_FALSE(gunzip(z + "x", 20000));
  EXPECT_FALSE(gunzip("not gzip at all, not at all", 20000));
  EXPECT_FALSE(gunzip({}, 20000));
  auto bad_magic = z;
  bad_magic[1] = 0;
  EXPECT_FALSE(gunzip(bad_magic, 20000));
}

TEST(Gzip, ABombStopsAtTheBound) {
  // 64 MiB of zeros deflate to about 64 KiB: refused at the first byte over 1 MiB.
  const auto bomb = gzip_compress(std::string(64u << 20, '\0'), 9);
  EXPECT_LT(bomb.size(), 128u * 1024);
  EXPECT_FALSE(gunzip(bomb, 1u << 20));
  EXPECT_TRUE(gunzip(gzip_compress(std::string(1u << 20, '\0')), 1u << 20));
}

TEST(AcceptEncoding, GzipIsAcceptedWithAPositiveWeight) {
  EXPECT_TRUE(accepts_gzip("gzip"));
  EXPECT_TRUE(accepts_gzip("GZip"));
  EXPECT_TRUE(accepts_gzip("x-gzip"));
  EXPECT_TRUE(accepts_gzip("gzip, deflate, br"));
  EXPECT_TRUE(accepts_gzip("br;q=1.0, gzip;q=0.8, *;q=0.1"));
  EXPECT_TRUE(accepts_gzip("gzip;q=0.001"));
  EXPECT_TRUE(accepts_gzip("gzip ; q=1"));
  EXPECT_TRUE(accepts_gzip("*"));
  EXPECT_TRUE(accepts_gzip("identity, *;q=0.5"));
}

TEST(AcceptEncoding, QZeroAbsentOrMalformedMeansIdentity) {
  EXPECT_FALSE(accepts_gzip(""));
  EXPECT_FALSE(accepts_gzip("identity"));
  EXPECT_FALSE(accepts_gzip("br, deflate"));
  EXPECT_FALSE(accepts_gzip("gzip;q=0"));
  EXPECT_FALSE(accepts_gzip("gzip;q=0.000"));
  EXPECT_FALSE(accepts_gzip("gzip; Q=0.0"));
  EXPECT_FALSE(accepts_gzip("*;q=0"));
  EXPECT_FALSE(accepts_gzip("gzip;q=0, *"));     // gzip named: its own weight decides
  EXPECT_FALSE(accepts_gzip("*, gzip;q=0"));     // in either order
  EXPECT_FALSE(accepts_gzip("gzip, gzip;q=0"));  // listed twice: both must accept
  EXPECT_FALSE(accepts_gzip("gzip;q=2"));        // weights are 0..1
  EXPECT_FALSE(accepts_gzip("gzip;q=1.5"));
  EXPECT_FALSE(accepts_gzip("gzip;q=abc"));
  EXPECT_FALSE(accepts_gzip("gzip;q=0.0001"));  // three decimals at most
  EXPECT_FALSE(accepts_gzip("gzipx"));
}

}  // namespace
}  // namespace gpustream::transport
