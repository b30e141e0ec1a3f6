// Telemetry::stop() and destruction from every thread the library runs user code on: subscriber
// callbacks (on the io thread), queue consumers, measurement windows read from a callback, and
// the probe factory (in start() and in the no-GPU fallback on the io thread). Each must either
// complete or return after requesting the stop: never block on the io thread waiting for
// itself, never throw "Resource deadlock avoided", never end in std::terminate.
#include <atomic>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <spdlog/sinks/base_sink.h>
#include <boost/asio/io_context.hpp>

#include "gpustream/blocking_probe.hpp"
#include "gpustream/log.hpp"
#include "gpustream/measurement.hpp"
#include "gpustream/telemetry.hpp"

namespace gpustream {
namespace {

constexpr auto kGuard = std::chrono::seconds{60};  // only for a broken build: never reached

// Collects what the SDK logs at warn and above while it lives.
class WarnCapture {
 public:
  WarnCapture() : sink_(std::make_shared<Sink>()) { logger()->sinks().push_back(sink_); }
  ~WarnCapture() {
    auto& sinks = logger()->sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
  }
  std::vector<std::string> lines() const {
    std::lock_guard lock(sink_->lines_mu);
    return sink_->lines;
  }

 private:
  struct Sink final : spdlog::sinks::base_sink<std::mutex> {
    mutable std::mutex lines_mu;
    std::vector<std::string> lines;
    void sink_it_(const spdlog::details::log_msg& msg) override {
      if (msg.level < spdlog::level::warn) return;
      std::lock_guard lock(lines_mu);
      lines.emplace_back(msg.payload.data(), msg.payload.size());
    }
    void flush_() override {}
  };
  std::shared_ptr<Sink> sink_;
};

// A probe with one device whose utilization counts up; reports its destruction.
class TickProbe final : public BlockingProbe {
 public:
  TickProbe(ProbeExecutors ex, std::string name, std::shared_ptr<std::promise<void>> gone = {})
      : BlockingProbe(std::move(ex)), name_(std::move(name)), gone_(std::move(gone)) {}
  ~TickProbe() override {
    if (gone_) gone_->set_value();
  }
  std::string_view name() const noexcept override { return name_; }

 protected:
  Detection detect() override {
    Detection d;
    d.available = name_ != "gpu0";  // "gpu0": a GPU probe that finds no GPU
    if (!d.available)
      d.reason = "no driver";
    else
      d.devices.push_back({"dev-" + name_, Vendor::simulated, 0, "Tick", ""});
    return d;
  }
  GpuSnapshot sample() override {
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
  std::shared_ptr<std::promise<void>> gone_;
  std::atomic<int> n_{0};
};

Config fast_config(std::vector<std::string> probes = {"a"}) {
  Config c;
  c.probes = std::move(probes);
  c.interval = std::chrono::milliseconds{10};
  return c;
}

// Builds a TickProbe per name; the first one built reports its destruction through `gone`.
ProbeFactory tick_factory(std::shared_ptr<std::promise<void>> gone = {}) {
  return [gone](const Config& c, const ProbeExecutors& ex, std::vector<std::string>&) {
    std::vector<ProbePtr> out;
    for (const auto& n : c.probes) out.push_back(std::make_shared<TickProbe>(ex, n, gone));
    return out;
  };
}

bool ready(std::future<void>& f) { return f.wait_for(kGuard) == std::future_status::ready; }

void expect_no_stop_trouble(const WarnCapture& logs) {
  for (const auto& line : logs.lines()) {
    EXPECT_EQ(line.find("did not answer"), std::string::npos) << line;
    EXPECT_EQ(line.find("deadlock"), std::string::npos) << line;
    EXPECT_EQ(line.find("threw"), std::string::npos) << line;
  }
}

TEST(TelemetryLifecycle, StopFromASubscriberCallbackStopsSamplingAndReturns) {
  WarnCapture logs;
  Telemetry t(fast_config(), tick_factory());
  std::promise<void> stopped;
  auto stopped_f = stopped.get_future();
  std::atomic<std::uint64_t> seq_at_stop{0};
  std::atomic<bool> threw{false};
  std::atomic<int> calls{0};
  auto sub = t.channel().subscribe({}, [&](const SnapshotPtr&) {
    if (++calls != 2) return;
    try {
      t.stop();
    } catch (...) {
      threw = true;
    }
    seq_at_stop = t.channel().last_sequence();
    stopped.set_value();
  });
  t.start();
  ASSERT_TRUE(ready(stopped_f));
  EXPECT_FALSE(threw.load());
  t.stop();  // completes the stop (joins the io thread) from this thread
  EXPECT_EQ(t.channel().last_sequence(), seq_at_stop.load()) << "published after stop()";
  t.stop();  // idempotent
  expect_no_stop_trouble(logs);
}  // the destructor must not terminate

TEST(TelemetryLifecycle, StopFromACallbackThenDestructorCompletesTheStop) {
  WarnCapture logs;
  auto gone = std::make_shared<std::promise<void>>();
  auto gone_f = gone->get_future();
  {
    Telemetry t(fast_config(), tick_factory(gone));
    std::promise<void> stopped;
    auto stopped_f = stopped.get_future();
    std::atomic<int> calls{0};
    auto sub = t.channel().subscribe({}, [&](const SnapshotPtr&) {
      if (++calls == 1) {
        t.stop();
        stopped.set_value();
      }
    });
    t.start();
    ASSERT_TRUE(ready(stopped_f));
  }
  EXPECT_TRUE(ready(gone_f)) << "the destructor freed the probes";
  expect_no_stop_trouble(logs);
}

TEST(TelemetryLifecycle, DestroyingFromASubscriberCallbackFreesEverythingAfterIt) {
  WarnCapture logs;
  auto gone = std::make_shared<std::promise<void>>();
  auto gone_f = gone->get_future();
  auto t = std::make_unique<Telemetry>(fast_config(), tick_factory(gone));
  std::promise<void> destroyed;
  auto destroyed_f = destroyed.get_future();
  std::atomic<int> calls{0};
  auto sub = t->channel().subscribe({}, [&](const SnapshotPtr&) {
    if (++calls != 1) return;
    t.reset();  // the Telemetry that runs this very callback
    destroyed.set_value();
  });
  t->start();
  ASSERT_TRUE(ready(destroyed_f));
  EXPECT_TRUE(ready(gone_f)) << "the io thread finished the stop and freed the probes";
  sub.reset();
  expect_no_stop_trouble(logs);
}

TEST(TelemetryLifecycle, StopAndDestroyFromAQueueConsumerThread) {
  WarnCapture logs;
  auto gone = std::make_shared<std::promise<void>>();
  auto gone_f = gone->get_future();
  auto t = std::make_unique<Telemetry>(fast_config(), tick_factory(gone));
  auto queue = t->channel().subscribe_queue({});
  t->start();
  std::thread consumer([&] {
    int got = 0;
    while (got < 2)
      if (queue->pop_for(std::chrono::milliseconds{100})) ++got;
    t->stop();
    t.reset();
  });
  consumer.join();
  EXPECT_TRUE(ready(gone_f));
  while (queue->try_pop()) {}
  EXPECT_TRUE(queue->closed()) << "the channel is gone: nothing more comes";
  expect_no_stop_trouble(logs);
}

TEST(TelemetryLifecycle, EndAWindowAndStopFromACallback) {
  WarnCapture logs;
  Telemetry t(fast_config(), tick_factory());
  MeasurementWindow window(t.channel());
  std::promise<WindowSummary> summary;
  auto summary_f = summary.get_future();
  std::atomic<int> calls{0};
  auto sub = t.channel().subscribe({}, [&](const SnapshotPtr&) {
    if (++calls != 3) return;
    auto s = window.end();
    t.stop();
    summary.set_value(std::move(s));
  });
  window.begin();
  t.start();
  ASSERT_EQ(summary_f.wait_for(kGuard), std::future_status::ready);
  const auto s = summary_f.get();
  EXPECT_GE(s.snapshots, 3u);
  ASSERT_NE(s.find("dev-a"), nullptr);
  t.stop();
  expect_no_stop_trouble(logs);
}

TEST(TelemetryLifecycle, ProbeFactoryCallingStopDuringStart) {
  WarnCapture logs;
  std::unique_ptr<Telemetry> t;
  bool factory_ran = false;
  t = std::make_unique<Telemetry>(
      fast_config(), [&](const Config& c, const ProbeExecutors& ex, std::vector<std::string>& e) {
        factory_ran = true;
        t->stop();  // a factory that decides there is nothing to run
        return tick_factory()(c, ex, e);
      });
  t->start();
  EXPECT_TRUE(factory_ran);
  EXPECT_TRUE(t->stats().empty()) << "nothing is scheduled after a stop";
  t->start();  // still a no-op
  t.reset();
  expect_no_stop_trouble(logs);
}

// The no-GPU fallback calls the factory on the io thread: a factory that stops there.
TEST(TelemetryLifecycle, ProbeFactoryCallingStopInTheNoGpuFallback) {
  WarnCapture logs;
  Config c = fast_config({"gpu0"});
  c.simulate_when_no_gpu = true;
  std::promise<void> asked;
  auto asked_f = asked.get_future();
  std::unique_ptr<Telemetry> t;
  t = std::make_unique<Telemetry>(
      c, [&](const Config& cfg, const ProbeExecutors& ex, std::vector<std::string>& e) {
        if (cfg.probes == std::vector<std::string>{"simulated"}) {
          t->stop();
          asked.set_value();
          return std::vector<ProbePtr>{};
        }
        return tick_factory()(cfg, ex, e);
      });
  t->start();
  ASSERT_TRUE(ready(asked_f));
  EXPECT_EQ(t->probe_names(), std::vector<std::string>{"gpu0"});
  t.reset();
  expect_no_stop_trouble(logs);
}

TEST(TelemetryLifecycle, ProbeFactoryDestroyingTheTelemetryInTheNoGpuFallback) {
  WarnCapture logs;
  Config c = fast_config({"gpu0"});
  c.simulate_when_no_gpu = true;
  auto gone = std::make_shared<std::promise<void>>();
  auto gone_f = gone->get_future();
  std::unique_ptr<Telemetry> t;
  t = std::make_unique<Telemetry>(
      c, [&](const Config& cfg, const ProbeExecutors& ex, std::vector<std::string>& e) {
        if (cfg.probes == std::vector<std::string>{"simulated"}) {
          t.reset();
          return std::vector<ProbePtr>{};
        }
        return tick_factory(gone)(cfg, ex, e);
      });
  t->start();
  EXPECT_TRUE(ready(gone_f)) << "the io thread freed the Telemetry after the factory returned";
  expect_no_stop_trouble(logs);
}

// With the caller's io_context, a callback that stops leaves the io_context without work: run()
// returns by itself.
TEST(TelemetryLifecycle, StopFromACallbackOnTheCallersIoContext) {
  WarnCapture logs;
  boost::asio::io_context io;
  Telemetry t(fast_config(), tick_factory(), io.get_executor());
  int calls = 0;
  auto sub = t.channel().subscribe({}, [&](const SnapshotPtr&) {
    if (++calls == 2) t.stop();
  });
  t.start();
  io.run();  // returns once nothing is left to do
  EXPECT_GE(calls, 2);
  expect_no_stop_trouble(logs);
}

}  // namespace
}  // namespace gpustream
