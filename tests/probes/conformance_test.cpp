// The shared contract of every probe, checked the same way for each source of each probe, each
// against the fakes of its vendor's real interface:
//   * fixed keys: a non-empty id, the case's vendor, a name, a canonical or empty PCI bus id;
//   * units within physical ranges, every present value finite and with a source;
//   * every metric present or absent with a reason (never `not_collected`); energy_kind set with
//     an energy value, power_kind only with a power value;
//   * device ids stable across samples and equal to detection's; one GPU seen by two sources of
//     one vendor has one id;
//   * processes sorted by pid, and with a name and host RSS where /proc/<pid>/statm exists;
//   * power and energy consistent (counter increase ≈ ∫ power) where the fake models both.
// The cases live in each vendor's test folder (tests/probes/<vendor>/<vendor>_conformance_test.cpp,
// registered on ProbeConformance: conformance.hpp); every registry row also answers the row
// contract (row_conformance.hpp).
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "conformance.hpp"
#include "gpustream/probes/pci.hpp"
#include "gpustream/probes/registry.hpp"
#include "row_conformance.hpp"
#include "support/temp_tree.hpp"

namespace gpustream {
namespace {

using test::ConformanceCase;
using test::ids;
using test::kConformanceSamples;
using test::ProbeConformance;
using test::ProbeRun;
using test::TempTree;

// ---- the checks ---------------------------------------------------------------------------

struct Range {
  double lo, hi;
};

Range range_of(Metric m) {
  switch (m) {
    case Metric::utilization_percent:
    case Metric::memory_utilization_percent:
    case Metric::fan_percent:
      return {0, 100};
    case Metric::temperature_celsius:
      return {-40, 150};
    case Metric::power_watts:
    case Metric::power_average_watts:
    case Metric::power_limit_watts:
      return {0, 3000};
    case Metric::clock_graphics_mhz:
    case Metric::clock_sm_mhz:
    case Metric::clock_memory_mhz:
      return {0, 10000};
    case Metric::fan_rpm:
      return {0, 50000};
    default:
      return {0, 1e18};  // bytes, joules
  }
}

void check_reading(const Reading& r, const std::string& where, Range range) {
  if (r.has_value()) {
    EXPECT_TRUE(std::isfinite(r.value())) << where;
    EXPECT_GE(r.value(), range.lo) << where;
    EXPECT_LE(r.value(), range.hi) << where;
    EXPECT_NE(r.source(), Source::none) << where << ": a value without a source";
  } else {
    EXPECT_NE(r.reason(), Absence::not_collected) << where << ": absent without a reason";
  }
}

void check_device(const ConformanceCase& row, const DeviceSample& d, const std::string& at) {
  const std::string where = std::string(row.name) + " " + at + " " + d.id;
  EXPECT_FALSE(d.id.empty()) << where;
  EXPECT_EQ(d.vendor, row.vendor) << where;
  EXPECT_FALSE(d.name.empty()) << where;
  EXPECT_GE(d.index, 0) << where;
  if (!d.pci_bus_id.empty()) {
    EXPECT_EQ(pci::normalize_bus_id(d.pci_bus_id), d.pci_bus_id) << where;
  }
  for (std::size_t i = 0; i < kMetricCount; ++i) {
    const auto m = static_cast<Metric>(i);
    check_reading(d.metrics[m], where + " " + std::string(to_string(m)), range_of(m));
  }
  const auto& m = d.metrics;
  if (m[Metric::memory_used_bytes] && m[Metric::memory_total_bytes]) {
    EXPECT_LE(m[Metric::memory_used_bytes].value(), m[Metric::memory_total_bytes].value()) << where;
  }
  if (m[Metric::gtt_used_bytes] && m[Metric::gtt_total_bytes]) {
    EXPECT_LE(m[Metric::gtt_used_bytes].value(), m[Metric::gtt_total_bytes].value()) << where;
  }
  if (m[Metric::energy_joules]) {
    EXPECT_TRUE(d.energy_kind) << where << ": energy without a kind";
  }
  if (d.power_kind) {
    EXPECT_TRUE(m[Metric::power_watts]) << where << ": power_kind without power";
  }
  for (const auto& e : d.engines)
    check_reading(e.utilization_percent, where + " engine " + e.name, {0, 100});
  std::int64_t last_pid = 0;
  for (const auto& p : d.processes) {
    EXPECT_GT(p.pid, last_pid) << where << ": processes not sorted by pid (or repeated)";
    last_pid = p.pid;
    if (p.gpu_utilization_percent) {
      EXPECT_GE(*p.gpu_utilization_percent, 0.0) << where;
      EXPECT_LE(*p.gpu_utilization_percent, 100.0) << where;
    }
    for (const auto& e : p.engines)
      check_reading(e.utilization_percent, where + " pid engine " + e.name, {0, 100});
  }
}

// ΔE / Δt ≈ power at the later sample, where both come from the device's counter and power.
void check_energy(const ConformanceCase& row, const GpuSnapshot& a, const GpuSnapshot& b) {
  for (const auto& d2 : b.devices) {
    const auto* d1 = a.find_device(d2.id);
    if (!d1) continue;
    const auto& e1 = d1->metrics[Metric::energy_joules];
    const auto& e2 = d2.metrics[Metric::energy_joules];
    const auto& p2 = d2.metrics[Metric::power_watts];
    if (!e1 || !e2 || !p2 || d2.energy_kind != EnergyKind::counter) continue;
    const double seconds = static_cast<double>(b.monotonic_ns - a.monotonic_ns) / 1e9;
    ASSERT_GT(seconds, 0) << row.name;
    const double from_counter = (e2.value() - e1.value()) / seconds;
    const double p1 = d1->metrics[Metric::power_watts].get().value_or(p2.value());
    const double mean_power = (p1 + p2.value()) / 2;  // the counter integrates the whole interval
    EXPECT_NEAR(from_counter, mean_power,
                0.05 * std::max(mean_power, 1.0) + 0.5 * std::abs(p2.value() - p1))
        << row.name << " " << d2.id;
  }
}

// "My process" is vendor-neutral: every device of the sample is answered, with the process's
// own figure where the source lists processes, and absent with a reason where it cannot.
void check_my_process(const ConformanceCase& row, const ProbeRun& r) {
  const auto& mine = r.mine;
  EXPECT_TRUE(mine.host_rss_bytes) << row.name;
  EXPECT_TRUE(mine.errors.empty()) << row.name << ": " << mine.errors.front();
  ASSERT_EQ(mine.devices.size(), r.samples.back().devices.size()) << row.name;
  bool holds_memory = false;
  for (std::size_t i = 0; i < mine.devices.size(); ++i) {
    const auto& u = mine.devices[i];
    const auto& d = r.samples.back().devices[i];
    EXPECT_EQ(u.device_id, d.id) << row.name;
    if (!row.lists_processes) {
      EXPECT_FALSE(u.gpu_memory_bytes) << row.name << " " << u.device_id;
      EXPECT_EQ(u.absent, Absence::unsupported) << row.name;
      EXPECT_FALSE(u.reason.empty()) << row.name;
      EXPECT_EQ(d.processes_absent, Absence::unsupported) << row.name;
      continue;
    }
    EXPECT_FALSE(d.processes_absent) << row.name << " " << d.id;
    if (u.gpu_memory_bytes) {
      EXPECT_FALSE(u.absent) << row.name;
      holds_memory = holds_memory || *u.gpu_memory_bytes > 0;
    } else {
      EXPECT_TRUE(u.absent && !u.reason.empty()) << row.name << " " << u.device_id;
    }
  }
  // The fakes' "self" is a GPU client holding memory, unless the case says otherwise.
  if (row.self_holds_memory) EXPECT_TRUE(holds_memory) << row.name;
  if (row.check_mine) row.check_mine(mine);
}

TEST_P(ProbeConformance, HoldsTheSharedContract) {
  const ConformanceCase& row = GetParam();
  const ProbeRun r = row.run();
  ASSERT_TRUE(r.detection.available) << row.name << ": " << r.detection.reason;
  ASSERT_FALSE(r.detection.devices.empty()) << row.name;
  ASSERT_EQ(r.samples.size(), static_cast<std::size_t>(kConformanceSamples)) << row.name;
  const auto detected = ids(r.detection.devices);
  for (const auto& info : r.detection.devices) {
    EXPECT_EQ(info.vendor, row.vendor) << row.name;
    if (!info.pci_bus_id.empty()) {
      EXPECT_EQ(pci::normalize_bus_id(info.pci_bus_id), info.pci_bus_id);
    }
  }
  for (int i = 0; i < kConformanceSamples; ++i) {
    const auto& s = r.samples[static_cast<std::size_t>(i)];
    EXPECT_EQ(ids(s), detected) << row.name << " sample " << i << ": device ids moved";
    for (const auto& d : s.devices) check_device(row, d, "sample " + std::to_string(i));
    if (i > 0 && row.energy_models_power)
      check_energy(row, r.samples[static_cast<std::size_t>(i - 1)], s);
  }
  check_my_process(row, r);
}

// Each vendor's test folder instantiates it with its cases; a build with no vendor has none.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(ProbeConformance);

// Every row of the table (a test that adds a row checks it the same way).
TEST(RowConformance, EveryRowAnswersTheRowContract) {
  TempTree t;
  t.dir("sys");
  t.dir("proc");
  t.dir("dev");
  Config config;
  config.paths = {
      .sysfs_root = t.path("sys"), .procfs_root = t.path("proc"), .devfs_root = t.path("dev")};
  for (const auto& row : probe_rows()) test::check_row_conforms(row, config);
}

}  // namespace
}  // namespace gpustream
