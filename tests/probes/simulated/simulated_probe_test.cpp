#include "gpustream/probes/simulated_probe.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <memory>
#include <set>
#include <stdexcept>

#include "probe_harness.hpp"

namespace gpustream {
namespace {

using test::ProbeHarness;
constexpr std::int64_t kSecond = 1'000'000'000;
constexpr std::int64_t kMs = 1'000'000;

// A clock the test sets by hand; read on the work thread.
class ManualClock {
 public:
  explicit ManualClock(std::int64_t start)
      : now_(std::make_shared<std::atomic<std::int64_t>>(start)) {}
  std::function<std::int64_t()> fn() const {
    return [n = now_] { return n->load(); };
  }
  void set(std::int64_t t) { now_->store(t); }
  void advance(std::int64_t dt) { now_->fetch_add(dt); }
  std::int64_t now() const { return now_->load(); }

 private:
  std::shared_ptr<std::atomic<std::int64_t>> now_;
};

class SimulatedProbeTest : public ::testing::Test {
 protected:
  std::shared_ptr<SimulatedProbe> probe(int devices, std::uint64_t seed) {
    SimulatedProbeOptions o;
    o.devices = devices;
    o.seed = seed;
    o.monotonic_clock = mono_.fn();
    o.wall_clock = wall_.fn();
    return make_simulated_probe(harness_.executors(), std::move(o));
  }
  GpuSnapshot sample(Probe& p) {
    auto r = harness_.sample(p);
    EXPECT_FALSE(r.ec) << r.ec.message();
    return std::move(r.snapshot);
  }
  void set_time(std::int64_t t) {
    mono_.set(t);
    wall_.set(1'700'000'000 * kSecond + t);
  }

  ManualClock mono_{10 * kSecond};
  ManualClock wall_{1'700'000'000 * kSecond};
  ProbeHarness harness_;
};

double value(const DeviceSample& d, Metric m) {
  const auto& r = d.metrics[m];
  EXPECT_TRUE(r.has_value()) << to_string(m);
  return r.get().value_or(-1);
}

TEST_F(SimulatedProbeTest, DevicesHaveStableLabelledIdentities) {
  auto p = probe(3, 42);
  EXPECT_EQ(p->name(), "simulated");
  auto d = harness_.detect(*p);
  ASSERT_TRUE(d.available);
  EXPECT_TRUE(d.reason.empty());
  ASSERT_EQ(d.devices.size(), 3u);
  std::set<std::string> ids;
  for (int i = 0; i < 3; ++i) {
    const auto& info = d.devices[static_cast<std::size_t>(i)];
    EXPECT_EQ(info.index, i);
    EXPECT_EQ(info.vendor, Vendor::simulated);
    EXPECT_EQ(info.name, "Simulated GPU " + std::to_string(i));
    EXPECT_EQ(info.pci_bus_id, "0000:0" + std::to_string(i + 1) + ":00.0");
    EXPECT_EQ(info.id, simulated_device_id(42, i));
    EXPECT_EQ(info.id.rfind("sim-", 0), 0u);
    EXPECT_EQ(info.id.size(), 4u + 36u);  // "sim-" + UUID form
    ids.insert(info.id);
  }
  EXPECT_EQ(ids.size(), 3u);
  // Independent per device: no part of one id reappears in the next one.
  const auto& id0 = d.devices[0].id;
  const auto& id1 = d.devices[1].id;
  EXPECT_EQ(id0.find(id1.substr(4, 8)), std::string::npos) << id0 << " vs " << id1;
  EXPECT_EQ(id1.find(id0.substr(id0.size() - 12)), std::string::npos) << id0 << " vs " << id1;
  EXPECT_NE(simulated_device_id(43, 0), simulated_device_id(42, 0));

  const auto snap = sample(*p);
  ASSERT_EQ(snap.devices.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(snap.devices[i].id, d.devices[i].id);
    EXPECT_EQ(snap.devices[i].name, d.devices[i].name);
    EXPECT_EQ(snap.devices[i].pci_bus_id, d.devices[i].pci_bus_id);
  }
}

TEST_F(SimulatedProbeTest, SameSeedAndTimesGiveIdenticalSnapshots) {
  auto a = probe(3, 7);
  auto b = probe(3, 7);
  auto other = probe(3, 8);
  const std::int64_t times[] = {1 * kSecond, 1100 * kMs,   1350 * kMs,  5 * kSecond,
                                5001 * kMs,  60 * kSecond, 61 * kSecond};
  for (const auto t : times) {
    set_time(t);
    const auto sa = sample(*a);
    const auto sb = sample(*b);
    const auto so = sample(*other);
    EXPECT_EQ(sa.monotonic_ns, t);
    EXPECT_EQ(sa.time_unix_ns, 1'700'000'000 * kSecond + t);
    EXPECT_EQ(sa.monotonic_ns, sb.monotonic_ns);
    EXPECT_EQ(sa.time_unix_ns, sb.time_unix_ns);
    EXPECT_EQ(sa.probe, sb.probe);
    EXPECT_EQ(sa.errors, sb.errors);
    EXPECT_TRUE(sa.devices == sb.devices) << "at t=" << t;
    EXPECT_FALSE(sa.devices == so.devices) << "another seed must give other GPUs";
  }
}

TEST_F(SimulatedProbeTest, ValuesMoveWithTime) {
  auto p = probe(1, 1);
  std::set<double> utils, powers;
  for (int i = 0; i < 100; ++i) {
    set_time(kSecond + i * 500 * kMs);
    const auto s = sample(*p);
    utils.insert(value(s.devices[0], Metric::utilization_percent));
    powers.insert(value(s.devices[0], Metric::power_watts));
  }
  EXPECT_GT(utils.size(), 10u);
  EXPECT_GT(*utils.rbegin() - *utils.begin(), 20.0);
  EXPECT_GT(powers.size(), 10u);
}

TEST_F(SimulatedProbeTest, EnergyCounterIsMonotonicAndTheIntegralOfPower) {
  auto p = probe(4, 99);
  set_time(kSecond);
  auto prev = sample(*p);
  for (const auto& d : prev.devices) {
    EXPECT_EQ(d.energy_kind, EnergyKind::counter);
    EXPECT_EQ(d.metrics[Metric::energy_joules].source(), Source::simulated);
  }
  std::vector<double> integral(4, 0.0);
  const auto first = prev;
  for (int i = 1; i <= 200; ++i) {
    set_time(kSecond + i * 100 * kMs + (i % 3) * 7 * kMs);  // irregular steps
    auto cur = sample(*p);
    const double dt = static_cast<double>(cur.monotonic_ns - prev.monotonic_ns) / 1e9;
    for (std::size_t k = 0; k < cur.devices.size(); ++k) {
      const double e0 = value(prev.devices[k], Metric::energy_joules);
      const double e1 = value(cur.devices[k], Metric::energy_joules);
      const double p0 = value(prev.devices[k], Metric::power_watts);
      const double p1 = value(cur.devices[k], Metric::power_watts);
      ASSERT_GT(e1, e0) << "device " << k << " step " << i;
      const double expected = 0.5 * (p0 + p1) * dt;
      EXPECT_NEAR(e1 - e0, expected, 1e-6 * std::max(1.0, expected)) << "step " << i;
      integral[k] += expected;
    }
    prev = std::move(cur);
  }
  for (std::size_t k = 0; k < 4; ++k) {
    const double total = value(prev.devices[k], Metric::energy_joules) -
                         value(first.devices[k], Metric::energy_joules);
    EXPECT_NEAR(total, integral[k], 1e-6 * integral[k]);
  }

  // Sampling again at the same instant (or earlier) adds nothing.
  const auto again = sample(*p);
  mono_.set(kSecond);
  const auto earlier = sample(*p);
  for (std::size_t k = 0; k < 4; ++k) {
    EXPECT_EQ(value(again.devices[k], Metric::energy_joules),
              value(prev.devices[k], Metric::energy_joules));
    EXPECT_EQ(value(earlier.devices[k], Metric::energy_joules),
              value(prev.devices[k], Metric::energy_joules));
  }
}

TEST_F(SimulatedProbeTest, ValuesStayInPlausibleRanges) {
  auto p = probe(4, 2024);
  std::vector<double> min_power(4, 1e9), max_power(4, -1);
  for (int i = 0; i < 400; ++i) {
    set_time(5 * kSecond + i * 750 * kMs);
    const auto s = sample(*p);
    ASSERT_EQ(s.devices.size(), 4u);
    for (std::size_t k = 0; k < 4; ++k) {
      const auto& d = s.devices[k];
      const double util = value(d, Metric::utilization_percent);
      EXPECT_GE(util, 0);
      EXPECT_LE(util, 100);
      const double mem_util = value(d, Metric::memory_utilization_percent);
      EXPECT_GE(mem_util, 0);
      EXPECT_LE(mem_util, 100);
      const double total = value(d, Metric::memory_total_bytes);
      const double used = value(d, Metric::memory_used_bytes);
      EXPECT_GE(total, 8.0 * (1ull << 30));
      EXPECT_GT(used, 0);
      EXPECT_LE(used, total);
      const double limit = value(d, Metric::power_limit_watts);
      const double power = value(d, Metric::power_watts);
      const double avg = value(d, Metric::power_average_watts);
      EXPECT_GT(power, 0);
      EXPECT_LE(power, limit);
      min_power[k] = std::min(min_power[k], power);
      max_power[k] = std::max(max_power[k], power);
      EXPECT_GE(avg, min_power[k] - 0.002) << "an average lies within what it averaged";
      EXPECT_LE(avg, max_power[k] + 0.002);
      const double temp = value(d, Metric::temperature_celsius);
      EXPECT_GE(temp, 20);
      EXPECT_LE(temp, 95);
      const double gfx = value(d, Metric::clock_graphics_mhz);
      EXPECT_GE(gfx, 100);
      EXPECT_LE(gfx, 3000);
      EXPECT_GT(value(d, Metric::clock_sm_mhz), 0);
      EXPECT_GT(value(d, Metric::clock_memory_mhz), 0);
      const double fan = value(d, Metric::fan_percent);
      EXPECT_GE(fan, 0);
      EXPECT_LE(fan, 100);
      EXPECT_EQ(d.power_state, PowerState::active);

      ASSERT_EQ(d.engines.size(), 3u);
      EXPECT_EQ(d.engines[0].name, "graphics");
      EXPECT_EQ(d.engines[1].name, "compute");
      EXPECT_EQ(d.engines[2].name, "copy");
      for (const auto& e : d.engines) {
        ASSERT_TRUE(e.utilization_percent.has_value());
        EXPECT_GE(e.utilization_percent.value(), 0);
        EXPECT_LE(e.utilization_percent.value(), 100);
      }
      ASSERT_GE(d.processes.size(), 2u);
      double proc_mem = 0, proc_util = 0;
      std::set<std::int64_t> pids;
      for (const auto& pr : d.processes) {
        ASSERT_TRUE(pr.gpu_memory_bytes);
        ASSERT_TRUE(pr.gpu_utilization_percent);
        EXPECT_GT(pr.pid, 0);
        EXPECT_FALSE(pr.name.empty());
        pids.insert(pr.pid);
        proc_mem += static_cast<double>(*pr.gpu_memory_bytes);
        proc_util += *pr.gpu_utilization_percent;
      }
      EXPECT_EQ(pids.size(), d.processes.size());
      EXPECT_LE(proc_mem, used);
      EXPECT_LE(proc_util, util + 1e-9);
    }
  }
}

TEST_F(SimulatedProbeTest, EveryPresentValueIsSimulatedAndTheRestUnsupported) {
  auto p = probe(2, 5);
  const auto s = sample(*p);
  for (const auto& d : s.devices) {
    EXPECT_EQ(d.vendor, Vendor::simulated);
    for (std::size_t i = 0; i < kMetricCount; ++i) {
      const auto m = static_cast<Metric>(i);
      const auto& r = d.metrics[m];
      if (r.has_value()) {
        EXPECT_EQ(r.source(), Source::simulated) << to_string(m);
      } else {
        EXPECT_EQ(r.reason(), Absence::unsupported) << to_string(m);
      }
    }
    EXPECT_FALSE(d.metrics[Metric::fan_rpm].has_value());
    EXPECT_FALSE(d.metrics[Metric::gtt_used_bytes].has_value());
    EXPECT_TRUE(d.metrics[Metric::energy_joules].has_value());
    for (const auto& e : d.engines) EXPECT_EQ(e.utilization_percent.source(), Source::simulated);
  }
}

TEST_F(SimulatedProbeTest, TemperatureLagsUtilization) {
  auto p = probe(2, 11);
  double max_util_jump = 0;
  set_time(kSecond);
  auto prev = sample(*p);
  for (int i = 1; i < 300; ++i) {
    set_time(kSecond + i * 100 * kMs);
    auto cur = sample(*p);
    for (std::size_t k = 0; k < 2; ++k) {
      max_util_jump =
          std::max(max_util_jump, std::abs(value(cur.devices[k], Metric::utilization_percent) -
                                           value(prev.devices[k], Metric::utilization_percent)));
      EXPECT_LE(std::abs(value(cur.devices[k], Metric::temperature_celsius) -
                         value(prev.devices[k], Metric::temperature_celsius)),
                1.0)
          << "temperature must not follow a utilization jump within 100 ms";
    }
    prev = std::move(cur);
  }
  EXPECT_GE(max_util_jump, 5.0) << "utilization should jump somewhere, or this proves nothing";
}

TEST_F(SimulatedProbeTest, RejectsBadDeviceCounts) {
  EXPECT_THROW(probe(0, 1), std::invalid_argument);
  EXPECT_THROW(probe(SimulatedProbeOptions::kMaxDevices + 1, 1), std::invalid_argument);
  EXPECT_NO_THROW(probe(SimulatedProbeOptions::kMaxDevices, 1));
}

TEST(SimulatedProbeRealClock, UsesTheSteadyAndWallClocksByDefault) {
  ProbeHarness harness;
  auto p = make_simulated_probe(harness.executors(), {});
  const auto before = steady_now_ns();
  auto r = harness.sample(*p);
  ASSERT_FALSE(r.ec);
  EXPECT_GE(r.snapshot.monotonic_ns, before);
  EXPECT_GT(r.snapshot.time_unix_ns, 1'600'000'000 * kSecond);
  EXPECT_EQ(r.snapshot.devices.size(), 1u);
  EXPECT_FALSE(r.snapshot.host);
}

}  // namespace
}  // namespace gpustream
