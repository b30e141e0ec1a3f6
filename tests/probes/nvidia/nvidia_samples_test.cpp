// The driver's power sample ring (nvmlDeviceGetSamples, NVML_TOTAL_POWER_SAMPLES) into
// DeviceSample::power_samples, over the fake libnvidia-ml.so.1 whose ring entries the test sets:
// time stamps converted to the snapshot's steady clock whichever host clock they are on, only
// entries newer than the last seen, none after the snapshot, a bound per snapshot, and every kind
// of bad ring dropped with an error rather than turned into a sample.
#include <gtest/gtest.h>
#include <time.h>

#include <memory>
#include <string>

#include "gpustream/probes/nvidia_probe.hpp"
#include "nvidia/nvml_backend.hpp"
#include "nvidia_fakes.hpp"
#include "probe_harness.hpp"

namespace gpustream {
namespace {

using test::FakeNvml;
using test::find_error;
using test::ProbeHarness;
using test::TempTree;

constexpr long long kMs = 1000;  // µs

long long now_us(clockid_t clock) {
  timespec ts{};
  ::clock_gettime(clock, &ts);
  return static_cast<long long>(ts.tv_sec) * 1'000'000 + ts.tv_nsec / 1000;
}

/// `n` ring entries `step_us` apart from `first_us`, of `mw0 + k * 1000` mW.
std::string ring(long long first_us, long long step_us, int n, unsigned mw0 = 200000) {
  std::string out = "device.0.power_samples=";
  for (int k = 0; k < n; ++k)
    out += (k ? "," : "") + std::to_string(first_us + k * step_us) + ":" +
           std::to_string(mw0 + 1000u * static_cast<unsigned>(k));
  return out + "\n";
}

class NvmlSamplesTest : public ::testing::Test {
 protected:
  std::shared_ptr<NvidiaProbe> probe(const char* library) {
    NvidiaProbeOptions o = options_;
    o.nvml_library = library;
    o.use = NvidiaProbeOptions::Use::nvml_only;
    o.library_session = LibrarySessionMode::persistent;
    o.paths.procfs_root = proc_.path();
    return make_nvidia_probe(harness_.executors(), o);
  }
  GpuSnapshot start(const std::string& scenario, const char* library = fakes::kFakeNvml) {
    nvml_.scenario(kBase + scenario);
    p_ = probe(library);
    EXPECT_TRUE(harness_.detect(*p_).available);
    return again();
  }
  /// The ring changes (the scenario applied at once), then one more snapshot.
  GpuSnapshot again(const std::string& scenario) {
    nvml_.reload(kBase + scenario);
    return again();
  }
  GpuSnapshot again() {
    auto r = harness_.sample(*p_);
    EXPECT_FALSE(r.ec) << r.ec.message();
    EXPECT_EQ(r.snapshot.devices.size(), 1u);
    return r.snapshot;
  }
  /// The lastSeenTimeStamp of the fake's latest nvmlDeviceGetSamples call on device 0.
  unsigned long long last_seen() {
    return lib_.required<unsigned long long(unsigned)>("gpustreamFakeNvmlSamplesLastSeen")(0);
  }

  static constexpr const char* kBase = "devices=1\ndevice.0.power_mw=250000\n";
  NvidiaProbeOptions options_;  // the probe's clocks (default: the real ones)
  FakeNvml nvml_;
  DynamicLibrary lib_ = DynamicLibrary::load(fakes::kFakeNvml);
  TempTree proc_;
  ProbeHarness harness_;
  std::shared_ptr<NvidiaProbe> p_;
};

/// Checks that `s` are `n` samples `step_us` apart of the `ring()` values from `mw0`.
void expect_ring(const std::vector<PowerSample>& s, std::size_t n, long long step_us,
                 unsigned mw0) {
  ASSERT_EQ(s.size(), n);
  for (std::size_t k = 0; k < n; ++k) {
    EXPECT_EQ(s[k].watts, (mw0 + 1000.0 * static_cast<double>(k)) / 1000.0) << k;
    // One offset per snapshot: the driver's spacing, to the nanosecond.
    if (k > 0) EXPECT_EQ(s[k].monotonic_ns - s[k - 1].monotonic_ns, step_us * 1000) << k;
  }
}

TEST_F(NvmlSamplesTest, WallClockEntriesBecomeSamplesOnTheSnapshotsSteadyClock) {
  const auto t = now_us(CLOCK_REALTIME);
  auto snap = start(ring(t - 400 * kMs, 20 * kMs, 10));
  const auto& d = snap.devices[0];
  expect_ring(d.power_samples, 10, 20 * kMs, 200000);
  EXPECT_TRUE(snap.errors.empty());
  // The newest entry was 220 ms old when written, and the snapshot came after that.
  const auto age = snap.monotonic_ns - d.power_samples.back().monotonic_ns;
  EXPECT_GE(age, 219'000'000);
  EXPECT_LT(age, 600'000'000'000LL);
  EXPECT_EQ(d.attributes.count("power_samples"), 0u);

  // Three more entries: only they come, asked for with the newest time stamp taken.
  const auto last = d.power_samples.back().monotonic_ns;
  snap = again(ring(t - 400 * kMs, 20 * kMs, 13));
  EXPECT_EQ(last_seen(), static_cast<unsigned long long>(t - 400 * kMs + 9 * 20 * kMs));
  expect_ring(snap.devices[0].power_samples, 3, 20 * kMs, 200000 + 10000);
  EXPECT_GT(snap.devices[0].power_samples.front().monotonic_ns, last);
  EXPECT_LE(snap.devices[0].power_samples.back().monotonic_ns, snap.monotonic_ns);

  // Nothing new (NVML_ERROR_NOT_FOUND): no sample, no error.
  snap = again();
  EXPECT_TRUE(snap.devices[0].power_samples.empty());
  EXPECT_TRUE(snap.errors.empty());
}

TEST_F(NvmlSamplesTest, BootClockEntriesAreFoundToo) {
  // The header names no clock: a driver whose time stamps count from boot converts the same way.
  const auto t = now_us(CLOCK_BOOTTIME);
  const auto snap = start(ring(t - 300 * kMs, 50 * kMs, 5, 90000));
  const auto& s = snap.devices[0].power_samples;
  expect_ring(s, 5, 50 * kMs, 90000);
  EXPECT_TRUE(snap.errors.empty());
  EXPECT_GE(snap.monotonic_ns - s.back().monotonic_ns, 99'000'000);
  EXPECT_LT(snap.monotonic_ns - s.back().monotonic_ns, 600'000'000'000LL);
}

TEST_F(NvmlSamplesTest, RealHostClocksPutEntriesOnAnInjectedProbeClock) {
  // The default host_clock (clock_gettime) with a driven probe clock a thousand hours on (far
  // from the real steady clock): the offsets are taken against the probe's clock, so real
  // wall-clock entries land just before the driven snapshot.
  test::DrivenClock clock;
  clock.advance(std::chrono::hours(1000));
  options_.clock = clock.function();
  const auto t = now_us(CLOCK_REALTIME);
  const auto snap = start(ring(t - 400 * kMs, 20 * kMs, 10));
  EXPECT_EQ(snap.monotonic_ns, std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   clock.function()().time_since_epoch())
                                   .count());
  const auto& s = snap.devices[0].power_samples;
  expect_ring(s, 10, 20 * kMs, 200000);
  EXPECT_TRUE(snap.errors.empty());
  const auto age = snap.monotonic_ns - s.back().monotonic_ns;
  EXPECT_GE(age, 219'000'000);
  EXPECT_LT(age, 600'000'000'000LL);
}

TEST(NvmlHostClocksTest, TheDefaultReadsClockGettime) {
  using C = NvidiaProbeOptions::HostClock;
  const std::pair<C, clockid_t> clocks[] = {{C::realtime, CLOCK_REALTIME},
                                            {C::boottime, CLOCK_BOOTTIME},
                                            {C::monotonic, CLOCK_MONOTONIC}};
  for (const auto& [c, id] : clocks) {
    const auto before = now_us(id) * 1000;
    const auto read = nvidia_detail::read_host_clock(c);
    const auto after = now_us(id) * 1000 + 1000;
    EXPECT_GE(read, before) << static_cast<int>(c);
    EXPECT_LT(read, after) << static_cast<int>(c);
  }
  // Offsets against the steady clock of the bracket, read through the given functions.
  const auto h = nvidia_detail::HostClocks::now(
      [] { return std::chrono::steady_clock::time_point(std::chrono::seconds(50)); },
      [](C c) { return c == C::realtime ? std::int64_t{80'000'000'000} : std::int64_t{60}; });
  EXPECT_EQ(h.steady_ns, 50'000'000'000);
  EXPECT_EQ(h.offset_ns[nvidia_detail::HostClocks::realtime], 30'000'000'000);
  EXPECT_EQ(h.offset_ns[nvidia_detail::HostClocks::monotonic], 60 - 50'000'000'000);
}

TEST_F(NvmlSamplesTest, EntriesAfterTheSnapshotWaitForTheNextOne) {
  const auto t = now_us(CLOCK_REALTIME);
  const auto future = t + 30'000 * kMs;  // 30 s ahead of the snapshot
  auto snap = start(ring(t - 100 * kMs, 10 * kMs, 3));
  ASSERT_EQ(snap.devices[0].power_samples.size(), 3u);
  snap = again("device.0.power_samples=" + std::to_string(t - 100 * kMs) + ":1," +
               std::to_string(t - 90 * kMs) + ":2," + std::to_string(t - 80 * kMs) + ":3," +
               std::to_string(t - 70 * kMs) + ":170000," + std::to_string(future) + ":999000\n");
  ASSERT_EQ(snap.devices[0].power_samples.size(), 1u);
  EXPECT_EQ(snap.devices[0].power_samples[0].watts, 170.0);
  EXPECT_TRUE(snap.errors.empty());
  again();  // the entry after the snapshot is asked for again
  EXPECT_EQ(last_seen(), static_cast<unsigned long long>(t - 70 * kMs));
}

TEST_F(NvmlSamplesTest, RepeatedAndBackwardTimeStampsAreDropped) {
  const auto b = now_us(CLOCK_REALTIME) - 500 * kMs;
  const auto at = [&](long long ms, unsigned mw) {
    return std::to_string(b + ms * kMs) + ":" + std::to_string(mw);
  };
  auto snap = start("device.0.power_samples=" + at(0, 100000) + "," + at(20, 120000) + "," +
                    at(10, 110000) + "," + at(30, 130000) + "," + at(30, 131000) + "," +
                    at(40, 140000) + "\n");
  const auto& s = snap.devices[0].power_samples;
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s[0].watts, 100.0);
  EXPECT_EQ(s[1].watts, 120.0);
  EXPECT_EQ(s[2].watts, 130.0);  // the first of the two at 30 ms
  EXPECT_EQ(s[3].watts, 140.0);
  for (std::size_t k = 1; k < s.size(); ++k) EXPECT_GT(s[k].monotonic_ns, s[k - 1].monotonic_ns);
  const auto* e = find_error(snap, "power_samples_invalid");
  ASSERT_NE(e, nullptr);
  EXPECT_NE(e->message.find("2 of 6 samples dropped"), std::string::npos) << e->message;
  EXPECT_EQ(e->device, snap.devices[0].id);
  // The same ring again: nothing newer than 40 ms, so nothing, and no error.
  snap = again();
  EXPECT_TRUE(snap.devices[0].power_samples.empty());
  EXPECT_EQ(find_error(snap, "power_samples_invalid"), nullptr);
}

TEST_F(NvmlSamplesTest, AnUnexpectedValueTypeDropsTheEntries) {
  const auto t = now_us(CLOCK_REALTIME);
  // NVML_VALUE_TYPE_DOUBLE (0), then NVML_VALUE_TYPE_SIGNED_LONG_LONG (4).
  for (const char* type : {"0", "4"}) {
    const auto snap =
        start(ring(t - 200 * kMs, 20 * kMs, 4) + "device.0.power_samples_type=" + type + "\n");
    EXPECT_TRUE(snap.devices[0].power_samples.empty()) << type;
    const auto* e = find_error(snap, "power_samples_invalid");
    ASSERT_NE(e, nullptr) << type;
    EXPECT_NE(e->message.find("value type " + std::string(type)), std::string::npos) << e->message;
    EXPECT_EQ(last_seen(), 0u);  // nothing taken: not asked past them
  }
}

TEST_F(NvmlSamplesTest, ARingThatAnnouncesEntriesAndReturnsNoneGivesNoSample) {
  const auto t = now_us(CLOCK_REALTIME);
  const auto snap = start(ring(t - 200 * kMs, 20 * kMs, 3) + "device.0.power_samples_lose=1\n");
  EXPECT_TRUE(snap.devices[0].power_samples.empty());
  const auto* e = find_error(snap, "power_samples_invalid");
  ASSERT_NE(e, nullptr);
  EXPECT_NE(e->message.find("announced 3 samples and returned none"), std::string::npos)
      << e->message;
}

TEST_F(NvmlSamplesTest, TimeStampsOnNoHostClockAreDropped) {
  // Decades after boot, decades before now: on no host clock.
  const auto snap = start(ring(now_us(CLOCK_REALTIME) / 2, 20 * kMs, 3));
  EXPECT_TRUE(snap.devices[0].power_samples.empty());
  const auto* e = find_error(snap, "power_samples_invalid");
  ASSERT_NE(e, nullptr);
  EXPECT_NE(e->message.find("no host clock"), std::string::npos) << e->message;
}

TEST_F(NvmlSamplesTest, AtMostTheBoundPerSnapshotTheRestNextTime) {
  // The worst ring: far more entries than a driver keeps (about 120).
  constexpr int kEntries = 300;
  constexpr auto kMax = nvidia_detail::PowerRing::kMaxSamples;
  static_assert(sizeof(PowerSample) == 16 && sizeof(nvml::Sample) == 16);  // 2 KiB each
  const auto t = now_us(CLOCK_REALTIME);
  auto snap = start(ring(t - 10'000 * kMs, 10 * kMs, kEntries, 1000));
  std::vector<PowerSample> all = snap.devices[0].power_samples;
  EXPECT_EQ(all.size(), kMax);
  while (all.size() < kEntries) {
    snap = again();
    const auto& s = snap.devices[0].power_samples;
    ASSERT_FALSE(s.empty());
    EXPECT_LE(s.size(), kMax);
    all.insert(all.end(), s.begin(), s.end());
  }
  ASSERT_EQ(all.size(), static_cast<std::size_t>(kEntries));
  for (std::size_t k = 0; k < all.size(); ++k) {
    EXPECT_EQ(all[k].watts, (1000.0 + 1000.0 * static_cast<double>(k)) / 1000.0) << k;
    if (k > 0) {
      EXPECT_GT(all[k].monotonic_ns, all[k - 1].monotonic_ns) << k;
    }
  }
  EXPECT_TRUE(snap.errors.empty());
}

TEST_F(NvmlSamplesTest, ADriverThatDoesNotSampleIsAskedOnce) {
  const auto t = now_us(CLOCK_REALTIME);
  auto snap = start(ring(t - 200 * kMs, 20 * kMs, 3) +
                    "device.0.fail.nvmlDeviceGetSamples=NOT_SUPPORTED\n");
  EXPECT_TRUE(snap.devices[0].power_samples.empty());
  EXPECT_EQ(snap.devices[0].attributes.at("power_samples"), "unsupported");
  EXPECT_TRUE(snap.errors.empty());
  snap = again();
  EXPECT_EQ(snap.devices[0].attributes.at("power_samples"), "unsupported");
  EXPECT_EQ(nvml_.count("nvmlDeviceGetSamples"), 1);
}

TEST_F(NvmlSamplesTest, ALibraryWithoutTheFunctionLeavesThemEmpty) {
  FakeNvml legacy(fakes::kFakeNvmlLegacy);
  legacy.scenario(std::string(kBase) + ring(now_us(CLOCK_REALTIME) - 100 * kMs, 10 * kMs, 3));
  p_ = probe(fakes::kFakeNvmlLegacy);
  ASSERT_TRUE(harness_.detect(*p_).available);
  const auto snap = again();
  EXPECT_TRUE(snap.devices[0].power_samples.empty());
  EXPECT_EQ(snap.devices[0].attributes.at("power_samples"), "unsupported");
  EXPECT_EQ(find_error(snap, "power_samples_invalid"), nullptr);
}

TEST_F(NvmlSamplesTest, AFailingCallIsAnNvmlErrorAndTheGpuKeepsReporting) {
  const auto t = now_us(CLOCK_REALTIME);
  const auto snap =
      start(ring(t - 200 * kMs, 20 * kMs, 3) + "device.0.fail.nvmlDeviceGetSamples=UNKNOWN\n");
  EXPECT_TRUE(snap.devices[0].power_samples.empty());
  EXPECT_NE(find_error(snap, "nvml_error"), nullptr);
  EXPECT_TRUE(snap.devices[0].metrics[Metric::power_watts].has_value());
}

}  // namespace
}  // namespace gpustream
