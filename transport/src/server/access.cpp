// Host, Origin and token checks.
#include "server/access.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>

#include "gpustream/transport/address.hpp"
#include "wire/request_target.hpp"

namespace gpustream::transport {
namespace ip = boost::asio::ip;

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

/// Splits "name", "name:port", "[v6]", "[v6]:port". nullopt when malformed.
struct HostPort {
  std::string name;
  std::optional<unsigned short> port;
};
std::optional<HostPort> split_host(std::string_view s) {
  HostPort hp;
  std::string_view rest;
  if (!s.empty() && s.front() == '[') {
    const auto close = s.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    hp.name = lower(s.substr(1, close - 1));
    rest = s.substr(close + 1);
  } else {
    const auto colon = s.find(':');
    hp.name = lower(s.substr(0, colon));
    rest = colon == std::string_view::npos ? std::string_view{} : s.substr(colon);
  }
  if (hp.name.empty()) return std::nullopt;
  if (!rest.empty()) {
    if (rest.front() != ':' || rest.size() < 2) return std::nullopt;
    rest.remove_prefix(1);
    unsigned p = 0;
    const auto r = std::from_chars(rest.data(), rest.data() + rest.size(), p);
    if (r.ec != std::errc{} || r.ptr != rest.data() + rest.size() || p > 65535) return std::nullopt;
    hp.port = static_cast<unsigned short>(p);
  }
  // A trailing dot ("localhost.") names the same host.
  if (hp.name.size() > 1 && hp.name.back() == '.') hp.name.pop_back();
  return hp;
}

bool is_localhost_name(std::string_view n) {
  return n == "localhost" || (n.size() > 10 && n.substr(n.size() - 10) == ".localhost");
}

std::optional<ip::address> ip_literal(const std::string& n) {
  boost::system::error_code ec;
  auto a = ip::make_address(n, ec);
  if (ec) return std::nullopt;
  return a;
}

}  // namespace

AccessPolicy::AccessPolicy(const ip::tcp::endpoint& http, std::string token,
                           const std::vector<std::string>& allowed_origins,
                           const std::vector<std::string>& allowed_hosts)
    : port_(http.port()), wildcard_(http.address().is_unspecified()), required_(!token.empty()) {
  token_->value.store(std::make_shared<const std::string>(std::move(token)));
  hosts_.push_back({"localhost", std::nullopt});
  hosts_.push_back({"127.0.0.1", std::nullopt});
  hosts_.push_back({"::1", std::nullopt});
  if (!wildcard_) hosts_.push_back({lower(http.address().to_string()), std::nullopt});
  for (const auto& h : allowed_hosts)
    if (auto hp = split_host(h)) hosts_.push_back({hp->name, hp->port});
  for (const auto& o : allowed_origins) {
    std::string n = lower(o);
    while (!n.empty() && n.back() == '/') n.pop_back();
    if (n == "*") {
      any_origin_ = true;
      continue;
    }
    const auto scheme_end = n.find("://");
    if (scheme_end != std::string::npos) {
      // The origin's host may also appear in Host headers (the page is served from it).
      if (auto hp = split_host(std::string_view(n).substr(scheme_end + 3))) {
        std::optional<unsigned short> port = hp->port;
        if (!port) port = n.compare(0, scheme_end, "https") == 0 ? 443 : 80;
        hosts_.push_back({hp->name, port});
      }
    }
    origins_.push_back(std::move(n));
  }
}

bool AccessPolicy::name_allowed(std::string_view name, std::optional<unsigned short> port) const {
  const unsigned short p = port.value_or(80);
  const auto port_ok = [&](const std::optional<unsigned short>& rule_port) {
    // A Host without a port is accepted on our port too: the name is what rebinding changes.
    return !port || p == rule_port.value_or(port_);
  };
  for (const auto& r : hosts_)
    if (r.name == name && port_ok(r.port)) return true;
  if (is_localhost_name(name) && port_ok(std::nullopt)) return true;
  if (const auto a = ip_literal(std::string(name))) {
    if (is_loopback(*a) && port_ok(std::nullopt)) return true;
    // Bound to every interface: any address literal may be ours, and a literal cannot be
    // rebound by DNS.
    if (wildcard_ && port_ok(std::nullopt)) return true;
  }
  return false;
}

bool AccessPolicy::host_allowed(std::string_view host) const {
  const auto hp = split_host(host);
  if (!hp) return false;
  return name_allowed(hp->name, hp->port);
}

bool AccessPolicy::origin_allowed(std::optional<std::string_view> origin) const {
  if (!origin) return true;
  if (any_origin_) return true;
  std::string o = lower(*origin);
  while (!o.empty() && o.back() == '/') o.pop_back();
  if (std::find(origins_.begin(), origins_.end(), o) != origins_.end()) return true;
  const auto scheme_end = o.find("://");
  if (scheme_end == std::string::npos) return false;  // includes "null"
  const std::string scheme = o.substr(0, scheme_end);
  if (scheme != "http" && scheme != "https") return false;
  const auto hp = split_host(std::string_view(o).substr(scheme_end + 3));
  if (!hp) return false;
  const unsigned short port = hp->port.value_or(scheme == "https" ? 443 : 80);
  return name_allowed(hp->name, port);
}

bool AccessPolicy::set_token(std::string token) {
  if (!required_ || token.empty()) return false;
  token_->value.store(std::make_shared<const std::string>(std::move(token)));
  return true;
}

bool AccessPolicy::token_matches(std::string_view candidate) const noexcept {
  if (!required_) return true;
  const auto held = token_->value.load();  // the token as of now (set_token may swap it)
  const std::string& token = *held;
  // Constant time in the candidate's content (the length of the real token is not secret
  // enough to matter, but do not return early on the first differing byte).
  unsigned char diff = candidate.size() == token.size() ? 0 : 1;
  for (std::size_t i = 0; i < candidate.size(); ++i)
    diff |= static_cast<unsigned char>(candidate[i] ^ token[i % token.size()]);
  return diff == 0;
}

bool AccessPolicy::request_authorized(std::string_view authorization,
                                      std::string_view target) const {
  if (!required_) return true;
  constexpr std::string_view kBearer = "bearer ";
  if (authorization.size() > kBearer.size() &&
      lower(authorization.substr(0, kBearer.size())) == kBearer) {
    auto t = authorization.substr(kBearer.size());
    while (!t.empty() && t.front() == ' ') t.remove_prefix(1);
    while (!t.empty() && t.back() == ' ') t.remove_suffix(1);
    if (token_matches(t)) return true;
  }
  if (const auto q = query_parameter(target, "token")) return token_matches(*q);
  return false;
}

}  // namespace gpustream::transport
