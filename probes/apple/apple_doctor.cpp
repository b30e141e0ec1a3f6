// The doctor's Apple Silicon check: macmon and its version (macmon is read only on macOS unless
// a path is given, as the probe does).
#include "gpustream/probes/apple_probe.hpp"
#include "toolkit/doctor_checks.hpp"

namespace gpustream::doctor::detail {

void check_apple(const Context& c) {
  constexpr std::string_view p = "apple";
  const auto macmon = apple_probe_options(c.options.config()).macmon;
  if (macmon.empty() && !kIsMacOS) {
    c.add(p, "macmon", Status::info,
          "not macOS: Apple Silicon GPUs are read through macmon on macOS (--macmon PATH uses a "
          "macmon-compatible tool anyway)");
    return;
  }
  const auto v = machine::tool_version({macmon.empty() ? "macmon" : macmon, "--version"},
                                       c.options.tool_timeout);
  add_tool_finding(c, p, "macmon", v, /*needed=*/true,
                   "brew install macmon   # or give --macmon PATH");
}

}  // namespace gpustream::doctor::detail
