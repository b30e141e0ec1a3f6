// gpustream/detail/log_in_process.hpp — problems said once per process, not once per Telemetry,
// probe or window: a program that builds and stops many Telemetry instances (a loop of
// start/stop cycles) is told each once. Used for what does not depend on one instance's state:
// the interval clamp of a probe, the no-GPU fallback, window-name mistakes. A sample error stays
// per probe (LogOnce in the scheduler): it is said again once it has cleared and come back.
#pragma once

#include <string>

namespace gpustream {

/// True the first time `key` is seen in this process. Keys come from a bounded set (a kind of
/// problem, a probe name, intervals; never user data). Thread-safe.
bool first_in_process(const std::string& key);
/// Forgets every key (tests only).
void forget_logged_in_process();

}  // namespace gpustream
