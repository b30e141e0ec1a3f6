// Who may talk to the HTTP server: Host (DNS rebinding), Origin (cross-site WebSocket) and the
// bearer token. See docs/security.md.
//
// Thread safety: immutable after construction; every method is const and reentrant.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/ip/tcp.hpp>

namespace gpustream::transport {

class AccessPolicy {
 public:
  AccessPolicy() = default;
  /// `http` is the bound HTTP endpoint (its port is "our" port).
  AccessPolicy(const boost::asio::ip::tcp::endpoint& http, std::string token,
               const std::vector<std::string>& allowed_origins,
               const std::vector<std::string>& allowed_hosts);

  /// Host header: a localhost name or loopback address, the bound address (any IP literal when
  /// bound to a wildcard address), or an allowed host; a port, when given, must be ours (or
  /// the one an allowed host names).
  bool host_allowed(std::string_view host) const;
  /// Origin header of a WebSocket upgrade: absent (not a browser) is allowed; otherwise the
  /// same origin as an allowed Host on our port, or one of the allowed origins.
  bool origin_allowed(std::optional<std::string_view> origin) const;

  bool token_required() const noexcept { return !token_.empty(); }
  /// Constant-time comparison with the configured token.
  bool token_matches(std::string_view candidate) const noexcept;
  /// HTTP: "Authorization: Bearer <token>" or "?token=<token>" in the target.
  bool request_authorized(std::string_view authorization, std::string_view target) const;

 private:
  struct HostRule {
    std::string name;                    // lower case, IPv6 without brackets
    std::optional<unsigned short> port;  // nullopt: our port
  };
  bool name_allowed(std::string_view name, std::optional<unsigned short> port) const;

  unsigned short port_ = 0;
  bool wildcard_ = false;  // bound to 0.0.0.0 or ::
  std::string token_;
  std::vector<HostRule> hosts_;
  std::vector<std::string> origins_;  // lower case, no trailing '/'
  bool any_origin_ = false;
};

}  // namespace gpustream::transport
