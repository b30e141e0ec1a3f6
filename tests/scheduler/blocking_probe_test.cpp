// BlockingProbe: where detect() and sample() run. A probe that may block runs them on the work
// executor and answers on the io executor; one that says it never blocks (never_blocks(), the
// simulated probe) runs them on the io executor itself — no thread hop — and still answers in a
// handler of its own, never inline in async_sample()/async_detect().
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include "gpustream/blocking_probe.hpp"
#include "gpustream/work_pool.hpp"

namespace gpustream {
namespace {

/// Records the thread its detect() and sample() ran on.
class WhereProbe final : public BlockingProbe {
 public:
  WhereProbe(ProbeExecutors ex, bool never_blocks)
      : BlockingProbe(std::move(ex)), never_blocks_(never_blocks) {}
  std::string_view name() const noexcept override { return "where"; }
  ProbeKind kind() const noexcept override { return ProbeKind::gpu; }
  std::thread::id detect_thread, sample_thread;

 protected:
  Detection detect() override {
    detect_thread = std::this_thread::get_id();
    Detection d;
    d.available = true;
    return d;
  }
  GpuSnapshot sample() override {
    sample_thread = std::this_thread::get_id();
    GpuSnapshot s;
    s.devices.emplace_back().id = "GPU-0";
    return s;
  }
  bool never_blocks() const noexcept override { return never_blocks_; }

 private:
  bool never_blocks_;
};

struct Ran {
  std::thread::id detect_thread, sample_thread, detect_answer, sample_answer;
  bool detect_inline = false, sample_inline = false;
  std::size_t devices = 0;
};

Ran run_probe(bool never_blocks) {
  boost::asio::io_context io;
  WorkPool pool(1);
  auto probe = std::make_shared<WhereProbe>(ProbeExecutors{io.get_executor(), pool.executor()},
                                            never_blocks);
  Ran r;
  std::atomic<bool> detected{false}, sampled{false};
  probe->async_detect([&](Detection) {
    r.detect_answer = std::this_thread::get_id();
    detected = true;
  });
  r.detect_inline = detected.load();
  probe->async_sample([&](boost::system::error_code, GpuSnapshot s) {
    r.sample_answer = std::this_thread::get_id();
    r.devices = s.devices.size();
    sampled = true;
  });
  r.sample_inline = sampled.load();
  auto guard = boost::asio::make_work_guard(io);
  while (!(detected && sampled)) io.run_one_for(std::chrono::seconds{5});
  r.detect_thread = probe->detect_thread;
  r.sample_thread = probe->sample_thread;
  pool.stop();
  return r;
}

TEST(BlockingProbe, ABlockingProbeRunsOnTheWorkPoolAndAnswersOnTheIoExecutor) {
  const auto r = run_probe(false);
  const auto io_thread = std::this_thread::get_id();  // the test runs the io_context
  EXPECT_NE(r.detect_thread, io_thread);
  EXPECT_NE(r.sample_thread, io_thread);
  EXPECT_EQ(r.detect_answer, io_thread);
  EXPECT_EQ(r.sample_answer, io_thread);
  EXPECT_FALSE(r.detect_inline);
  EXPECT_FALSE(r.sample_inline);
  EXPECT_EQ(r.devices, 1u);
}

TEST(BlockingProbe, AProbeThatNeverBlocksRunsOnTheIoExecutorNotInline) {
  const auto r = run_probe(true);
  const auto io_thread = std::this_thread::get_id();
  EXPECT_EQ(r.detect_thread, io_thread);  // no hop to the pool and back
  EXPECT_EQ(r.sample_thread, io_thread);
  EXPECT_EQ(r.detect_answer, io_thread);
  EXPECT_EQ(r.sample_answer, io_thread);
  EXPECT_FALSE(r.detect_inline);  // still a handler of its own
  EXPECT_FALSE(r.sample_inline);
  EXPECT_EQ(r.devices, 1u);
}

}  // namespace
}  // namespace gpustream
