// The Telemetry facade: wiring, idempotent start/stop, bounded stop with a hung probe, running
// on a caller's io_context.
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>
#include <boost/asio/io_context.hpp>

#include "gpustream/blocking_probe.hpp"
#include "gpustream/telemetry.hpp"

namespace gpustream {
namespace {

// A probe whose samples count up; it can be told to hang inside sample() until released.
class CountingProbe final : public BlockingProbe {
 public:
  CountingProbe(ProbeExecutors ex, std::string name, ProbeKind kind = ProbeKind::gpu)
      : BlockingProbe(std::move(ex)), name_(std::move(name)), kind_(kind) {}
  std::string_view name() const noexcept override { return name_; }
  ProbeKind kind() const noexcept override { return kind_; }
  void hang_next() { hang_.store(true); }
  void release() {
    {
      std::lock_guard lock(mu_);
      released_ = true;
    }
    cv_.notify_all();
  }
  bool entered_hang() const { return entered_.load(); }

 protected:
  Detection detect() override {
    Detection d;
    d.available = true;
    d.devices.push_back({"dev-" + name_, Vendor::simulated, 0, "Counter", ""});
    return d;
  }
  GpuSnapshot sample() override {
    if (hang_.load()) {
      entered_.store(true);
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return released_; });
    }
    GpuSnapshot s;
    DeviceSample d;
    d.id = "dev-" + name_;
    d.vendor = Vendor::simulated;
    d.metrics.set(Metric::utilization_percent, static_cast<double>(++n_ % 100), Source::simulated);
    d.metrics.fill_absent(Absence::unsupported, Source::simulated);
    s.devices.push_back(std::move(d));
    return s;
  }

 private:
  std::string name_;
  ProbeKind kind_;
  std::atomic<int> n_{0};
  std::atomic<bool> hang_{false};
  std::atomic<bool> entered_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  bool released_ = false;
};

struct Made {
  std::vector<std::shared_ptr<CountingProbe>> probes;
};

ProbeFactory counting_factory(std::shared_ptr<Made> made, std::vector<std::string> names) {
  return [made, names](const Config&, const ProbeExecutors& ex, std::vector<std::string>& errors) {
    std::vector<ProbePtr> out;
    for (const auto& n : names) {
      if (n == "broken") {
        static const std::string kMessage = "probe 'broken': its factory threw";
        errors.push_back(kMessage);
        continue;
      }
      auto p = std::make_shared<CountingProbe>(ex, n);
      made->probes.push_back(p);
      out.push_back(p);
    }
    return out;
  };
}

Config telemetry_fast_config() {
  Config c;
  c.interval = std::chrono::milliseconds{20};
  c.sample_timeout = std::chrono::milliseconds{10000};
  return c;
}

// A GPU probe that finds `devices` devices (0: unavailable, "no driver").
class FixedGpuProbe final : public BlockingProbe {
 public:
  FixedGpuProbe(ProbeExecutors ex, std::string name, std::size_t devices)
      : BlockingProbe(std::move(ex)), name_(std::move(name)), devices_(devices) {}
  std::string_view name() const noexcept override { return name_; }

 protected:
  Detection detect() override {
    Detection d;
    d.available = devices_ > 0;
    if (!d.available) d.reason = "no driver";
    for (std::size_t i = 0; i < devices_; ++i)
      d.devices.push_back(
          {name_ + "-" + std::to_string(i), Vendor::nvidia, static_cast<int>(i), "Fixed", ""});
    return d;
  }
  GpuSnapshot sample() override { return {}; }

 private:
  std::string name_;
  std::size_t devices_;
};

// Builds what config.probes names: "gpuN" finds N devices, "simulated" a CountingProbe with
// config.simulate recorded.
struct Built {
  std::mutex mu;
  std::vector<std::vector<std::string>> calls;  // config.probes of each factory call
  int simulate_asked = -1;
};

ProbeFactory by_name_factory(std::shared_ptr<Built> built) {
  return [built](const Config& c, const ProbeExecutors& ex, std::vector<std::string>&) {
    std::lock_guard lock(built->mu);
    built->calls.push_back(c.probes);
    std::vector<ProbePtr> out;
    for (const auto& n : c.probes) {
      if (n == "simulated") {
        built->simulate_asked = c.simulate;
        out.push_back(std::make_shared<CountingProbe>(ex, n, ProbeKind::simulated));
      } else {
        out.push_back(
            std::make_shared<FixedGpuProbe>(ex, n, static_cast<std::size_t>(n.back() - '0')));
      }
    }
    return out;
  };
}

// telemetry_fast_config() with `probes` and simulate_when_no_gpu.
Config no_gpu_fallback_config(std::vector<std::string> probes) {
  Config c = telemetry_fast_config();
  c.probes = std::move(probes);
  c.simulate_when_no_gpu = true;
  return c;
}

TEST(Telemetry, NoGpuFoundAddsSimulatedGpusAfterTheProbesOwnDetections) {
  auto built = std::make_shared<Built>();
  Telemetry t(no_gpu_fallback_config({"gpu0", "other0"}), by_name_factory(built));
  t.start();
  const auto snaps = t.wait_for_first_samples(std::chrono::seconds{10});
  ASSERT_EQ(snaps.size(), 1u);
  EXPECT_EQ(snaps[0]->probe, "simulated");
  EXPECT_EQ(t.probe_names(), (std::vector<std::string>{"gpu0", "other0", "simulated"}));
  std::lock_guard lock(built->mu);
  ASSERT_EQ(built->calls.size(), 2u);
  EXPECT_EQ(built->calls[1], (std::vector<std::string>{"simulated"}));
  EXPECT_EQ(built->simulate_asked, 2);
  t.stop();
  // Each GPU probe was detected once, by the scheduler: no separate detection pass.
  for (const auto& st : t.stats())
    if (st.probe != "simulated") EXPECT_EQ(st.detections, 1u) << st.probe;
}

TEST(Telemetry, AGpuFoundMeansNoSimulatedGpus) {
  auto built = std::make_shared<Built>();
  Telemetry t(no_gpu_fallback_config({"gpu0", "gpu2"}), by_name_factory(built));
  t.start();
  t.wait_for_first_samples(std::chrono::seconds{10});
  EXPECT_EQ(t.probe_names(), (std::vector<std::string>{"gpu0", "gpu2"}));
  std::lock_guard lock(built->mu);
  EXPECT_EQ(built->calls.size(), 1u);
  t.stop();
}

TEST(Telemetry, NoGpuProbeAtAllAddsSimulatedGpusAtOnce) {
  auto built = std::make_shared<Built>();
  Telemetry t(no_gpu_fallback_config({"host"}), [built](const Config& cfg, const ProbeExecutors& ex,
                                                        std::vector<std::string>& e) {
    if (cfg.probes == std::vector<std::string>{"host"}) {
      return std::vector<ProbePtr>{std::make_shared<CountingProbe>(ex, "host", ProbeKind::host)};
    }
    return by_name_factory(built)(cfg, ex, e);
  });
  t.start();
  EXPECT_EQ(t.probe_names(), (std::vector<std::string>{"host", "simulated"}));
  const auto snaps = t.wait_for_first_samples(std::chrono::seconds{10});
  EXPECT_EQ(snaps.size(), 2u);
  t.stop();
}

// What counts as a GPU is the probe's kind(), never its name: a host program's own GPU probe
// may be called anything (here "host"), and a "gpu0" that reports the host is not a GPU.
TEST(Telemetry, TheProbesKindNotItsNameDecidesWhatIsAGpu) {
  // A GPU probe named "host" finds one GPU: no simulated GPUs.
  auto built = std::make_shared<Built>();
  Telemetry t(no_gpu_fallback_config({"host", "gpu0"}),
              [built](const Config& cfg, const ProbeExecutors& ex, std::vector<std::string>& e) {
                if (cfg.probes == std::vector<std::string>{"host", "gpu0"}) {
                  return std::vector<ProbePtr>{std::make_shared<FixedGpuProbe>(ex, "host", 1),
                                               std::make_shared<FixedGpuProbe>(ex, "gpu0", 0)};
                }
                return by_name_factory(built)(cfg, ex, e);
              });
  t.start();
  t.wait_for_first_samples(std::chrono::seconds{10});
  EXPECT_EQ(t.probe_names(), (std::vector<std::string>{"host", "gpu0"}));
  t.stop();
  {
    std::lock_guard lock(built->mu);
    EXPECT_TRUE(built->calls.empty()) << "the fallback was not asked for";
  }

  // A host-kind probe named "gpu0" with a device is no GPU: simulated GPUs, at once.
  auto built2 = std::make_shared<Built>();
  Telemetry t2(no_gpu_fallback_config({"gpu0"}),
               [built2](const Config& cfg, const ProbeExecutors& ex, std::vector<std::string>& e) {
                 if (cfg.probes == std::vector<std::string>{"gpu0"})
                   return std::vector<ProbePtr>{
                       std::make_shared<CountingProbe>(ex, "gpu0", ProbeKind::host)};
                 return by_name_factory(built2)(cfg, ex, e);
               });
  t2.start();
  EXPECT_EQ(t2.probe_names(), (std::vector<std::string>{"gpu0", "simulated"}));
  t2.stop();
}

TEST(Telemetry, PublishesSnapshotsOfEveryProbeToTheChannel) {
  auto made = std::make_shared<Made>();
  Telemetry t(telemetry_fast_config(), counting_factory(made, {"a", "b"}));
  t.start();
  const auto snaps = t.wait_for_first_samples(std::chrono::seconds{10});
  ASSERT_EQ(snaps.size(), 2u);
  EXPECT_EQ(snaps[0]->probe, "a");
  EXPECT_EQ(snaps[1]->probe, "b");
  EXPECT_GT(snaps[0]->sequence, 0u);
  EXPECT_EQ(t.probe_names(), (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(t.setup_errors().empty());
  t.stop();
  const auto st = t.stats();
  ASSERT_EQ(st.size(), 2u);
  EXPECT_GE(st[0].samples, 1u);
}

TEST(Telemetry, StartAndStopAreIdempotent) {
  auto made = std::make_shared<Made>();
  Telemetry t(telemetry_fast_config(), counting_factory(made, {"a"}));
  t.stop();  // before start: nothing to do
  t.start();
  t.start();
  EXPECT_EQ(made->probes.size(), 1u) << "a second start() must not build the probes again";
  t.stop();
  t.stop();
}

TEST(Telemetry, StopReturnsWhileAProbeIsHungInsideItsSample) {
  auto made = std::make_shared<Made>();
  auto t = std::make_unique<Telemetry>(telemetry_fast_config(), counting_factory(made, {"hung"}));
  ASSERT_EQ(made->probes.size(), 0u);
  t->start();
  ASSERT_EQ(made->probes.size(), 1u);
  auto probe = made->probes[0];
  probe->hang_next();
  // Wait until a sample is really stuck in the probe.
  for (int i = 0; i < 1000 && !probe->entered_hang(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds{10});
  ASSERT_TRUE(probe->entered_hang());
  t->stop(std::chrono::milliseconds{300});  // must return although the worker is stuck
  t.reset();                                // and destruction must not wait for it either
  probe->release();                         // the abandoned worker finishes on its own
}

TEST(Telemetry, RunsOnTheCallersIoContext) {
  boost::asio::io_context io;
  auto made = std::make_shared<Made>();
  Telemetry t(telemetry_fast_config(), counting_factory(made, {"a"}), io.get_executor());
  std::vector<SnapshotPtr> got;
  auto sub = t.channel().subscribe({}, [&](const SnapshotPtr& s) {
    got.push_back(s);
    if (got.size() == 3) io.stop();
  });
  t.start();
  io.run_for(std::chrono::seconds{10});
  ASSERT_EQ(got.size(), 3u);
  EXPECT_LT(got[0]->sequence, got[1]->sequence);
  EXPECT_LT(got[1]->sequence, got[2]->sequence);
  t.stop();  // called while the io_context is not running
  io.restart();
  io.poll();
}

}  // namespace
}  // namespace gpustream
