// Who may talk to the HTTP server: Host (DNS rebinding), Origin (cross-site WebSocket) and the
// bearer token. See docs/security.md.
//
// Thread safety: immutable after construction but for the token, which set_token() swaps
// atomically (SIGHUP's rotation); every other method is const and reentrant.
#pragma once

#include <atomic>
#include <memory>
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

  bool token_required() const noexcept { return required_; }
  /// Rotates the token of a policy that requires one: from now on requests and connections
  /// must present `token` (connections already authorized stay). False, and nothing changes,
  /// when the policy has no token (adding one needs a restart) or `token` is empty.
  bool set_token(std::string token);
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
  struct TokenBox {
    std::atomic<std::shared_ptr<const std::string>> value;
  };
  bool required_ = false;
  std::shared_ptr<TokenBox> token_ = std::make_shared<TokenBox>();  // shared by copies
  std::vector<HostRule> hosts_;
  std::vector<std::string> origins_;  // lower case, no trailing '/'
  bool any_origin_ = false;
};

}  // namespace gpustream::transport
