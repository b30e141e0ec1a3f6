// NVIDIA events over the fake libnvidia-ml.so.1: Xid, ECC and clock events reach the probe's
// sink and a Telemetry's in-process subscribers; the event thread stops in bounded time and
// frees its event set; a library without the event functions and a device that refuses to
// register give no events, said once; a storm fired in the fake stays bounded.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <mutex>

#include "gpustream/log.hpp"
#include "gpustream/probes/nvidia_probe.hpp"
#include "gpustream/telemetry.hpp"
#include "nvidia_event_fakes.hpp"
#include "nvidia_fakes.hpp"
#include "probe_harness.hpp"
#include "support/log_capture.hpp"

namespace gpustream {
namespace {

using test::EventCollector;
using test::FakeNvml;
using test::FakeNvmlEvents;
using test::LogCapture;
using test::ProbeHarness;
using test::TempTree;

constexpr const char* kUuid0 = "GPU-aaaaaaaa-1111-2222-3333-444444444444";
constexpr const char* kUuid1 = "GPU-bbbbbbbb-1111-2222-3333-444444444444";
const std::string kTwoGpus = std::string("devices=2\n") + "device.0.uuid=" + kUuid0 +
                             "\ndevice.0.clock_reasons=0x44\ndevice.1.uuid=" + kUuid1 + "\n";

class NvmlEventsTest : public ::testing::Test {
 protected:
  NvidiaProbeOptions options(const char* library = nullptr) {
    NvidiaProbeOptions o;
    o.nvml_library = library ? library : nvml_.path();
    o.use = NvidiaProbeOptions::Use::nvml_only;
    o.library_session = LibrarySessionMode::persistent;
    o.paths.procfs_root = proc_.path();
    o.event_wait_timeout = std::chrono::milliseconds{50};
    return o;
  }
  std::shared_ptr<NvidiaProbe> probe(const char* library = nullptr) {
    return make_nvidia_probe(harness_.executors(), options(library));
  }

  FakeNvml nvml_;
  FakeNvmlEvents fake_;
  TempTree proc_;
  ProbeHarness harness_;
};

TEST_F(NvmlEventsTest, XidReachesTheSink) {
  nvml_.scenario(kTwoGpus);
  auto p = probe();
  EventCollector got;
  p->start_events(got.sink());
  ASSERT_TRUE(harness_.detect(*p).available);  // NVML found: the event thread starts
  ASSERT_TRUE(fake_.await_waiters(1));
  EXPECT_EQ(nvml_.count("nvmlEventSetCreate"), 1);
  EXPECT_EQ(nvml_.count("nvmlDeviceRegisterEvents"), 2);
  EXPECT_EQ(fake_.fire(0, test::kFakeEventXid, 79), 1);
  const auto events = got.wait_for(1);
  ASSERT_EQ(events.size(), 1U);
  const auto& e = events[0];
  EXPECT_EQ(e.probe, "nvidia");
  EXPECT_EQ(e.device_id, kUuid0);
  EXPECT_EQ(e.kind, EventKind::xid);
  EXPECT_EQ(e.data, 79U);
  EXPECT_GT(e.time_unix_ns, 0);
  EXPECT_EQ(e.sequence, 0U);  // numbered by the channel, not the probe
  p->stop_events();
}

TEST_F(NvmlEventsTest, EccAndClockEventKinds) {
  nvml_.scenario(kTwoGpus);
  auto p = probe();
  EventCollector got;
  p->start_events(got.sink());
  ASSERT_TRUE(harness_.detect(*p).available);
  ASSERT_TRUE(fake_.await_waiters(1));
  fake_.fire(1, test::kFakeEventDbe);
  fake_.fire(0, test::kFakeEventSbe);
  fake_.fire(0, test::kFakeEventClock);
  fake_.fire(1, test::kFakeEventPowerSource);
  const auto events = got.wait_for(4);
  ASSERT_EQ(events.size(), 4U);
  EXPECT_EQ(events[0].kind, EventKind::ecc_double_bit);
  EXPECT_EQ(events[0].device_id, kUuid1);
  EXPECT_FALSE(events[0].data);  // NVML gives no data with ECC events
  EXPECT_EQ(events[1].kind, EventKind::ecc_single_bit);
  EXPECT_EQ(events[1].device_id, kUuid0);
  EXPECT_EQ(events[2].kind, EventKind::clock_event);
  EXPECT_EQ(events[2].data, 0x44U);  // the clocks-event reasons read when it came
  EXPECT_EQ(events[3].kind, EventKind::power_source);
  p->stop_events();
}

TEST_F(NvmlEventsTest, StopWhileWaitingEndsAndFreesTheSet) {
  nvml_.scenario(kTwoGpus);
  auto p = probe();
  EventCollector got;
  p->start_events(got.sink());
  ASSERT_TRUE(harness_.detect(*p).available);
  ASSERT_TRUE(fake_.await_waiters(1));
  // Every wait is bounded by the configured timeout: that bounds how long stop takes.
  EXPECT_EQ(nvml_.count("event_wait_timeout_ms"), 50);
  EXPECT_EQ(nvml_.count("event_sets_open"), 1);
  p->stop_events();  // returns: the thread has ended
  EXPECT_EQ(fake_.waiters(), 0);
  EXPECT_EQ(nvml_.count("event_sets_open"), 0);
  EXPECT_EQ(nvml_.count("nvmlEventSetFree"), 1);
  EXPECT_EQ(fake_.fire(0, test::kFakeEventXid, 79), 0);  // nobody registered any more
  p->stop_events();                                      // idempotent
  // Stopped events stay stopped: a later detection starts no thread.
  ASSERT_TRUE(harness_.detect(*p).available);
  EXPECT_EQ(nvml_.count("nvmlEventSetCreate"), 1);
}

TEST_F(NvmlEventsTest, DestroyingTheProbeStopsTheThread) {
  nvml_.scenario(kTwoGpus);
  EventCollector got;
  {
    auto p = probe();
    p->start_events(got.sink());
    ASSERT_TRUE(harness_.detect(*p).available);
    ASSERT_TRUE(fake_.await_waiters(1));
  }
  EXPECT_EQ(fake_.waiters(), 0);
  EXPECT_EQ(nvml_.count("event_sets_open"), 0);
}

TEST_F(NvmlEventsTest, MissingSymbolsMeanNoEventsLoggedOnce) {
  FakeNvml legacy(fakes::kFakeNvmlLegacy);
  LogCapture log;
  auto p = probe(fakes::kFakeNvmlLegacy);
  EventCollector got;
  p->start_events(got.sink());
  ASSERT_TRUE(harness_.detect(*p).available);  // metrics still work
  ASSERT_TRUE(harness_.detect(*p).available);
  EXPECT_FALSE(harness_.sample(*p).ec);
  p->stop_events();  // the thread has said why and ended
  EXPECT_EQ(log.count("no GPU events: nvmlEventSetCreate missing from"), 1U);
  EXPECT_TRUE(got.events().empty());
}

TEST_F(NvmlEventsTest, UnsupportedDeviceAndTypesAreSkipped) {
  nvml_.scenario(kTwoGpus +
                 "device.1.fail.nvmlDeviceRegisterEvents=NOT_SUPPORTED\n"
                 "device.0.supported_events=0x8\n");  // Xid only
  LogCapture log;
  auto p = probe();
  EventCollector got;
  p->start_events(got.sink());
  ASSERT_TRUE(harness_.detect(*p).available);
  ASSERT_TRUE(fake_.await_waiters(1));
  EXPECT_EQ(fake_.fire(1, test::kFakeEventXid, 13), 0);  // device 1 is not registered
  EXPECT_EQ(fake_.fire(0, test::kFakeEventDbe), 0);      // device 0 does not support ECC
  EXPECT_EQ(fake_.fire(0, test::kFakeEventXid, 31), 1);
  const auto events = got.wait_for(1);
  ASSERT_EQ(events.size(), 1U);
  EXPECT_EQ(events[0].data, 31U);
  p->stop_events();
  EXPECT_EQ(log.count(std::string("GPU ") + kUuid1 + ": no events: nvmlDeviceRegisterEvents:"), 1U);
  EXPECT_EQ(log.count("(NVML_ERROR_NOT_SUPPORTED)"), 1U);
}

TEST_F(NvmlEventsTest, LazySessionHasNoEventsSaidOnce) {
  nvml_.scenario(kTwoGpus);
  LogCapture log;
  auto o = options();
  o.library_session = LibrarySessionMode::lazy;
  auto p = make_nvidia_probe(harness_.executors(), o);
  EventCollector got;
  p->start_events(got.sink());
  ASSERT_TRUE(harness_.detect(*p).available);
  p->stop_events();
  EXPECT_EQ(nvml_.count("nvmlEventSetCreate"), 0);
  EXPECT_EQ(log.count("no GPU events: they need NVML initialized all along"), 1U);
}

// End to end in process: the Telemetry gives the probe its channel's sink; an Xid fired in the
// fake reaches a subscriber of Telemetry::events(), numbered and counted; and a storm of
// distinct Xid numbers stays within the channel's label bound.
TEST_F(NvmlEventsTest, XidReachesATelemetrySubscriber) {
  nvml_.scenario(kTwoGpus);
  Config cfg;
  cfg.simulate_when_no_gpu = false;
  const auto opts = options();
  Telemetry t(cfg, [&](const Config&, const ProbeExecutors& ex, std::vector<std::string>&) {
    return std::vector<ProbePtr>{make_nvidia_probe(ex, opts)};
  });
  std::mutex mu;
  std::condition_variable cv;
  std::vector<EventPtr> got;
  auto sub = t.events().subscribe([&](const EventPtr& e) {
    {
      std::lock_guard lock(mu);
      got.push_back(e);
    }
    cv.notify_all();
  });
  t.start();
  ASSERT_TRUE(fake_.await_waiters(1));
  fake_.fire(0, test::kFakeEventXid, 79);
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return !got.empty(); }));
    EXPECT_EQ(got[0]->sequence, 1U);
    EXPECT_EQ(got[0]->device_id, kUuid0);
    EXPECT_EQ(got[0]->data, 79U);
  }
  // A storm: 5000 Xid events with 5000 distinct numbers on GPU 1.
  constexpr unsigned kStorm = 5000;
  for (unsigned i = 0; i < kStorm; ++i) fake_.fire(1, test::kFakeEventXid, 1000 + i);
  {
    std::unique_lock lock(mu);
    cv.wait_for(lock, std::chrono::seconds(20),
                [&] { return t.events().counters().published >= kStorm + 1; });
  }
  const auto totals = t.events().totals();
  EXPECT_EQ(totals.counters.published, kStorm + 1);
  EXPECT_EQ((totals.by_kind.at({kUuid1, EventKind::xid})), kStorm);
  std::size_t labels = 0;
  for (const auto& [key, n] : totals.by_xid) labels += key.first == kUuid1 ? 1 : 0;
  EXPECT_EQ(labels, t.events().limits().xid_labels + 1);  // the rest under xid="other"
  EXPECT_EQ((totals.by_xid.at({kUuid1, "other"})), kStorm - t.events().limits().xid_labels);
  EXPECT_LE(t.events().recent().size(), t.events().limits().recent);
  t.stop();
  EXPECT_EQ(fake_.waiters(), 0);  // stop() ended the event thread
  EXPECT_EQ(nvml_.count("event_sets_open"), 0);
}

}  // namespace
}  // namespace gpustream
