// Placeholder dashboard page; the real page replaces this file's content.
#include "gpustream/transport/dashboard.hpp"

namespace gpustream::transport {

std::string_view dashboard_html() noexcept {
  static constexpr std::string_view kPage = R"html(<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>gpustream</title></head>
<body><h1>gpustream</h1><p>The dashboard is loading&hellip;</p></body>
</html>
)html";
  return kPage;
}

}  // namespace gpustream::transport
