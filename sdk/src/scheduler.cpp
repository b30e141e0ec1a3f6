// The SDK's Scheduler: BasicScheduler over std::chrono::steady_clock, compiled once here.
#include "gpustream/scheduler.hpp"

#include <string>

#include "gpustream/detail/scheduler_impl.hpp"

namespace gpustream {

ScheduleOptions ScheduleOptions::from_config(const Config& config, std::string_view probe) {
  ScheduleOptions o;
  o.interval = config.interval;
  if (const auto it = config.probe_intervals.find(std::string(probe));
      it != config.probe_intervals.end())
    o.interval = it->second;
  o.timeout = config.sample_timeout;
  o.backoff_initial = config.backoff_initial;
  o.backoff_max = config.backoff_max;
  return o;
}

template class BasicScheduler<std::chrono::steady_clock>;

}  // namespace gpustream
