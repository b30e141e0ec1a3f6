#include "simulated/simulated_gpu.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "gpustream/probes/simulated_probe.hpp"

namespace gpustream::sim {
namespace {

constexpr double kTwoPi = 6.283185307179586;
constexpr std::int64_t kNoiseBucketNs = 250'000'000;
constexpr double kMiB = 1024.0 * 1024.0;
constexpr double kGiB = 1024.0 * kMiB;
constexpr double kReservedBytes = 300 * kMiB;       // driver/context memory no process owns
constexpr double kTemperatureLagSeconds = 20.0;     // heat capacity of the board
constexpr double kPowerAverageWindowSeconds = 1.0;  // like the driver's averaged power
constexpr std::uint64_t kGolden = 0x9E3779B97F4A7C15ULL;

double clamp(double v, double lo, double hi) { return std::min(std::max(v, lo), hi); }
double round_to(double v, double step) { return std::round(v / step) * step; }
double floor_to(double v, double step) { return std::floor(v / step) * step; }
// 0..1, a sine wave with the given period and phase.
double wave(double t_s, double period_s, double phase) {
  return 0.5 + 0.5 * std::sin(kTwoPi * t_s / period_s + phase);
}

std::uint64_t device_stream(std::uint64_t seed, int index) {
  return mix64(mix64(seed) ^ (static_cast<std::uint64_t>(index) * kGolden + 0xD1B54A32D192ED03ULL));
}

}  // namespace

std::uint64_t mix64(std::uint64_t x) noexcept {
  x += kGolden;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

std::uint64_t Rng::next() noexcept {
  state_ += kGolden;
  return mix64(state_);
}

double Rng::uniform() noexcept { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

std::size_t Rng::pick(std::size_t n) noexcept {
  return static_cast<std::size_t>(uniform() * static_cast<double>(n)) % n;
}

SimulatedGpu::SimulatedGpu(std::uint64_t seed, int index)
    : seed_(seed), index_(index), id_(simulated_device_id(seed, index)) {
  Rng rng(device_stream(seed, index));
  constexpr double kMemoryGiB[] = {16, 24, 32, 48, 80};
  constexpr double kPowerLimits[] = {250, 300, 350, 450, 700};
  constexpr double kMemoryClocks[] = {1215, 1593, 9501, 10501};
  memory_total_bytes_ = kMemoryGiB[rng.pick(std::size(kMemoryGiB))] * kGiB;
  power_limit_watts_ = kPowerLimits[rng.pick(std::size(kPowerLimits))];
  idle_power_watts_ = round_to(power_limit_watts_ * rng.uniform(0.08, 0.14), 0.1);
  clock_min_mhz_ = 210;
  clock_max_mhz_ = 1695 + 15 * static_cast<double>(rng.pick(28));
  memory_clock_mhz_ = kMemoryClocks[rng.pick(std::size(kMemoryClocks))];
  ambient_celsius_ = rng.uniform(28, 36);
  temperature_rise_celsius_ = rng.uniform(38, 50);
  slow_period_s_ = rng.uniform(40, 120);
  slow_phase_ = rng.uniform(0, kTwoPi);
  fast_period_s_ = rng.uniform(5, 15);
  fast_phase_ = rng.uniform(0, kTwoPi);
  copy_period_s_ = rng.uniform(3, 9);
  copy_phase_ = rng.uniform(0, kTwoPi);
  energy_joules_ = round_to(rng.uniform(2e4, 8e5), 0.001);  // a counter running since "boot"

  static const char* const kNames[] = {"sim-train", "sim-infer", "sim-render", "sim-notebook",
                                       "sim-encode"};
  const std::size_t count = 2 + rng.pick(2);
  const std::size_t first_name = rng.pick(std::size(kNames));
  for (std::size_t i = 0; i < count; ++i) {
    ProcessTraits p;
    p.pid = 4000 + 211 * static_cast<std::int64_t>(index) + 37 * static_cast<std::int64_t>(i) +
            static_cast<std::int64_t>(rng.pick(30));
    p.name = kNames[(first_name + i) % std::size(kNames)];
    p.weight = rng.uniform(0.5, 2.0);
    p.period_s = rng.uniform(8, 30);
    p.phase = rng.uniform(0, kTwoPi);
    processes_.push_back(std::move(p));
  }
}

DeviceInfo SimulatedGpu::info() const {
  DeviceInfo d;
  d.id = id_;
  d.vendor = Vendor::simulated;
  d.index = index_;
  d.name = "Simulated GPU " + std::to_string(index_);
  char bus[32];
  std::snprintf(bus, sizeof bus, "0000:%02x:00.0", static_cast<unsigned>(index_ + 1) & 0xffU);
  d.pci_bus_id = bus;
  return d;
}

double SimulatedGpu::noise(std::int64_t t_ns, std::uint64_t channel) const noexcept {
  std::int64_t bucket = t_ns / kNoiseBucketNs;
  if (t_ns < 0 && t_ns % kNoiseBucketNs != 0) --bucket;  // floor division
  const auto h = mix64(device_stream(seed_, index_) ^ mix64(channel * kGolden) ^
                       mix64(static_cast<std::uint64_t>(bucket)));
  return 2.0 * (static_cast<double>(h >> 11) * 0x1.0p-53) - 1.0;
}

DeviceSample SimulatedGpu::sample(std::int64_t t_ns) {
  const double t = static_cast<double>(t_ns) / 1e9;
  const double slow = wave(t, slow_period_s_, slow_phase_);
  const double fast = wave(t, fast_period_s_, fast_phase_);
  const double copy = wave(t, copy_period_s_, copy_phase_);

  const double util =
      std::round(clamp(100 * (0.7 * slow + 0.25 * fast) + 5 * noise(t_ns, 1), 0, 100));
  const double mem_util = std::round(clamp(0.55 * util + 10 * fast + 3 * noise(t_ns, 2), 0, 100));
  const double mem_phase = wave(t, slow_period_s_, slow_phase_ - 0.6);  // memory leads the load
  const double mem_used = floor_to(memory_total_bytes_ * (0.06 + 0.74 * mem_phase), kMiB);
  const double busy = (0.92 * power_limit_watts_ - idle_power_watts_) * std::pow(util / 100, 1.15);
  const double power =
      round_to(clamp(idle_power_watts_ + busy + 0.015 * power_limit_watts_ * noise(t_ns, 3),
                     0.8 * idle_power_watts_, power_limit_watts_),
               0.001);

  if (!last_t_ns_) {
    temperature_celsius_ = ambient_celsius_ + temperature_rise_celsius_ * slow;
    power_average_watts_ = power;
    last_t_ns_ = t_ns;
    last_power_watts_ = power;
  } else if (t_ns > *last_t_ns_) {
    const double dt = static_cast<double>(t_ns - *last_t_ns_) / 1e9;
    energy_joules_ += 0.5 * (last_power_watts_ + power) * dt;  // the counter integrates power
    const double target = ambient_celsius_ + temperature_rise_celsius_ * util / 100;
    temperature_celsius_ +=
        (target - temperature_celsius_) * (1 - std::exp(-dt / kTemperatureLagSeconds));
    power_average_watts_ +=
        (power - power_average_watts_) * (1 - std::exp(-dt / kPowerAverageWindowSeconds));
    last_t_ns_ = t_ns;
    last_power_watts_ = power;
  }
  const double temperature = std::round(temperature_celsius_);
  double clock = clock_min_mhz_ + (clock_max_mhz_ - clock_min_mhz_) * std::min(1.0, util / 50);
  if (temperature >= 85) clock *= 0.9;
  clock = round_to(clock, 15);

  const auto s = Source::simulated;
  DeviceInfo id = info();
  DeviceSample d;
  d.id = std::move(id.id);
  d.vendor = id.vendor;
  d.index = id.index;
  d.name = std::move(id.name);
  d.pci_bus_id = std::move(id.pci_bus_id);
  d.power_state = PowerState::active;
  auto& m = d.metrics;
  m.set(Metric::utilization_percent, util, s);
  m.set(Metric::memory_utilization_percent, mem_util, s);
  m.set(Metric::memory_used_bytes, mem_used, s);
  m.set(Metric::memory_total_bytes, memory_total_bytes_, s);
  m.set(Metric::temperature_celsius, temperature, s);
  m.set(Metric::power_watts, power, s);
  m.set(Metric::power_average_watts, round_to(power_average_watts_, 0.001), s);
  m.set(Metric::power_limit_watts, power_limit_watts_, s);
  m.set(Metric::energy_joules, energy_joules_, s);
  d.energy_kind = EnergyKind::counter;
  m.set(Metric::clock_graphics_mhz, clock, s);
  m.set(Metric::clock_sm_mhz, clock, s);
  m.set(Metric::clock_memory_mhz, util > 2 ? memory_clock_mhz_ : std::min(405.0, memory_clock_mhz_),
        s);
  m.set(Metric::fan_percent, std::round(clamp(30 + (temperature - 40) * 1.6, 30, 100)), s);
  m.fill_absent(Absence::unsupported, s);

  if (power >= 0.98 * power_limit_watts_) d.throttle_reasons.push_back("power_cap");
  if (temperature >= 85) d.throttle_reasons.push_back("thermal");

  const auto engine = [&](const char* name, double v) {
    d.engines.push_back({name, Reading::of(round_to(clamp(v, 0, 100), 0.1), s)});
  };
  engine("graphics", 0.3 * util * slow + 2 * noise(t_ns, 4));
  engine("compute", util * (0.85 + 0.15 * fast));
  engine("copy", 30 * copy * (util / 100 + 0.2) + 3 * noise(t_ns, 5));

  double weight_sum = 0, share_sum = 0;
  std::vector<double> shares;
  for (const auto& p : processes_) {
    weight_sum += p.weight;
    shares.push_back(p.weight * (1 + 0.3 * std::sin(kTwoPi * t / p.period_s + p.phase)));
    share_sum += shares.back();
  }
  const double owned = std::max(0.0, mem_used - kReservedBytes);
  for (std::size_t i = 0; i < processes_.size(); ++i) {
    ProcessSample p;
    p.pid = processes_[i].pid;
    p.name = processes_[i].name;
    p.gpu_memory_bytes =
        static_cast<std::uint64_t>(floor_to(owned * processes_[i].weight / weight_sum, kMiB));
    p.gpu_utilization_percent = floor_to(util * shares[i] / share_sum, 0.1);
    d.processes.push_back(std::move(p));
  }
  return d;
}

}  // namespace gpustream::sim

namespace gpustream {

std::string simulated_device_id(std::uint64_t seed, int index) {
  // Hash (seed, index) into the starting state, so that the streams of two devices never
  // overlap (device i+1 must not start where device i continues).
  sim::Rng rng(
      sim::mix64(sim::mix64(seed ^ 0x51A7'0000'0000'0000ULL) + static_cast<std::uint64_t>(index)));
  const std::uint64_t a = rng.next();
  const std::uint64_t b = rng.next();
  char buf[64];
  std::snprintf(buf, sizeof buf, "sim-%08llx-%04llx-%04llx-%04llx-%012llx",
                static_cast<unsigned long long>(a >> 32),
                static_cast<unsigned long long>((a >> 16) & 0xffffULL),
                static_cast<unsigned long long>(a & 0xffffULL),
                static_cast<unsigned long long>(b >> 48),
                static_cast<unsigned long long>(b & 0xffffffffffffULL));
  return buf;
}

}  // namespace gpustream
