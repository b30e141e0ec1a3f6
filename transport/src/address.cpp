// Listen addresses.
#include "gpustream/transport/address.hpp"

#include <charconv>
#include <stdexcept>

namespace gpustream::transport {
namespace ip = boost::asio::ip;

ip::tcp::endpoint parse_listen_address(std::string_view text) {
  const auto fail = [&](std::string_view why) {
    throw std::invalid_argument("bad listen address '" + std::string(text) + "': " +
                                std::string(why) + " (expected HOST:PORT, e.g. 127.0.0.1:9400)");
  };
  std::string_view host, port;
  if (!text.empty() && text.front() == '[') {
    const auto close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':')
      fail("unterminated [IPv6] address or missing :PORT");
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    const auto colon = text.rfind(':');
    if (colon == std::string_view::npos) fail("missing :PORT");
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (host.find(':') != std::string_view::npos) fail("write IPv6 addresses as [ADDR]:PORT");
  }
  unsigned p = 0;
  const auto r = std::from_chars(port.data(), port.data() + port.size(), p);
  if (port.empty() || r.ec != std::errc{} || r.ptr != port.data() + port.size() || p > 65535)
    fail("the port must be a number from 0 to 65535");
  ip::address addr;
  if (host == "localhost") {
    addr = ip::address_v4::loopback();
  } else {
    boost::system::error_code ec;
    addr = ip::make_address(std::string(host), ec);
    if (ec || host.empty()) fail("the host must be an IP address or 'localhost'");
  }
  return {addr, static_cast<unsigned short>(p)};
}

std::string to_string(const ip::tcp::endpoint& ep) {
  const auto a = ep.address();
  std::string host = a.to_string();
  if (a.is_v6()) host = "[" + host + "]";
  return host + ":" + std::to_string(ep.port());
}

bool is_loopback(const ip::address& a) noexcept {
  if (a.is_v4()) return a.to_v4().is_loopback();
  const auto v6 = a.to_v6();
  if (v6.is_loopback()) return true;
  if (v6.is_v4_mapped()) return ip::make_address_v4(ip::v4_mapped, v6).is_loopback();
  return false;
}

std::string redact_url_credentials(std::string_view url) {
  std::string out;
  while (true) {
    const auto comma = url.find(',');
    auto part = url.substr(0, comma);
    const auto scheme = part.find("://");
    const auto at = part.rfind('@');
    if (at != std::string_view::npos) {
      const auto user_start = scheme == std::string_view::npos ? 0 : scheme + 3;
      if (at >= user_start) {
        out += part.substr(0, user_start);
        out += "***";
        part.remove_prefix(at);
      }
    }
    out += part;
    if (comma == std::string_view::npos) return out;
    out += ',';
    url.remove_prefix(comma + 1);
  }
}

}  // namespace gpustream::transport
