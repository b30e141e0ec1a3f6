// Telemetry derives memory_free_bytes (total − used, source derived) before publishing, for a
// probe that reports only total and used, and answers fits()/best_device() from the latest
// snapshots.
#include <gtest/gtest.h>

#include "gpustream/blocking_probe.hpp"
#include "gpustream/telemetry.hpp"

namespace gpustream {
namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;

class MemoryProbe final : public BlockingProbe {
 public:
  explicit MemoryProbe(ProbeExecutors ex) : BlockingProbe(std::move(ex)) {}
  std::string_view name() const noexcept override { return "mem"; }

 protected:
  Detection detect() override {
    Detection d;
    d.available = true;
    d.devices.push_back({"gpu-0", Vendor::amd, 0, "Mem", ""});
    return d;
  }
  GpuSnapshot sample() override {
    GpuSnapshot s;
    DeviceSample d;
    d.id = "gpu-0";
    d.metrics.set(Metric::memory_total_bytes, 16 * kGiB, Source::sysfs);
    d.metrics.set(Metric::memory_used_bytes, 6 * kGiB, Source::sysfs);
    d.metrics.fill_absent(Absence::unsupported, Source::sysfs);
    s.devices.push_back(std::move(d));
    return s;
  }
};

TEST(TelemetryFreeMemory, DerivedBeforePublishingAndUsedByFits) {
  Config c;
  c.probes = {"mem"};
  c.interval = std::chrono::milliseconds{20};
  Telemetry t(c, [](const Config&, const ProbeExecutors& ex, std::vector<std::string>&) {
    return std::vector<ProbePtr>{std::make_shared<MemoryProbe>(ex)};
  });
  t.start();
  const auto snaps = t.wait_for_first_samples(std::chrono::seconds{30});
  ASSERT_EQ(snaps.size(), 1u);
  ASSERT_EQ(snaps[0]->devices.size(), 1u);
  EXPECT_EQ(snaps[0]->devices[0].metrics[Metric::memory_free_bytes],
            Reading::of(10 * kGiB, Source::derived));
  const auto best = t.best_device(static_cast<std::uint64_t>(8 * kGiB));
  ASSERT_TRUE(best);
  EXPECT_EQ(best->device_id, "gpu-0");
  EXPECT_EQ(best->free_bytes, static_cast<std::uint64_t>(10 * kGiB));
  EXPECT_TRUE(t.fits(static_cast<std::uint64_t>(11 * kGiB)).empty());
  t.stop();
}

}  // namespace
}  // namespace gpustream
