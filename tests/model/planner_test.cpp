// Free memory: derived from total − used only where the vendor gives no figure, and the
// fits()/best_device() answers over snapshots.
#include <memory>

#include <gtest/gtest.h>

#include "gpustream/planner.hpp"

namespace gpustream {
namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;

DeviceSample device(std::string id, std::optional<double> total, std::optional<double> used,
                    std::optional<Reading> free = std::nullopt) {
  DeviceSample d;
  d.id = id;
  d.name = "GPU " + id;
  if (total) d.metrics.set(Metric::memory_total_bytes, *total, Source::sysfs);
  if (used) d.metrics.set(Metric::memory_used_bytes, *used, Source::sysfs);
  if (free) d.metrics[Metric::memory_free_bytes] = *free;
  d.metrics.fill_absent(Absence::unsupported, Source::sysfs);
  return d;
}

SnapshotPtr snapshot(std::string probe, std::vector<DeviceSample> devices) {
  auto s = std::make_shared<GpuSnapshot>();
  s->probe = std::move(probe);
  s->devices = std::move(devices);
  return s;
}

TEST(DeriveMetrics, FreeIsTotalMinusUsedOnlyFromPresentInputs) {
  auto d = device("a", 16 * kGiB, 4 * kGiB);
  derive_metrics(d);
  EXPECT_EQ(d.metrics[Metric::memory_free_bytes], Reading::of(12 * kGiB, Source::derived));

  auto no_used = device("b", 16 * kGiB, std::nullopt);
  derive_metrics(no_used);
  EXPECT_FALSE(no_used.metrics[Metric::memory_free_bytes]) << "never from an absent input";

  auto over = device("c", 4 * kGiB, 5 * kGiB);
  derive_metrics(over);
  EXPECT_EQ(over.metrics[Metric::memory_free_bytes].value(), 0.0) << "never below 0";
}

TEST(DeriveMetrics, AVendorFigureIsKept) {
  auto d = device("a", 80 * kGiB, 10 * kGiB, Reading::of(69.5 * kGiB, Source::nvml));
  derive_metrics(d);
  EXPECT_EQ(d.metrics[Metric::memory_free_bytes], Reading::of(69.5 * kGiB, Source::nvml));
}

TEST(Fits, MostFreeFirstAndUnknownNeverOffered) {
  const std::vector<SnapshotPtr> snaps{
      snapshot("amd", {device("small", 8 * kGiB, 6 * kGiB), device("big", 64 * kGiB, 4 * kGiB)}),
      snapshot("intel", {device("unknown", std::nullopt, 1 * kGiB)}),
      snapshot("nvidia",
               {device("mid", 80 * kGiB, 10 * kGiB, Reading::of(30 * kGiB, Source::nvml))})};
  const auto all = fits(snaps, 0);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].device_id, "big");
  EXPECT_EQ(all[0].source, Source::derived);
  EXPECT_EQ(all[0].free_bytes, static_cast<std::uint64_t>(60 * kGiB));
  EXPECT_EQ(all[1].device_id, "mid");
  EXPECT_EQ(all[1].source, Source::nvml);
  EXPECT_EQ(all[1].probe, "nvidia");
  EXPECT_EQ(all[2].device_id, "small");

  const auto need_20 = fits(snaps, static_cast<std::uint64_t>(20 * kGiB));
  ASSERT_EQ(need_20.size(), 2u);
  EXPECT_EQ(best_device(snaps, static_cast<std::uint64_t>(20 * kGiB))->device_id, "big");
  EXPECT_FALSE(best_device(snaps, static_cast<std::uint64_t>(100 * kGiB)));
}

TEST(Fits, ADeviceSeenTwiceCountsOnceWithTheReportedFigure) {
  const std::vector<SnapshotPtr> snaps{
      snapshot("amd", {device("gpu", 16 * kGiB, 2 * kGiB)}),  // derived: 14 GiB
      snapshot("amd-smi",
               {device("gpu", 16 * kGiB, 2 * kGiB, Reading::of(13 * kGiB, Source::amd_smi))})};
  const auto all = fits(snaps, 0);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].source, Source::amd_smi);
  EXPECT_EQ(all[0].free_bytes, static_cast<std::uint64_t>(13 * kGiB));
}

}  // namespace
}  // namespace gpustream
