// The dashboard page served at "/". Its sources are transport/web/index.html, style.css and
// app.js; transport/web/embed.cmake inlines them into one document at build time.
#include "gpustream/transport/dashboard.hpp"

namespace gpustream::transport {
namespace {

#if __has_include("gpustream/dashboard_page.inc")
#include "gpustream/dashboard_page.inc"
#else
// The build did not run transport/web/embed.cmake (gpustream_embed_dashboard missing in
// transport/CMakeLists.txt). Serve a page that says so rather than nothing.
static constexpr std::string_view kDashboardPage = R"html(<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>gpustream</title></head>
<body><h1>gpustream</h1>
<p>This build does not contain the dashboard page (transport/web was not embedded).</p>
</body></html>
)html";
#endif

}  // namespace

std::string_view dashboard_html() noexcept { return kDashboardPage; }

}  // namespace gpustream::transport
