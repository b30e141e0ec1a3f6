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

namespace {

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

// A query or fragment parameter whose value is a secret: its name, lower-cased, contains one of
// these ("token", "access_token", "X-Api-Key", "client_secret", "password", "sig", ...).
bool is_secret_parameter(std::string_view name) {
  static constexpr std::string_view kWords[] = {
      "token", "secret", "pass", "pwd", "auth", "key", "sig", "credential", "session", "cookie"};
  std::string n;
  n.reserve(name.size());
  for (const char c : name) n += lower(c);
  for (const auto w : kWords)
    if (n.find(w) != std::string::npos) return true;
  return false;
}

}  // namespace

std::string redact_url_credentials(std::string_view urls) {
  std::string out;
  out.reserve(urls.size());
  std::size_t i = 0;
  const std::size_t n = urls.size();
  while (i <= n) {
    // One URL of the comma-separated list: [scheme://][userinfo@]host[:port][/path][?q][#f]
    std::size_t part_start = i;
    const auto scheme = urls.find("://", i);
    const auto comma = urls.find(',', i);
    std::size_t authority = i;
    if (scheme != std::string_view::npos && (comma == std::string_view::npos || scheme < comma))
      authority = scheme + 3;
    auto authority_end = urls.find_first_of("/?#,", authority);
    if (authority_end == std::string_view::npos) authority_end = n;
    const auto at = urls.substr(authority, authority_end - authority).rfind('@');
    out.append(urls.substr(part_start, authority - part_start));
    if (at != std::string_view::npos) {
      out += "***";
      out.append(urls.substr(authority + at, authority_end - authority - at));
    } else {
      out.append(urls.substr(authority, authority_end - authority));
    }
    i = authority_end;
    // The path, then parameters: a secret one's value is hidden up to the next '&', ';' or '#'
    // (commas included: a value may contain them, and hiding too much is safe).
    bool in_params = false;
    while (i < n && urls[i] != ',') {
      const char c = urls[i];
      if (c == '?' || c == '#' || (in_params && (c == '&' || c == ';'))) {
        in_params = true;
        out += c;
        ++i;
        const auto name_end = urls.find_first_of("=&;#,", i);
        const auto name = urls.substr(i, (name_end == std::string_view::npos ? n : name_end) - i);
        out.append(name);
        i += name.size();
        if (i < n && urls[i] == '=' && is_secret_parameter(name)) {
          out += "=***";
          const auto value_end = urls.find_first_of("&;#", i + 1);
          i = value_end == std::string_view::npos ? n : value_end;
        }
        continue;
      }
      out += c;
      ++i;
    }
    if (i >= n) break;
    out += ',';
    ++i;
  }
  return out;
}

}  // namespace gpustream::transport
