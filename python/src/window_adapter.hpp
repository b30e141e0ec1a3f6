// The ONE place where the Python module maps telemetry.window("name") to the SDK.
//
// Today it runs a MeasurementWindow (gpustream/measurement.hpp) over the Telemetry's channel:
// the window covers the samples published between begin and end. When the SDK gains exact
// windows (Telemetry::begin_window(name, filter) / Telemetry::end_window(name), sampling at both
// edges), the bodies of begin_window()/end_window() in window_adapter.cpp become those two calls
// and this class keeps no state; nothing else in the module changes.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "gpustream/channel.hpp"
#include "gpustream/measurement.hpp"
#include "gpustream/telemetry.hpp"

namespace gpustream::python {

/// Named, possibly overlapping windows of one Telemetry. Thread-safe. Blocking: call without
/// the GIL.
class WindowAdapter {
 public:
  /// Opens window `name` (std::invalid_argument when one of that name is open).
  void begin_window(Telemetry& telemetry, const std::string& name, SubscriptionFilter filter);
  /// Closes it and returns its summary (std::invalid_argument when none of that name is open).
  WindowSummary end_window(Telemetry& telemetry, const std::string& name);
  /// Drops every open window (before the Telemetry goes away).
  void clear();

 private:
  std::mutex mu_;
  std::map<std::string, std::unique_ptr<MeasurementWindow>> open_;
};

}  // namespace gpustream::python
