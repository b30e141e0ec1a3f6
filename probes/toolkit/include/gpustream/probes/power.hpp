// gpustream/probes/power.hpp — the one rule for `power_watts`, shared by every probe.
//
// Contract: `power_watts` is the device's power draw whenever the source gives any power figure.
// An instantaneous reading is preferred; a source that only has the driver's average (a hwmon
// power<N>_average without power<N>_input, a vendor tool's or library's average package power)
// gives that average, and DeviceSample::power_kind says PowerKind::average. `power_average_watts`
// keeps the driver's average as an extra.
//
// Thread safety: pure functions. Cancellation: nothing to cancel.
#pragma once

#include "gpustream/model.hpp"

namespace gpustream::power {

/// Applies the contract to one device, once its metrics are read: when power_watts has no value
/// and power_average_watts has one, power_watts takes the average (same value, same source) and
/// power_kind becomes PowerKind::average. Otherwise nothing changes (an absent power_watts keeps
/// its own reason, e.g. no_permission).
void settle(DeviceSample& d) noexcept;

}  // namespace gpustream::power
