#include "gpustream/blocking_probe.hpp"

#include <exception>
#include <string>

#include <boost/asio/post.hpp>

#include "gpustream/errors.hpp"

namespace gpustream {

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

void BlockingProbe::async_sample(SampleHandler handler) {
  const bool on_io = never_blocks();
  boost::asio::post(on_io ? executors_.io : executors_.work, [self = shared_from_this(), on_io,
                                                              h = std::move(handler)]() mutable {
    const auto t0 = steady_now_ns();
    GpuSnapshot snap;
    boost::system::error_code ec;
    try {
      snap = self->sample();
    } catch (const std::exception& e) {
      ec = errc::sample_failed;
      snap.errors.push_back({"sample_failed", e.what(), {}});
    } catch (...) {
      ec = errc::sample_failed;
      snap.errors.push_back({"sample_failed", "unknown error during sample", {}});
    }
    if (snap.probe.empty()) snap.probe = std::string(self->name());
    if (snap.time_unix_ns == 0) snap.time_unix_ns = wall_now_ns();
    if (snap.monotonic_ns == 0) snap.monotonic_ns = t0;
    if (snap.sample_duration_ns == 0) snap.sample_duration_ns = steady_now_ns() - t0;
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
