// The ONE place where the Python module maps telemetry.window("name") to the SDK: the exact
// windows of Telemetry::begin_window(name, filter) / Telemetry::end_window(name), which take a
// fresh sample of each windowed probe at both edges (docs/embedding.md, "Measurement windows").
#pragma once

#include <string>

#include "gpustream/channel.hpp"
#include "gpustream/measurement.hpp"
#include "gpustream/telemetry.hpp"

namespace gpustream::python {

/// Named, possibly overlapping windows of one Telemetry (held by the Telemetry). Thread-safe.
/// Blocking (edge samples): call without the GIL.
class WindowAdapter {
 public:
  /// Opens window `name` (std::invalid_argument when one of that name is open).
  void begin_window(Telemetry& telemetry, const std::string& name, SubscriptionFilter filter);
  /// Closes it and returns its summary (std::invalid_argument when none of that name is open).
  WindowSummary end_window(Telemetry& telemetry, const std::string& name);
};

}  // namespace gpustream::python
