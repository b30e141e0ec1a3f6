// MeasurementWindow with exact edges on a vendor's energy counter: the fake NVML's known power
// curve (measurement_edges_test.cpp does the same with the simulated probe). Built with the
// nvidia probe only.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "gpustream/dynamic_library.hpp"
#include "gpustream/measurement.hpp"
#include "gpustream/probes/nvidia_probe.hpp"
#include "gpustream/telemetry.hpp"
#include "probes/nvidia/nvidia_fakes.hpp"
#include "support/temp_tree.hpp"

namespace gpustream::test {
namespace {

using namespace std::chrono_literals;

// The fake libnvidia-ml.so.1 with a known power curve (scenario key power_curve) on the fake's
// own time, which the test sets before each edge: NVML's energy counter read at the two edges
// gives the energy of exactly the span between them (to its 1 mJ resolution).
class NvmlEdgeWindowTest : public ::testing::Test {
 protected:
  void SetUp() override {
    set_time_ = lib_.required<void(long long)>("gpustreamFakeNvmlSetTimeNs");
    set_time_(0);
    nvml_.scenario(
        "devices=2\n"
        "device.0.power_curve=250000:120000:700\n"
        "device.1.power_curve=90000:30000:2300\n");
    Config c;
    c.interval = std::chrono::milliseconds{60000};  // the grid stays out of the way
    auto library = nvml_.path();
    auto procfs = proc_.path();
    telemetry_ = std::make_unique<Telemetry>(
        c, [library, procfs](const Config&, const ProbeExecutors& ex, std::vector<std::string>&) {
          NvidiaProbeOptions o;
          o.nvml_library = library;
          o.use = NvidiaProbeOptions::Use::nvml_only;
          o.library_session = LibrarySessionMode::persistent;
          o.paths.procfs_root = procfs;
          return std::vector<ProbePtr>{make_nvidia_probe(ex, o)};
        });
    telemetry_->start();
    ASSERT_EQ(telemetry_->wait_for_first_samples(10s).size(), 1u);
  }
  void TearDown() override {
    telemetry_->stop();
    set_time_(0);
  }

  void set_ms(double ms) { set_time_(static_cast<long long>(ms * 1e6)); }

  FakeNvml nvml_;
  DynamicLibrary lib_ = DynamicLibrary::load(fakes::kFakeNvml);
  void (*set_time_)(long long) = nullptr;
  TempTree proc_;
  std::unique_ptr<Telemetry> telemetry_;
};

/// E(t) of a curve base + amplitude * sin(2π t / period) (mW, ms), joules between ms0 and ms1.
double energy_j(double base_mw, double amplitude_mw, double period_ms, double ms0, double ms1) {
  const auto e = [&](double ms) {
    const double w = 2 * 3.14159265358979323846 / (period_ms * 1e-3);
    const double t = ms * 1e-3;
    return (base_mw * t + amplitude_mw / w * (1 - std::cos(w * t))) * 1e-3;
  };
  return e(ms1) - e(ms0);
}

TEST_F(NvmlEdgeWindowTest, ShortAndLongWindowsWithinOnePercent) {
  struct Case {
    double begin_ms, end_ms;
  };
  for (const auto c : {Case{1000, 1050}, Case{2000, 12000}}) {  // 50 ms, then 10 s
    set_ms(c.begin_ms);
    telemetry_->begin_window("w");
    set_ms(c.end_ms);
    const auto s = telemetry_->end_window("w");
    EXPECT_TRUE(s.exact_edges);
    ASSERT_EQ(s.devices.size(), 2u);
    const double truth[] = {energy_j(250000, 120000, 700, c.begin_ms, c.end_ms),
                            energy_j(90000, 30000, 2300, c.begin_ms, c.end_ms)};
    for (std::size_t i = 0; i < 2; ++i) {
      const auto& d = s.devices[i];
      EXPECT_EQ(d.energy_kind, EnergyKind::counter);
      EXPECT_EQ(d.begin_edge, EdgeKind::sampled);
      EXPECT_EQ(d.end_edge, EdgeKind::sampled);
      EXPECT_NEAR(d.energy_joules.value_or(-1), truth[i], 0.01 * truth[i])
          << "device " << i << ", window " << c.end_ms - c.begin_ms << " ms";
    }
    EXPECT_EQ(s.overhead.edge_samples, 2u);
  }
}

}  // namespace
}  // namespace gpustream::test
