// gpustream/transport/dashboard.hpp — the dashboard page served at "/".
//
// The page is one self-contained HTML document compiled into the library (no third-party
// code); it connects back to /ws on the same origin. Thread safety: returns static data.
#pragma once

#include <string_view>

namespace gpustream::transport {

/// The complete HTML document (static storage, valid for the program's life).
std::string_view dashboard_html() noexcept;

}  // namespace gpustream::transport
