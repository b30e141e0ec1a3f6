#include "support/test_probe.hpp"

#include <algorithm>
#include <utility>

#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>

#include "gpustream/errors.hpp"

namespace gpustream::test {

TestProbe::TestProbe(std::string name, boost::asio::any_io_executor io, Now now)
    : name_(std::move(name)), io_(std::move(io)), now_(now ? std::move(now) : Now(steady_now_ns)) {
  detect_script_ = [](std::uint64_t) { return std::optional<Detection>(available(1)); };
}

std::chrono::milliseconds TestProbe::min_interval() const noexcept {
  std::lock_guard lock(mu_);
  return min_interval_;
}

void TestProbe::async_detect(DetectHandler handler) {
  std::unique_lock lock(mu_);
  const auto call = detect_calls_++;
  auto script = detect_script_;
  lock.unlock();
  std::optional<Detection> d = script ? script(call) : std::nullopt;  // may throw
  if (d) {
    post_detect(std::move(handler), std::move(*d));
    return;
  }
  lock.lock();
  pending_detect_ = std::move(handler);
}

void TestProbe::async_sample(SampleHandler handler) {
  std::unique_lock lock(mu_);
  const auto call = sample_calls_++;
  sample_times_.push_back(now_());
  auto script = sample_script_;
  lock.unlock();
  std::optional<SampleResult> r = script ? script(call) : std::nullopt;  // may throw
  lock.lock();
  ++in_flight_;
  max_in_flight_ = std::max(max_in_flight_, in_flight_);
  if (r) {
    lock.unlock();
    post_sample(std::move(handler), std::move(*r));
    return;
  }
  pending_sample_ = std::move(handler);
}

GpuSnapshot TestProbe::sample_inline(boost::system::error_code& ec) {
  std::unique_lock lock(mu_);
  const auto call = sample_calls_++;
  ++inline_calls_;
  last_inline_thread_ = std::this_thread::get_id();
  sample_times_.push_back(now_());
  ++in_flight_;
  max_in_flight_ = std::max(max_in_flight_, in_flight_);
  auto script = sample_script_;
  lock.unlock();
  std::optional<SampleResult> r;
  try {
    r = script ? script(call) : std::nullopt;
  } catch (...) {
    lock.lock();
    --in_flight_;
    throw;
  }
  lock.lock();
  --in_flight_;
  lock.unlock();
  if (!r) r = failed("no scripted answer for an inline sample");
  ec = r->ec;
  return std::move(r->snapshot);
}

void TestProbe::cancel() noexcept {
  DetectHandler d;
  SampleHandler s;
  {
    std::lock_guard lock(mu_);
    ++cancel_calls_;
    if (!cancel_completes_) return;
    d = std::exchange(pending_detect_, nullptr);
    s = std::exchange(pending_sample_, nullptr);
  }
  if (d) post_detect(std::move(d), unavailable("cancelled"));
  if (s) {
    SampleResult r{boost::asio::error::operation_aborted, {}};
    post_sample(std::move(s), std::move(r));
  }
}

void TestProbe::set_min_interval(std::chrono::milliseconds d) {
  std::lock_guard lock(mu_);
  min_interval_ = d;
}

void TestProbe::script_detect(DetectScript s) {
  std::lock_guard lock(mu_);
  detect_script_ = std::move(s);
}

void TestProbe::script_sample(SampleScript s) {
  std::lock_guard lock(mu_);
  sample_script_ = std::move(s);
}

void TestProbe::set_cancel_completes(bool v) {
  std::lock_guard lock(mu_);
  cancel_completes_ = v;
}

bool TestProbe::complete_detect(Detection d) {
  DetectHandler h;
  {
    std::lock_guard lock(mu_);
    h = std::exchange(pending_detect_, nullptr);
  }
  if (!h) return false;
  post_detect(std::move(h), std::move(d));
  return true;
}

bool TestProbe::complete_sample(SampleResult r) {
  SampleHandler h;
  {
    std::lock_guard lock(mu_);
    h = std::exchange(pending_sample_, nullptr);
  }
  if (!h) return false;
  post_sample(std::move(h), std::move(r));
  return true;
}

void TestProbe::drop_pending() {
  DetectHandler d;
  SampleHandler s;
  {
    std::lock_guard lock(mu_);
    d = std::exchange(pending_detect_, nullptr);
    s = std::exchange(pending_sample_, nullptr);
    if (s) --in_flight_;
  }
  // d and s are destroyed here, outside the lock.
}

void TestProbe::post_detect(DetectHandler h, Detection d) {
  boost::asio::post(io_, [h = std::move(h), d = std::move(d)]() mutable { h(std::move(d)); });
}

void TestProbe::post_sample(SampleHandler h, SampleResult r) {
  {
    std::lock_guard lock(mu_);
    --in_flight_;
  }
  boost::asio::post(
      io_, [h = std::move(h), r = std::move(r)]() mutable { h(r.ec, std::move(r.snapshot)); });
}

bool TestProbe::detect_pending() const {
  std::lock_guard lock(mu_);
  return static_cast<bool>(pending_detect_);
}

bool TestProbe::sample_pending() const {
  std::lock_guard lock(mu_);
  return static_cast<bool>(pending_sample_);
}

std::uint64_t TestProbe::detect_calls() const {
  std::lock_guard lock(mu_);
  return detect_calls_;
}

std::uint64_t TestProbe::sample_calls() const {
  std::lock_guard lock(mu_);
  return sample_calls_;
}

std::uint64_t TestProbe::cancel_calls() const {
  std::lock_guard lock(mu_);
  return cancel_calls_;
}

std::uint64_t TestProbe::max_samples_in_flight() const {
  std::lock_guard lock(mu_);
  return max_in_flight_;
}

std::vector<std::int64_t> TestProbe::sample_times() const {
  std::lock_guard lock(mu_);
  return sample_times_;
}

std::uint64_t TestProbe::inline_calls() const {
  std::lock_guard lock(mu_);
  return inline_calls_;
}

std::thread::id TestProbe::last_inline_thread() const {
  std::lock_guard lock(mu_);
  return last_inline_thread_;
}

Detection TestProbe::available(std::size_t devices) {
  Detection d;
  d.available = true;
  for (std::size_t i = 0; i < devices; ++i) {
    DeviceInfo info;
    info.id = "test-" + std::to_string(i);
    info.vendor = Vendor::simulated;
    info.index = static_cast<int>(i);
    info.name = "Test GPU";
    d.devices.push_back(std::move(info));
  }
  return d;
}

Detection TestProbe::unavailable(std::string reason) {
  Detection d;
  d.reason = std::move(reason);
  return d;
}

TestProbe::SampleResult TestProbe::ok(std::size_t devices) {
  SampleResult r;
  for (std::size_t i = 0; i < devices; ++i) {
    DeviceSample dev;
    dev.id = "test-" + std::to_string(i);
    dev.vendor = Vendor::simulated;
    dev.index = static_cast<int>(i);
    dev.name = "Test GPU";
    dev.metrics.set(Metric::utilization_percent, 42.0, Source::simulated);
    r.snapshot.devices.push_back(std::move(dev));
  }
  return r;
}

TestProbe::SampleResult TestProbe::partial(std::size_t devices, std::string error_message) {
  auto r = ok(devices);
  r.snapshot.errors.push_back({"partial", std::move(error_message), {}});
  return r;
}

TestProbe::SampleResult TestProbe::failed(std::string message) {
  SampleResult r;
  r.ec = make_error_code(errc::sample_failed);
  r.snapshot.errors.push_back({"sample_failed", std::move(message), {}});
  return r;
}

}  // namespace gpustream::test
