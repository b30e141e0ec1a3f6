// gpustream doctor — for each probe: what it looked for, what it found, what blocks it, the fix.
#include <iostream>

#include "commands.hpp"
#include "gpustream/probes/doctor.hpp"
#include "options.hpp"

namespace gpustream::cli {

int run_doctor(const Config& config, const DoctorOptions& o) {
  auto options = doctor::options_from_config(config);
  options.tool_timeout =
      std::chrono::milliseconds(static_cast<std::int64_t>(o.tool_timeout_seconds * 1000));
  options.getenv = [env = o.environment](std::string_view name) -> std::optional<std::string> {
    const auto it = env.find(std::string(name));
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
  const auto report = doctor::run(options);
  std::cout << (o.json ? doctor::to_json(report) + "\n" : doctor::to_text(report));
  std::cout.flush();
  return report.fully_readable() ? kExitOk : kExitFailure;
}

}  // namespace gpustream::cli
