// The reference raw deflater of the bus's wire-format tests and benchmark: Boost.Beast's zlib
// port, what the bus encoder wrote before it moved to libdeflate (session 15). Header-only, so
// that bench/fleet_codec_bench.cpp uses the same one without linking the test support library.
#pragma once

#include <string>
#include <string_view>

#include <boost/beast/zlib/deflate_stream.hpp>
#include <boost/system/error_code.hpp>

namespace gpustream::test {

/// Raw deflate (RFC 1951) of `in` at `level`, one fresh stream per call; `ec` is Beast's
/// (end_of_stream when the stream ended normally).
inline std::string beast_deflate(std::string_view in, int level, boost::system::error_code& ec) {
  namespace zlib = boost::beast::zlib;
  zlib::deflate_stream ds;
  ds.reset(level, 15, 8, zlib::Strategy::normal);
  std::string out(ds.upper_bound(in.size()) + 16, '\0');
  zlib::z_params zs;
  zs.next_in = in.data();
  zs.avail_in = in.size();
  zs.next_out = out.data();
  zs.avail_out = out.size();
  ds.write(zs, zlib::Flush::finish, ec);
  out.resize(zs.total_out);
  return out;
}

}  // namespace gpustream::test
