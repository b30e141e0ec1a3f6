// Free memory: derived from total − used only where the vendor gives no figure, and the
// fits()/best_device() answers over snapshots.
#include <algorithm>
#include <memory>

#include <gtest/gtest.h>

#include "gpustream/planner.hpp"

namespace gpustream {
namespace {

constexpr double kPlannerGiB = 1024.0 * 1024 * 1024;

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
  auto d = device("a", 16 * kPlannerGiB, 4 * kPlannerGiB);
  derive_metrics(d);
  EXPECT_EQ(d.metrics[Metric::memory_free_bytes], Reading::of(12 * kPlannerGiB, Source::derived));

  auto no_used = device("b", 16 * kPlannerGiB, std::nullopt);
  derive_metrics(no_used);
  EXPECT_FALSE(no_used.metrics[Metric::memory_free_bytes]) << "never from an absent input";

  auto over = device("c", 4 * kPlannerGiB, 5 * kPlannerGiB);
  derive_metrics(over);
  EXPECT_EQ(over.metrics[Metric::memory_free_bytes].value(), 0.0) << "never below 0";
}

TEST(DeriveMetrics, AVendorFigureIsKept) {
  auto d = device("a", 80 * kPlannerGiB, 10 * kPlannerGiB,
                  Reading::of(69.5 * kPlannerGiB, Source::nvml));
  derive_metrics(d);
  EXPECT_EQ(d.metrics[Metric::memory_free_bytes], Reading::of(69.5 * kPlannerGiB, Source::nvml));
}

TEST(Fits, MostFreeFirstAndUnknownNeverOffered) {
  const std::vector<SnapshotPtr> snaps{
      snapshot("amd", {device("small", 8 * kPlannerGiB, 6 * kPlannerGiB),
                       device("big", 64 * kPlannerGiB, 4 * kPlannerGiB)}),
      snapshot("intel", {device("unknown", std::nullopt, 1 * kPlannerGiB)}),
      snapshot("nvidia", {device("mid", 80 * kPlannerGiB, 10 * kPlannerGiB,
                                 Reading::of(30 * kPlannerGiB, Source::nvml))})};
  const auto all = fits(snaps, 0);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].device_id, "big");
  EXPECT_EQ(all[0].source, Source::derived);
  EXPECT_EQ(all[0].free_bytes, static_cast<std::uint64_t>(60 * kPlannerGiB));
  EXPECT_EQ(all[1].device_id, "mid");
  EXPECT_EQ(all[1].source, Source::nvml);
  EXPECT_EQ(all[1].probe, "nvidia");
  EXPECT_EQ(all[2].device_id, "small");

  const auto need_20 = fits(snaps, static_cast<std::uint64_t>(20 * kPlannerGiB));
  ASSERT_EQ(need_20.size(), 2u);
  EXPECT_EQ(best_device(snaps, static_cast<std::uint64_t>(20 * kPlannerGiB))->device_id, "big");
  EXPECT_FALSE(best_device(snaps, static_cast<std::uint64_t>(100 * kPlannerGiB)));
}

TEST(Fits, ADeviceSeenTwiceCountsOnceWithTheReportedFigure) {
  const std::vector<SnapshotPtr> snaps{
      snapshot("amd", {device("gpu", 16 * kPlannerGiB, 2 * kPlannerGiB)}),  // derived: 14 GiB
      snapshot("amd-smi", {device("gpu", 16 * kPlannerGiB, 2 * kPlannerGiB,
                                  Reading::of(13 * kPlannerGiB, Source::amd_smi))})};
  const auto all = fits(snaps, 0);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].source, Source::amd_smi);
  EXPECT_EQ(all[0].free_bytes, static_cast<std::uint64_t>(13 * kPlannerGiB));
}

// --- exclusions and the health rule (FitOptions) ---

constexpr std::int64_t kNow = 1'764'135'600'000'000'000;  // 2025-11-26T06:20:00Z
constexpr std::int64_t kSecond = 1'000'000'000;

EventPtr event(std::string device, EventKind kind, std::optional<std::uint64_t> data,
               std::int64_t time_unix_ns, std::uint64_t sequence = 1) {
  GpuEvent e;
  e.sequence = sequence;
  e.time_unix_ns = time_unix_ns;
  e.probe = "nvidia";
  e.device_id = std::move(device);
  e.kind = kind;
  e.data = data;
  return std::make_shared<const GpuEvent>(std::move(e));
}

std::vector<SnapshotPtr> three_gpus() {
  return {snapshot("nvidia", {device("GPU-a", 80 * kPlannerGiB, 10 * kPlannerGiB),  // 70 GiB free
                              device("GPU-b", 40 * kPlannerGiB, 10 * kPlannerGiB),  // 30
                              device("GPU-c", 24 * kPlannerGiB, 20 * kPlannerGiB)})};  // 4
}

std::vector<std::string> ids(const std::vector<DeviceFit>& fits) {
  std::vector<std::string> out;
  for (const auto& f : fits) out.push_back(f.device_id);
  return out;
}

TEST(IsFatal, FatalXidsAndUncorrectedEccOnly) {
  EXPECT_TRUE(is_fatal(*event("g", EventKind::xid, 79, 0)));
  EXPECT_TRUE(is_fatal(*event("g", EventKind::xid, 48, 0)));
  EXPECT_TRUE(is_fatal(*event("g", EventKind::xid, 95, 0)));
  EXPECT_TRUE(is_fatal(*event("g", EventKind::ecc_double_bit, std::nullopt, 0)));
  EXPECT_FALSE(is_fatal(*event("g", EventKind::xid, 13, 0))) << "an application's fault";
  EXPECT_FALSE(is_fatal(*event("g", EventKind::xid, 31, 0)));
  EXPECT_FALSE(is_fatal(*event("g", EventKind::xid, std::nullopt, 0))) << "no number: unknown";
  EXPECT_FALSE(is_fatal(*event("g", EventKind::ecc_single_bit, std::nullopt, 0)));
  EXPECT_FALSE(is_fatal(*event("g", EventKind::clock_event, 79, 0)));
  EXPECT_TRUE(std::is_sorted(std::begin(kFatalXids), std::end(kFatalXids)));
}

TEST(FitsWithOptions, RequestedExclusionsAreLeftOutAndListedWithTheReason) {
  FitOptions o;
  o.exclude = {"GPU-a", "GPU-c", "GPU-nobody"};
  const auto plan = fits(three_gpus(), static_cast<std::uint64_t>(20 * kPlannerGiB), o, {}, kNow);
  EXPECT_EQ(ids(plan.fits), std::vector<std::string>{"GPU-b"});
  // GPU-c has 4 GiB free: it would not have fit anyway, so it is not listed; an unknown id
  // is ignored.
  ASSERT_EQ(plan.excluded.size(), 1u);
  EXPECT_EQ(plan.excluded[0].device.device_id, "GPU-a");
  EXPECT_EQ(plan.excluded[0].device.free_bytes, static_cast<std::uint64_t>(70 * kPlannerGiB));
  EXPECT_EQ(plan.excluded[0].reason, ExclusionReason::excluded);
  EXPECT_EQ(plan.excluded[0].detail, "in the request's exclusions");
  EXPECT_FALSE(plan.excluded[0].event);
  EXPECT_EQ(plan.best()->device_id, "GPU-b");
  EXPECT_EQ(to_string(ExclusionReason::excluded), "excluded");
  EXPECT_EQ(to_string(ExclusionReason::fatal_event), "fatal_event");
}

TEST(FitsWithOptions, AFatalEventWithinTheWindowKeepsTheDeviceOut) {
  const std::vector<EventPtr> events{
      event("GPU-a", EventKind::xid, 79, kNow - 600 * kSecond, 7),
      event("GPU-b", EventKind::xid, 13, kNow - 5 * kSecond, 8),  // not fatal
  };
  FitOptions o;  // default window: one hour
  auto plan = fits(three_gpus(), 0, o, events, kNow);
  EXPECT_EQ(ids(plan.fits), (std::vector<std::string>{"GPU-b", "GPU-c"}));
  ASSERT_EQ(plan.excluded.size(), 1u);
  const auto& x = plan.excluded[0];
  EXPECT_EQ(x.device.device_id, "GPU-a");
  EXPECT_EQ(x.reason, ExclusionReason::fatal_event);
  EXPECT_EQ(x.detail, "xid 79 600 s ago (event #7, nvidia)");
  EXPECT_EQ(x.event, events[0]);
  EXPECT_EQ(plan.best()->device_id, "GPU-b") << "the sick GPU had the most free memory";

  o.fatal_event_window = std::chrono::seconds{599};  // the event is older than the window
  plan = fits(three_gpus(), 0, o, events, kNow);
  EXPECT_EQ(plan.fits.size(), 3u);
  EXPECT_TRUE(plan.excluded.empty());
  o.fatal_event_window = std::chrono::seconds{600};  // at most the window: still out
  EXPECT_EQ(fits(three_gpus(), 0, o, events, kNow).excluded.size(), 1u);
  o.fatal_event_window = std::chrono::seconds{0};  // no health rule
  EXPECT_TRUE(fits(three_gpus(), 0, o, events, kNow).excluded.empty());
  o.fatal_event_window = std::chrono::seconds::max();  // no overflow
  EXPECT_EQ(fits(three_gpus(), 0, o, events, kNow).excluded.size(), 1u);
}

TEST(FitsWithOptions, TheHealthRuleCoversMigInstancesOfASickGpuAndOnlyThisMachine) {
  auto gpu = device("GPU-p", 80 * kPlannerGiB, 0);
  gpu.partitioned = true;
  auto mig = device("MIG-1", 20 * kPlannerGiB, 0);
  mig.parent = "GPU-p";
  auto s = snapshot("nvidia", {gpu, mig});
  auto remote =
      std::make_shared<GpuSnapshot>(*snapshot("nvidia", {device("GPU-p", 8 * kPlannerGiB, 0)}));
  remote->node = "rack1-n2";  // a fleet node's GPU with the same id: not this machine's event
  const std::vector<EventPtr> events{event("GPU-p", EventKind::ecc_double_bit, std::nullopt,
                                           kNow + 3 * kSecond, 3)};  // stamped in the future
  const auto plan = fits({s, remote}, 0, FitOptions{}, events, kNow);
  ASSERT_EQ(plan.excluded.size(), 1u);
  EXPECT_EQ(plan.excluded[0].device.device_id, "MIG-1");
  EXPECT_EQ(plan.excluded[0].detail, "ecc_double_bit on its GPU GPU-p 0 s ago (event #3, nvidia)");
  ASSERT_EQ(plan.fits.size(), 1u);
  EXPECT_EQ(plan.fits[0].node, "rack1-n2");
}

TEST(FitsWithOptions, TheNewestFatalEventOfTheDeviceIsTheReason) {
  const std::vector<EventPtr> events{
      event("GPU-b", EventKind::xid, 48, kNow - 100 * kSecond, 1),
      event("GPU-b", EventKind::xid, 79, kNow - 10 * kSecond, 2),
      event("GPU-b", EventKind::xid, 94, kNow - 50 * kSecond, 3),
  };
  const auto x = exclusion(fits(three_gpus(), 0)[1], FitOptions{}, events, kNow);
  ASSERT_TRUE(x);
  EXPECT_EQ(x->event, events[1]);
  // A requested exclusion is the first reason.
  FitOptions o;
  o.exclude = {"GPU-b"};
  EXPECT_EQ(exclusion(fits(three_gpus(), 0)[1], o, events, kNow)->reason,
            ExclusionReason::excluded);
}

}  // namespace
}  // namespace gpustream
