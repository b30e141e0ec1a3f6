// probe_harness.hpp — runs a probe's async operations to completion in a test.
//
// An io_context for completions and a one-thread pool for the blocking work. Each call starts
// the operation, holds a work guard until the handler runs, and runs the io_context with a
// generous deadline that only matters when the probe never calls back.
#pragma once

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>
#include <chrono>
#include <optional>
#include <stdexcept>
#include <utility>

#include "gpustream/probe.hpp"

namespace gpustream::test {

struct SampleResult {
  boost::system::error_code ec;
  GpuSnapshot snapshot;
};

class ProbeHarness {
 public:
  static constexpr std::chrono::seconds kDeadline{10};

  ProbeExecutors executors() { return {io_.get_executor(), pool_.get_executor()}; }

  Detection detect(Probe& probe) {
    std::optional<Detection> out;
    auto guard = boost::asio::make_work_guard(io_);
    probe.async_detect([&](Detection d) {
      out = std::move(d);
      guard.reset();
    });
    run();
    if (!out) throw std::runtime_error("async_detect did not complete");
    return std::move(*out);
  }

  SampleResult sample(Probe& probe) {
    std::optional<SampleResult> out;
    auto guard = boost::asio::make_work_guard(io_);
    probe.async_sample([&](boost::system::error_code ec, GpuSnapshot snap) {
      out = SampleResult{ec, std::move(snap)};
      guard.reset();
    });
    run();
    if (!out) throw std::runtime_error("async_sample did not complete");
    return std::move(*out);
  }

 private:
  void run() {
    io_.restart();
    io_.run_for(kDeadline);
  }

  boost::asio::io_context io_;
  boost::asio::thread_pool pool_{1};
};

}  // namespace gpustream::test
