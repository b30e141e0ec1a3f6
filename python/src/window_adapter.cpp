// See window_adapter.hpp: swap these two bodies for Telemetry::begin_window/end_window.
#include "window_adapter.hpp"

#include <stdexcept>

namespace gpustream::python {

void WindowAdapter::begin_window(Telemetry& telemetry, const std::string& name,
                                 SubscriptionFilter filter) {
  auto window = std::make_unique<MeasurementWindow>(telemetry.channel(), std::move(filter));
  window->begin();
  std::lock_guard lock(mu_);
  if (!open_.emplace(name, std::move(window)).second)
    throw std::invalid_argument("window '" + name + "' is already open");
}

WindowSummary WindowAdapter::end_window(Telemetry& /*telemetry*/, const std::string& name) {
  std::unique_ptr<MeasurementWindow> window;
  {
    std::lock_guard lock(mu_);
    auto it = open_.find(name);
    if (it == open_.end()) throw std::invalid_argument("no window '" + name + "' is open");
    window = std::move(it->second);
    open_.erase(it);
  }
  return window->end();
}

void WindowAdapter::clear() {
  std::lock_guard lock(mu_);
  open_.clear();
}

}  // namespace gpustream::python
