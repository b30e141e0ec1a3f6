// A misbehaving amd-smi is logged once per distinct failure, not once per tick: AmdProbe's error
// messages do not change from run to run (the fake's failures do: a pid in its text, a cut at a
// pid-dependent byte), and the Scheduler logs each distinct message once until a clean sample.
// Every failing sample still carries its error.
//
// The Scheduler runs on a manual clock; the probe's blocking work runs on a real thread pool and
// its completions land on a separate io_context that the test runs while one is in flight.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <spdlog/sinks/ringbuffer_sink.h>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>

#include "amd_fake_cli.hpp"
#include "gpustream/detail/scheduler_impl.hpp"
#include "gpustream/log.hpp"
#include "gpustream/probes/amd_probe.hpp"
#include "gpustream/scheduler.hpp"
#include "support/manual_clock.hpp"
#include "support/temp_tree.hpp"

namespace gpustream {
namespace {

using namespace std::chrono_literals;
using test::FakeAmdCli;
using test::ManualClock;
using test::TempTree;
using ManualScheduler = BasicScheduler<ManualClock, test::ManualWaitTraits>;

// Copies what the gpustream logger writes while it lives ("<level>|<message>"); restores the
// logger's sinks and level afterwards.
class AmdCliLogCapture {
 public:
  explicit AmdCliLogCapture(spdlog::level::level_enum level)
      : sink_(std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(1024)),
        level_(logger()->level()) {
    sink_->set_pattern("%l|%v");
    logger()->sinks().push_back(sink_);
    logger()->set_level(level);
  }
  ~AmdCliLogCapture() {
    logger()->set_level(level_);
    auto& sinks = logger()->sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
  }
  AmdCliLogCapture(const AmdCliLogCapture&) = delete;
  AmdCliLogCapture& operator=(const AmdCliLogCapture&) = delete;

  /// Lines at `level` ("warning", "debug") from the amd probe.
  std::vector<std::string> lines(const std::string& level) const {
    std::vector<std::string> out;
    for (auto& l : sink_->last_formatted())
      if (l.rfind(level + "|probe amd", 0) == 0) out.push_back(l);
    return out;
  }

 private:
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink_;
  spdlog::level::level_enum level_;
};

// Counts the scheduler's calls into the probe, so that the test knows when one is in flight.
class InFlight final : public Probe {
 public:
  explicit InFlight(ProbePtr inner) : inner_(std::move(inner)) {}
  std::string_view name() const noexcept override { return inner_->name(); }
  std::chrono::milliseconds min_interval() const noexcept override {
    return inner_->min_interval();
  }
  void async_detect(DetectHandler h) override {
    ++started_;
    inner_->async_detect([this, h = std::move(h)](Detection d) {
      ++done_;
      h(std::move(d));
    });
  }
  void async_sample(SampleHandler h) override {
    ++started_;
    inner_->async_sample([this, h = std::move(h)](boost::system::error_code ec, GpuSnapshot s) {
      ++done_;
      h(ec, std::move(s));
    });
  }
  void cancel() noexcept override { inner_->cancel(); }
  bool busy() const noexcept { return started_ != done_; }

 private:
  ProbePtr inner_;
  std::size_t started_ = 0, done_ = 0;
};

class AmdCliLog : public ::testing::Test {
 protected:
  void SetUp() override {
    ManualClock::reset();
    for (const char* f : {"static.json", "metric.json", "process.json"}) smi_.copy_recorded(f);
    probe_ = std::make_shared<InFlight>(
        make_amd_cli_probe({done_.get_executor(), pool_.get_executor()},
                           {.tool = AmdTool::amd_smi, .path = smi_.path(), .timeout = 300ms}));
    ScheduleOptions o;
    o.interval = 2000ms;
    o.timeout = 1h;  // manual time; the probe's own 300 ms (real) timeout is under test
    o.backoff_initial = o.backoff_max = 2000ms;
    o.failures_before_redetect = 0;
    scheduler_ = std::make_unique<ManualScheduler>(
        io_.get_executor(), [this](GpuSnapshot s) { published_.push_back(std::move(s)); });
    scheduler_->add(probe_, o);
    scheduler_->start();
  }
  void TearDown() override {
    scheduler_.reset();
    while (probe_->busy() && done_.run_one_for(10s) > 0) {}
    poll();
  }
  void poll() {
    io_.restart();
    io_.poll();
  }
  // Runs until the scheduler publishes its next snapshot: manual time moves while nothing is in
  // flight; an operation in flight is waited for in real time (deadline only for failures).
  const GpuSnapshot& next() {
    const auto n = published_.size();
    for (int i = 0; i < 1000 && published_.size() == n; ++i) {
      poll();
      if (published_.size() != n) break;
      if (probe_->busy()) {
        done_.run_one_for(10s);
      } else {
        ManualClock::advance(100ms);
      }
    }
    if (published_.size() == n) throw std::runtime_error("nothing published");
    return published_.back();
  }

  TempTree tree_;
  FakeAmdCli smi_{tree_, fakes::kFakeAmdSmi, "amd-smi"};
  boost::asio::io_context io_;    // the scheduler (manual clock)
  boost::asio::io_context done_;  // probe completions
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> guard_{
      done_.get_executor()};
  boost::asio::thread_pool pool_{1};
  std::shared_ptr<InFlight> probe_;
  std::unique_ptr<ManualScheduler> scheduler_;
  std::vector<GpuSnapshot> published_;
};

TEST_F(AmdCliLog, EachDistinctFailureLoggedOnceUntilTheToolWorksAgain) {
  AmdCliLogCapture log(spdlog::level::debug);
  ASSERT_TRUE(next().errors.empty());
  struct Case {
    const char* mode;
    const char* says;  // in the error message
  };
  const Case cases[] = {{"partial", "printed invalid JSON"}, {"garbage", "printed no JSON"},
                        {"fail", "exited with code 2"},      {"crash", "killed by SIGSEGV"},
                        {"empty", "printed nothing"},        {"hang", "timed out after 300 ms"}};
  std::size_t expected = 0;
  for (const auto& c : cases) {
    for (int round = 0; round < 2; ++round) {  // the log clears after a clean sample
      smi_.set_mode(c.mode);
      std::vector<std::string> messages;
      for (int i = 0; i < 3; ++i) {
        const auto& s = next();
        ASSERT_EQ(s.errors.size(), 1u) << c.mode;  // subscribers see every failure
        EXPECT_NE(s.errors[0].message.find(c.says), std::string::npos) << s.errors[0].message;
        EXPECT_TRUE(s.devices.empty());
        messages.push_back(s.errors[0].message);
      }
      EXPECT_EQ(messages[0], messages[1]) << c.mode;  // nothing per-run in the message
      EXPECT_EQ(messages[1], messages[2]) << c.mode;
      ++expected;
      const auto warnings = log.lines("warning");
      ASSERT_EQ(warnings.size(), expected) << c.mode;
      EXPECT_NE(warnings.back().find(c.says), std::string::npos) << warnings.back();
      // The particulars (which differ per run) once, at debug level.
      EXPECT_EQ(log.lines("debug").size(), expected) << c.mode;
      smi_.set_mode("normal");
      ASSERT_TRUE(next().errors.empty()) << c.mode;
    }
  }
}

TEST_F(AmdCliLog, PartialSampleErrorLoggedOnceAndStillPublished) {
  AmdCliLogCapture log(spdlog::level::info);
  ASSERT_TRUE(next().errors.empty());
  smi_.set_output("process.json", "Traceback (most recent call last):\n  File \"amd-smi\"\n");
  for (int i = 0; i < 4; ++i) {
    const auto& s = next();
    ASSERT_EQ(s.errors.size(), 1u);
    EXPECT_EQ(s.errors[0].code, "tool_failed");
    EXPECT_EQ(s.errors[0].message, "amd-smi process printed no JSON");
    EXPECT_EQ(s.devices.size(), 4u);  // the metrics are still there
  }
  EXPECT_EQ(log.lines("warning").size(), 1u);
  smi_.copy_recorded("process.json");
  ASSERT_TRUE(next().errors.empty());
  smi_.set_output("process.json", "[{\"gpu\": 0, \"process_list\": [");
  next();
  next();
  const auto warnings = log.lines("warning");
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_NE(warnings[1].find("amd-smi process printed invalid JSON"), std::string::npos);
}

}  // namespace
}  // namespace gpustream
