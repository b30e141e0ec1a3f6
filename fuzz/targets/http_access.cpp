// The HTTP request checks: Host (DNS rebinding), Origin (cross-site WebSocket), the bearer token
// in a header or the query, and the target's path. Input lines: Host, Origin ("" = absent),
// Authorization, target, then policy entries "o:<allowed origin>" / "h:<allowed host>".
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <string>
#include <vector>

#include "common.hpp"
#include "server/access.hpp"
#include "wire/request_target.hpp"

namespace transport = gpustream::transport;
namespace ip = boost::asio::ip;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto lines = gpustream::fuzz::split_lines(gpustream::fuzz::text_of(data, size), 16);
  const auto line = [&](std::size_t i) { return i < lines.size() ? lines[i] : std::string_view{}; };
  std::vector<std::string> origins, hosts;
  for (std::size_t i = 4; i < lines.size(); ++i) {
    if (lines[i].starts_with("o:")) origins.emplace_back(lines[i].substr(2));
    if (lines[i].starts_with("h:")) hosts.emplace_back(lines[i].substr(2));
  }
  const transport::AccessPolicy local({ip::make_address_v4("127.0.0.1"), 8080}, "s3cret", origins,
                                      hosts);
  const transport::AccessPolicy any({ip::address_v6::any(), 9000}, "", origins, hosts);
  const std::optional<std::string_view> origin =
      line(1).empty() ? std::nullopt : std::optional<std::string_view>(line(1));
  for (const auto* p : {&local, &any}) {
    (void)p->host_allowed(line(0));
    (void)p->origin_allowed(origin);
    (void)p->request_authorized(line(2), line(3));
  }
  // Fixed facts whatever else the input holds.
  FUZZ_CHECK(local.host_allowed("127.0.0.1:8080"));
  FUZZ_CHECK(local.request_authorized("Bearer s3cret", line(3)));
  FUZZ_CHECK(any.request_authorized(line(2), line(3)));
  if (!local.token_matches(line(2))) FUZZ_CHECK(line(2) != "s3cret");
  (void)transport::query_parameter(line(3), "token");
  FUZZ_CHECK(transport::target_path(line(3)).size() <= line(3).size());
  return 0;
}
