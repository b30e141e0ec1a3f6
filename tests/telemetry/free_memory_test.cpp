// Telemetry derives memory_free_bytes (total − used, source derived) before publishing, for a
// probe that reports only total and used, and answers fits()/best_device() from the latest
// snapshots.
#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/json/parse.hpp>

#include "gpustream/blocking_probe.hpp"
#include "gpustream/config_json.hpp"
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
    ProcessSample me;  // this very process holds 1 GiB on gpu-0
    me.pid = static_cast<std::int64_t>(::getpid());
    me.gpu_memory_bytes = static_cast<std::uint64_t>(kGiB);
    d.processes.push_back(me);
    s.devices.push_back(std::move(d));
    DeviceSample other;  // a device whose probe cannot list processes
    other.id = "gpu-1";
    other.metrics.fill_absent(Absence::unsupported, Source::sysfs);
    other.processes_absent = Absence::no_permission;
    s.devices.push_back(std::move(other));
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
  EXPECT_EQ(snaps[0]->devices[0].metrics[Metric::memory_free_bytes],
            Reading::of(10 * kGiB, Source::derived));
  ASSERT_EQ(snaps[0]->devices.size(), 2u);
  const auto best = t.best_device(static_cast<std::uint64_t>(8 * kGiB));
  ASSERT_TRUE(best);
  EXPECT_EQ(best->device_id, "gpu-0");
  EXPECT_EQ(best->free_bytes, static_cast<std::uint64_t>(10 * kGiB));
  EXPECT_TRUE(t.fits(static_cast<std::uint64_t>(11 * kGiB)).empty());
  t.stop();
}

// The health rule over the Telemetry's own events: an Xid 79 on gpu-0 keeps it out of fits()
// and best_device() (it was offered before), FitPlan says why; Config::fatal_event_window 0
// (config key fatal_event_window_seconds) turns the rule off.
TEST(TelemetryFreeMemory, AFatalEventKeepsTheDeviceOutOfFits) {
  for (const bool rule_off : {false, true}) {
    Config c;
    c.probes = {"mem"};
    c.interval = std::chrono::milliseconds{20};
    if (rule_off) c.fatal_event_window = std::chrono::seconds{0};
    Telemetry t(c, [](const Config&, const ProbeExecutors& ex, std::vector<std::string>&) {
      return std::vector<ProbePtr>{std::make_shared<MemoryProbe>(ex)};
    });
    t.start();
    ASSERT_EQ(t.wait_for_first_samples(std::chrono::seconds{30}).size(), 1u);
    ASSERT_TRUE(t.best_device(1));
    GpuEvent xid;
    xid.time_unix_ns = wall_now_ns();
    xid.probe = "mem";
    xid.device_id = "gpu-0";
    xid.kind = EventKind::xid;
    xid.data = 79;
    t.events().publish(xid);
    if (rule_off) {
      EXPECT_EQ(t.best_device(1)->device_id, "gpu-0");
      t.stop();
      continue;
    }
    EXPECT_FALSE(t.best_device(1)) << "the only device with a known free figure is sick";
    EXPECT_TRUE(t.fits(0).empty());
    const auto plan = t.fits(0, FitOptions{});
    ASSERT_EQ(plan.excluded.size(), 1u);
    EXPECT_EQ(plan.excluded[0].device.device_id, "gpu-0");
    EXPECT_EQ(plan.excluded[0].reason, ExclusionReason::fatal_event);
    EXPECT_EQ(plan.excluded[0].detail.rfind("xid 79 ", 0), 0u) << plan.excluded[0].detail;
    FitOptions off;
    off.fatal_event_window = std::chrono::seconds{0};
    EXPECT_EQ(t.best_device(1, off)->device_id, "gpu-0");
    t.stop();
  }
  EXPECT_EQ(Config{}.fatal_event_window, kDefaultFatalEventWindow);
  EXPECT_EQ(config_from_json(boost::json::parse(R"({"fatal_event_window_seconds": 0})"))
                .fatal_event_window,
            std::chrono::seconds{0});
  EXPECT_THROW(config_from_json(boost::json::parse(R"({"fatal_event_window_seconds": 604801})")),
               ConfigError);
  EXPECT_THROW(config_from_json(boost::json::parse(R"({"fatal_event_window_seconds": -1})")),
               ConfigError);
}

TEST(TelemetryMyProcess, AnswersFromTheLatestSnapshotsOfAnyProbe) {
  Config c;
  c.probes = {"mem"};
  Telemetry t(c, [](const Config&, const ProbeExecutors& ex, std::vector<std::string>&) {
    return std::vector<ProbePtr>{std::make_shared<MemoryProbe>(ex)};
  });
  t.start();
  ASSERT_EQ(t.wait_for_first_samples(std::chrono::seconds{30}).size(), 1u);
  const auto me = t.my_process();
  EXPECT_EQ(me.pid, static_cast<std::int64_t>(::getpid()));
  ASSERT_TRUE(me.host_rss_bytes);
  EXPECT_GT(*me.host_rss_bytes, 0u);
  ASSERT_EQ(me.devices.size(), 2u);
  EXPECT_EQ(me.devices[0].probe, "mem");
  EXPECT_EQ(me.devices[0].gpu_memory_bytes, static_cast<std::uint64_t>(kGiB));
  EXPECT_TRUE(me.devices[0].exact);
  EXPECT_EQ(me.devices[0].device_memory_free_bytes, static_cast<std::uint64_t>(10 * kGiB));
  EXPECT_FALSE(me.devices[1].gpu_memory_bytes);
  EXPECT_EQ(me.devices[1].absent, Absence::no_permission);
  EXPECT_NE(me.devices[1].reason.find("no_permission"), std::string::npos) << me.devices[1].reason;
  t.stop();
}

}  // namespace
}  // namespace gpustream
