#include "gpustream/blocking_probe.hpp"

#include <exception>
#include <string>

#include <boost/asio/post.hpp>

#include "gpustream/errors.hpp"

namespace gpustream {

// Probe has no source file of its own; its one out-of-line default lives here.
GpuSnapshot Probe::sample_inline(boost::system::error_code& ec) {
  ec = errc::sample_failed;
  GpuSnapshot snap;
  snap.probe = std::string(name());
  snap.errors.push_back({"sample_failed", "this probe cannot sample inline", {}});
  return snap;
}

void BlockingProbe::async_detect(DetectHandler handler) {
  const bool on_io = never_blocks();
  boost::asio::post(on_io ? executors_.io : executors_.work, [self = shared_from_this(), on_io,
                                                              h = std::move(handler)]() mutable {
    Detection d;
    try {
      d = self->detect();
    } catch (const std::exception& e) {
      d.available = false;
      d.reason = e.what();
    } catch (...) {
      d.available = false;
      d.reason = "unknown error during detection";
    }
    if (on_io) {
      h(std::move(d));  // already in a handler of its own on the io executor
      return;
    }
    boost::asio::post(self->executors_.io,
                      [h = std::move(h), d = std::move(d)]() mutable { h(std::move(d)); });
  });
}

GpuSnapshot BlockingProbe::run_sample(boost::system::error_code& ec) {
  const auto t0 = steady_now_ns();
  GpuSnapshot snap;
  ec.clear();
  try {
    snap = sample();
  } catch (const std::exception& e) {
    ec = errc::sample_failed;
    snap.errors.push_back({"sample_failed", e.what(), {}});
  } catch (...) {
    ec = errc::sample_failed;
    snap.errors.push_back({"sample_failed", "unknown error during sample", {}});
  }
  if (snap.probe.empty()) snap.probe = std::string(name());
  if (snap.time_unix_ns == 0) snap.time_unix_ns = wall_now_ns();
  if (snap.monotonic_ns == 0) snap.monotonic_ns = t0;
  if (snap.sample_duration_ns == 0) snap.sample_duration_ns = steady_now_ns() - t0;
  return snap;
}

GpuSnapshot BlockingProbe::sample_inline(boost::system::error_code& ec) {
  if (!never_blocks()) return Probe::sample_inline(ec);
  return run_sample(ec);
}

void BlockingProbe::async_sample(SampleHandler handler) {
  const bool on_io = never_blocks();
  boost::asio::post(on_io ? executors_.io : executors_.work, [self = shared_from_this(), on_io,
                                                              h = std::move(handler)]() mutable {
    boost::system::error_code ec;
    GpuSnapshot snap = self->run_sample(ec);
    if (on_io) {
      h(ec, std::move(snap));  // already in a handler of its own on the io executor
      return;
    }
    boost::asio::post(
        self->executors_.io,
        [h = std::move(h), ec, snap = std::move(snap)]() mutable { h(ec, std::move(snap)); });
  });
}

}  // namespace gpustream
