// The Python module's windows are the SDK's exact windows (see window_adapter.hpp).
#include "window_adapter.hpp"

namespace gpustream::python {

void WindowAdapter::begin_window(Telemetry& telemetry, const std::string& name,
                                 SubscriptionFilter filter) {
  telemetry.begin_window(name, std::move(filter));
}

WindowSummary WindowAdapter::end_window(Telemetry& telemetry, const std::string& name) {
  return telemetry.end_window(name);
}

}  // namespace gpustream::python
