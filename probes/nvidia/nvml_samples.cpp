// NvmlBackend: the driver's power sample ring into DeviceSample::power_samples (under the
// backend's lock, inside a session, with a valid handle).
//
// nvmlDeviceGetSamples(NVML_TOTAL_POWER_SAMPLES, lastSeenTimeStamp) answers the entries of the
// driver's ring (about 120) newer than lastSeenTimeStamp: first with samples = NULL for their
// number, then into a reused buffer of at most PowerRing::kMaxSamples. NVML_ERROR_NOT_FOUND
// means no new entry.
//
// Time stamps: nvml.h says only "CPU Timestamp in microseconds" and names no clock, and drivers
// differ in practice (microseconds since the Unix epoch; since boot on others). So the clock is
// found per device from the newest entry: the host clock (CLOCK_REALTIME, CLOCK_BOOTTIME,
// CLOCK_MONOTONIC) whose present it precedes by less than an hour (or follows by under 60 s),
// kept while it fits. Each entry's monotonic_ns is its time stamp minus that clock's offset to
// the snapshots' steady clock (NvmlOptions::clock), the offset measured once per snapshot
// (HostClocks::now(), the host clocks read through NvmlOptions::host_clock, by default
// clock_gettime), so spacing within a snapshot is the driver's own.
//
// Bad input yields no made-up sample: entries whose time stamps repeat or go back (within a
// call, against the last one taken, or after a host clock step), a value type other than an
// unsigned integer (milliwatts), a ring that announced entries and returned none, or time
// stamps on no host clock are dropped, with an error `power_samples_invalid` in the snapshot
// and one log line per device and kind (again only after it cleared). Entries later than the
// snapshot's monotonic_ns stay in the ring for the next snapshot.
#include <time.h>

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <span>

#include "nvidia/nvml_backend.hpp"

namespace gpustream::nvidia_detail {
namespace {

constexpr std::int64_t kSecondNs = 1'000'000'000;
constexpr std::int64_t kMaxLagNs = 3600 * kSecondNs;  // the newest entry's age, at most
constexpr std::int64_t kMaxLeadNs = 60 * kSecondNs;   // ... or ahead of the clock read
constexpr const char* kFunction = "nvmlDeviceGetSamples(NVML_TOTAL_POWER_SAMPLES)";

std::int64_t read_clock(clockid_t id) {
  timespec ts{};
  ::clock_gettime(id, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * kSecondNs + ts.tv_nsec;
}

const char* clock_name(HostClocks::Clock c) {
  switch (c) {
    case HostClocks::realtime:
      return "CLOCK_REALTIME";
    case HostClocks::boottime:
      return "CLOCK_BOOTTIME";
    default:
      return "CLOCK_MONOTONIC";
  }
}

/// Nanoseconds of a driver time stamp (µs); nothing when it does not fit.
std::optional<std::int64_t> stamp_ns(unsigned long long us) {
  if (us > static_cast<unsigned long long>(std::numeric_limits<std::int64_t>::max() / 1000))
    return std::nullopt;
  return static_cast<std::int64_t>(us) * 1000;
}

/// Whether a time stamp `ns` on clock `c` is a plausible newest entry at `clocks.steady_ns`.
bool fits(const HostClocks& clocks, HostClocks::Clock c, std::int64_t ns) {
  const auto lag = clocks.steady_ns + clocks.offset_ns[c] - ns;
  return lag >= -kMaxLeadNs && lag <= kMaxLagNs;
}

/// The host clock the newest time stamp `ns` is on: `kept` while it fits, else the fitting clock
/// nearest to it; nothing when none fits.
std::optional<HostClocks::Clock> clock_of(const HostClocks& clocks, std::int64_t ns,
                                          std::optional<HostClocks::Clock> kept) {
  if (kept && fits(clocks, *kept, ns)) return kept;
  std::optional<HostClocks::Clock> best;
  std::int64_t best_lag = 0;
  for (int i = 0; i < HostClocks::count_; ++i) {
    const auto c = static_cast<HostClocks::Clock>(i);
    if (!fits(clocks, c, ns)) continue;
    const auto lag = std::llabs(clocks.steady_ns + clocks.offset_ns[c] - ns);
    if (!best || lag < best_lag) best = c, best_lag = lag;
  }
  return best;
}

/// Milliwatts of one entry of an unsigned integer type; nothing for another type.
std::optional<double> milliwatts(int type, const nvml::Value& v) {
  switch (type) {
    case nvml::kValueTypeUnsignedInt:
      return v.ui_val;
    case nvml::kValueTypeUnsignedLong:
      return static_cast<double>(v.ul_val);
    case nvml::kValueTypeUnsignedLongLong:
      return static_cast<double>(v.ull_val);
    default:
      return std::nullopt;
  }
}

}  // namespace

std::int64_t read_host_clock(NvidiaProbeOptions::HostClock c) noexcept {
  using C = NvidiaProbeOptions::HostClock;
  switch (c) {
    case C::realtime:
      return read_clock(CLOCK_REALTIME);
    case C::boottime:
#ifdef CLOCK_BOOTTIME
      return read_clock(CLOCK_BOOTTIME);
#else
      return read_clock(CLOCK_MONOTONIC);  // no such clock (not Linux)
#endif
    case C::monotonic:
      break;
  }
  return read_clock(CLOCK_MONOTONIC);
}

HostClocks HostClocks::now(const SteadyClock& steady, const HostClockReader& read) {
  using C = NvidiaProbeOptions::HostClock;
  HostClocks h;
  const auto before = steady_time_ns(steady());
  const auto real = read(C::realtime);
  const auto boot = read(C::boottime);
  const auto mono = read(C::monotonic);
  const auto after = steady_time_ns(steady());
  h.steady_ns = before + (after - before) / 2;
  h.offset_ns[realtime] = real - h.steady_ns;
  h.offset_ns[boottime] = boot - h.steady_ns;
  h.offset_ns[monotonic] = mono - h.steady_ns;
  return h;
}

void NvmlBackend::ring_error(NvmlDevice& dev, const std::string& kind, const std::string& message,
                             std::vector<SampleError>& errors) {
  const auto text = std::string(kFunction) + " on GPU " + dev.uuid + ": " + message;
  if (log_once_.first(dev.uuid + ":ring:" + kind)) logger()->warn("nvidia probe: {}", text);
  errors.push_back({"power_samples_invalid", text, dev.uuid});
}

void NvmlBackend::sample_power_ring(NvmlDevice& dev, DeviceSample& out, const HostClocks& clocks,
                                    std::int64_t monotonic_ns, std::vector<SampleError>& errors) {
  auto& ring = dev.power_ring;
  if (!api_.samples || ring.unsupported) {
    out.attributes["power_samples"] = "unsupported";
    if (!api_.samples && log_once_.first("ring:no-symbol"))
      logger()->info("nvidia probe: {} has no nvmlDeviceGetSamples: power_samples stay empty",
                     library_.path());
    return;
  }
  int type = -1;
  unsigned count = 0;
  auto rc =
      api_.samples(dev.handle, nvml::kTotalPowerSamples, ring.last_seen_us, &type, &count, nullptr);
  if (rc == nvml::kErrorNotFound || (rc == nvml::kSuccess && count == 0)) {
    succeeded(dev, Call::power_samples);  // nothing new since the last snapshot
    return;
  }
  if (rc == nvml::kErrorNotSupported || rc == nvml::kErrorFunctionNotFound) {
    ring.unsupported = true;
    failed(dev, Call::power_samples, rc, kFunction, errors);  // logged once (debug)
    out.attributes["power_samples"] = "unsupported";
    return;
  }
  if (rc != nvml::kSuccess) {
    failed(dev, Call::power_samples, rc, kFunction, errors);  // lost, or an nvml_error
    return;
  }
  const unsigned announced = count;
  count = std::min(count, PowerRing::kMaxSamples);
  if (ring.buffer.size() < count) ring.buffer.resize(count);
  type = -1;
  unsigned got = count;
  rc = api_.samples(dev.handle, nvml::kTotalPowerSamples, ring.last_seen_us, &type, &got,
                    ring.buffer.data());
  if (rc == nvml::kErrorNotFound) got = 0;
  if (rc != nvml::kSuccess && rc != nvml::kErrorNotFound) {
    failed(dev, Call::power_samples, rc, kFunction, errors);
    return;
  }
  succeeded(dev, Call::power_samples);
  got = std::min(got, count);  // never past the buffer, whatever the driver says
  if (got == 0) {
    ring_error(dev, "empty",
               "the ring announced " + std::to_string(announced) + " samples and returned none",
               errors);
    return;
  }
  log_once_.clear(dev.uuid + ":ring:empty");
  const std::span<const nvml::Sample> entries(ring.buffer.data(), got);
  if (!milliwatts(type, entries[0].value)) {
    ring_error(dev, "type",
               "value type " + std::to_string(type) + ", not an unsigned integer of milliwatts: " +
                   std::to_string(got) + " samples dropped",
               errors);
    return;
  }
  log_once_.clear(dev.uuid + ":ring:type");

  unsigned long long newest_us = 0;
  for (const auto& e : entries) newest_us = std::max(newest_us, e.time_stamp);
  const auto newest_ns = stamp_ns(newest_us);
  const auto clock = newest_ns ? clock_of(clocks, *newest_ns, ring.clock) : std::nullopt;
  if (!clock) {
    ring_error(dev, "clock",
               "time stamps on no host clock (newest " + std::to_string(newest_us) +
                   " µs): " + std::to_string(got) + " samples dropped",
               errors);
    return;
  }
  log_once_.clear(dev.uuid + ":ring:clock");
  if (ring.clock != clock)
    logger()->debug("nvidia probe: GPU {}: power sample time stamps are on {}", dev.uuid,
                    clock_name(*clock));
  ring.clock = clock;

  const auto offset = clocks.offset_ns[*clock];
  auto prev_us = ring.last_seen_us;
  unsigned dropped = 0;
  out.power_samples.reserve(got);
  for (const auto& e : entries) {
    const auto ns = stamp_ns(e.time_stamp);
    const auto at = ns ? *ns - offset : 0;
    if (!ns || e.time_stamp <= prev_us || at <= ring.last_ns) {
      ++dropped;  // repeats or goes back (or the host clock stepped back)
      continue;
    }
    if (at > monotonic_ns) break;  // after the snapshot: left for the next one
    out.power_samples.push_back({at, *milliwatts(type, e.value) / 1000.0});
    prev_us = e.time_stamp;
    ring.last_ns = at;
  }
  ring.last_seen_us = prev_us;
  if (dropped > 0) {
    ring_error(dev, "order",
               std::to_string(dropped) + " of " + std::to_string(got) +
                   " samples dropped: their time stamps repeat or go back",
               errors);
  } else {
    log_once_.clear(dev.uuid + ":ring:order");
  }
}

}  // namespace gpustream::nvidia_detail
