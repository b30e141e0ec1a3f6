// AppleSiliconProbe: the persistent macmon child and the latest sample (see apple_probe.hpp).
#include <algorithm>
#include <exception>
#include <string>
#include <utility>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>

#include "apple/apple_core.hpp"
#include "gpustream/errors.hpp"
#include "gpustream/json.hpp"

namespace gpustream {
namespace {

namespace asio = boost::asio;
using boost::system::error_code;
using std::chrono::milliseconds;

constexpr std::size_t kMaxProblems = 16;
constexpr int kStaleIntervals = 3;

std::int64_t to_ns(milliseconds ms) { return ms.count() * 1'000'000; }

AppleProbeOptions with_defaults(AppleProbeOptions o) {
  if (o.interval <= milliseconds::zero()) o.interval = milliseconds{1000};
  if (!o.monotonic_clock) o.monotonic_clock = [] { return steady_now_ns(); };
  if (!o.wall_clock) o.wall_clock = [] { return wall_now_ns(); };
  if (!o.silence_restart) o.silence_restart = o.interval * 10;
  if (!o.first_line_wait)
    o.first_line_wait = std::min(o.interval + milliseconds{1000}, milliseconds{4000});
  return o;
}

// The start of a rejected line, for messages: at most 60 bytes.
std::string head_of(std::string_view line) {
  return apple_detail::printable(line.substr(0, 60)) + (line.size() > 60 ? "..." : "");
}

// The GPU with every metric absent for `why` (before the first line; stale).
DeviceSample absent_device(const std::optional<MacmonSocInfo>& soc, Absence why) {
  const DeviceInfo info = apple_device_info(soc);
  DeviceSample d;
  d.id = info.id;
  d.vendor = info.vendor;
  d.name = info.name;
  d.attributes["memory"] = "unified";
  d.processes_absent = Absence::unsupported;
  d.metrics.fill_absent(why, Source::macmon);
  d.engines.push_back({"gpu", Reading::missing(why, Source::macmon)});
  d.engines.push_back({"ane", Reading::missing(Absence::unsupported, Source::macmon)});
  return d;
}

}  // namespace

namespace apple_detail {
std::string printable(std::string_view text) {
  std::string out(text);
  for (auto& c : out)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  return to_valid_utf8(out);
}
}  // namespace apple_detail

AppleSiliconProbe::Core::Core(ProbeExecutors executors, AppleProbeOptions options)
    : executors_(std::move(executors)),
      strand_(asio::make_strand(executors_.io)),
      options_(with_defaults(std::move(options))),
      interval_ns_(to_ns(options_.interval)),
      silence_ns_(to_ns(*options_.silence_restart)),
      first_line_timer_(strand_) {}

void AppleSiliconProbe::Core::ensure_started() {
  if (shut_down_) return;
  if (!child_) {
    LineChildOptions o;
    o.argv = {options_.macmon.empty() ? std::string("macmon") : options_.macmon, "-i",
              std::to_string(options_.interval.count()), "pipe"};
    o.env = options_.env;
    o.max_line_bytes = options_.max_line_bytes;
    o.restart_initial = options_.restart_initial;
    o.restart_max = options_.restart_max;
    o.stop_grace = options_.stop_grace;
    child_ = std::make_unique<LineChild>(
        strand_, std::move(o),
        [this](std::string_view line, bool partial) { on_line(line, partial); },
        [this](const LineChildEvent& e) { on_event(e); });
    first_line_deadline_ = std::chrono::steady_clock::now() + *options_.first_line_wait;
  }
  child_->start();  // no effect while it runs or waits for a restart
}

void AppleSiliconProbe::Core::sample(SampleHandler handler) {
  const std::int64_t started = steady_now_ns();
  if (shut_down_) {
    GpuSnapshot snap;
    snap.probe = std::string(kName);
    complete(std::move(handler), errc::stopped, std::move(snap));
    return;
  }
  ensure_started();
  const bool may_wait = !latest_ && child_alive_ && first_line_deadline_ &&
                        std::chrono::steady_clock::now() < *first_line_deadline_;
  if (!may_wait) {
    auto [ec, snap] = build(started);
    complete(std::move(handler), ec, std::move(snap));
    return;
  }
  waiting_.push_back({std::move(handler), started});
  if (waiting_.size() == 1) {
    first_line_timer_.expires_at(*first_line_deadline_);
    first_line_timer_.async_wait([self = shared_from_this()](error_code ec) {
      if (!ec) self->finish_waiting();
    });
  }
}

void AppleSiliconProbe::Core::finish_waiting(error_code forced) {
  if (waiting_.empty()) return;
  first_line_timer_.cancel();
  auto waiting = std::move(waiting_);
  waiting_.clear();
  for (auto& w : waiting) {
    if (forced) {
      GpuSnapshot snap;
      snap.probe = std::string(kName);
      snap.errors.push_back({"cancelled", "the sample was cancelled while waiting for macmon", {}});
      complete(std::move(w.handler), forced, std::move(snap));
    } else {
      auto [ec, snap] = build(w.started_ns);
      complete(std::move(w.handler), ec, std::move(snap));
    }
  }
}

void AppleSiliconProbe::Core::cancel_waiting() { finish_waiting(asio::error::operation_aborted); }

void AppleSiliconProbe::Core::stop_child() {
  restarting_for_silence_ = false;
  if (child_) child_->stop();
}

void AppleSiliconProbe::Core::shutdown() {
  shut_down_ = true;
  finish_waiting(asio::error::operation_aborted);
  child_.reset();  // SIGTERM now; SIGKILL and the reaping happen in the background
  set_status([](AppleProbeStatus& s) {
    s.running = false;
    s.pid.reset();
  });
}

void AppleSiliconProbe::Core::complete(SampleHandler handler, error_code ec, GpuSnapshot snap) {
  asio::post(executors_.io, [h = std::move(handler), ec, snap = std::move(snap)]() mutable {
    h(ec, std::move(snap));
  });
}

void AppleSiliconProbe::Core::on_line(std::string_view line, bool partial) {
  MacmonSample parsed;
  try {
    parsed = parse_macmon_line(line);
  } catch (const std::exception& e) {
    set_status([](AppleProbeStatus& s) { ++s.lines_rejected; });
    const std::string what =
        partial ? "its output ended in the middle of a line"
                : "a line is not a macmon sample: " + apple_detail::printable(e.what());
    note_problem("parse_error",
                 "macmon: " + what + " (skipped; it began with: " + head_of(line) + ")", "parse");
    return;
  }
  if (!parsed.invalid_fields.empty() && log_once_.first("fields")) {
    std::string list;
    for (const auto& f : parsed.invalid_fields) list += (list.empty() ? "" : ", ") + f;
    logger()->warn("apple: macmon printed fields of an unexpected type, ignored: {}", list);
  }
  latest_ = std::move(parsed);
  latest_mono_ = mono();
  latest_wall_ = wall();
  set_status([](AppleProbeStatus& s) { ++s.lines_accepted; });
  if (logged_since_good_line_) {
    for (const char* key : {"parse", "long", "exit", "spawn", "stale", "silence"})
      log_once_.clear(key);
    logged_since_good_line_ = false;
  }
  finish_waiting();
  if (options_.on_line) {
    try {
      options_.on_line();
    } catch (const std::exception& e) {
      logger()->error("apple: the on_line callback threw: {}", e.what());
    } catch (...) {
      logger()->error("apple: the on_line callback threw");
    }
  }
}

void AppleSiliconProbe::Core::on_event(const LineChildEvent& e) {
  using Kind = LineChildEvent::Kind;
  switch (e.kind) {
    case Kind::started:
      child_alive_ = true;
      run_started_mono_ = mono();
      set_status([&](AppleProbeStatus& s) {
        s.running = true;
        s.pid = e.pid;
        ++s.starts;
      });
      return;
    case Kind::line_too_long:
      set_status([](AppleProbeStatus& s) { ++s.lines_rejected; });
      note_problem("line_too_long", e.message, "long");
      return;
    case Kind::spawn_failed:
    case Kind::exited:
      child_alive_ = false;
      last_child_problem_ = e.message;
      set_status([](AppleProbeStatus& s) {
        s.running = false;
        s.pid.reset();
      });
      note_problem("tool_failed", e.message, e.kind == Kind::exited ? "exit" : "spawn");
      finish_waiting();  // no first line is coming from this run
      return;
    case Kind::stopped:
      child_alive_ = false;
      set_status([](AppleProbeStatus& s) {
        s.running = false;
        s.pid.reset();
      });
      if (restarting_for_silence_ && !shut_down_) {
        restarting_for_silence_ = false;
        asio::post(strand_, [self = shared_from_this()] {
          if (!self->shut_down_ && self->child_) self->child_->start();
        });
      }
      return;
  }
}

std::pair<error_code, GpuSnapshot> AppleSiliconProbe::Core::build(std::int64_t started_ns) {
  GpuSnapshot s;
  s.probe = std::string(kName);
  const std::int64_t now_mono = mono();
  const auto soc_info = soc();
  error_code ec;
  maybe_restart_silent(now_mono);
  if (latest_ && now_mono - latest_mono_ <= kStaleIntervals * interval_ns_) {
    fill_apple_snapshot(s, *latest_, soc_info);
    s.time_unix_ns = latest_->timestamp_unix_ns.value_or(latest_wall_);
    s.monotonic_ns = latest_mono_;
  } else {
    s.devices.push_back(
        absent_device(soc_info, latest_ ? Absence::stale : Absence::not_yet_seeded));
    s.time_unix_ns = wall();
    s.monotonic_ns = now_mono;
    if (latest_) {
      const std::string message =
          "macmon printed nothing for " + std::to_string((now_mono - latest_mono_) / 1'000'000) +
          " ms (one line is expected every " + std::to_string(options_.interval.count()) +
          " ms); " + child_state();
      s.errors.push_back({"stale", message, std::string(kAppleGpuId)});
      if (log_once_.first("stale")) {
        logger()->warn("apple: {}", message);
        logged_since_good_line_ = true;
      }
    } else if (!child_alive_) {
      s.errors.push_back({"tool_failed", child_state(), {}});
    }
    if (!child_alive_) ec = errc::tool_failed;
  }
  for (auto& p : problems_) s.errors.push_back(std::move(p));
  problems_.clear();
  if (dropped_problems_ > 0) {
    s.errors.push_back({"parse_error",
                        std::to_string(dropped_problems_) + " more problems with macmon's output "
                                                            "since the previous snapshot",
                        {}});
    dropped_problems_ = 0;
  }
  s.sample_duration_ns = std::max<std::int64_t>(1, steady_now_ns() - started_ns);
  return {ec, std::move(s)};
}

void AppleSiliconProbe::Core::maybe_restart_silent(std::int64_t now_ns) {
  if (silence_ns_ <= 0 || !child_alive_ || restarting_for_silence_ || !child_) return;
  const std::int64_t since = std::max(latest_mono_, run_started_mono_);
  if (now_ns - since < silence_ns_) return;
  restarting_for_silence_ = true;
  note_problem("tool_failed",
               "macmon printed nothing for " + std::to_string((now_ns - since) / 1'000'000) +
                   " ms; restarting it",
               "silence");
  child_->stop();
}

void AppleSiliconProbe::Core::note_problem(const char* code, std::string message,
                                           const char* log_key) {
  if (log_once_.first(log_key)) {
    logger()->warn("apple: {}", message);
    logged_since_good_line_ = true;
  }
  set_status([&](AppleProbeStatus& s) { s.last_problem = message; });
  if (problems_.size() < kMaxProblems) {
    problems_.push_back({code, std::move(message), {}});
  } else {
    ++dropped_problems_;
  }
}

std::string AppleSiliconProbe::Core::child_state() const {
  if (child_alive_) {
    const auto pid = child_ ? child_->pid() : std::nullopt;
    return "macmon" + (pid ? " (pid " + std::to_string(*pid) + ")" : std::string()) + " is running";
  }
  if (!last_child_problem_.empty()) return "macmon is not running: " + last_child_problem_;
  return "macmon is not running";
}

void AppleSiliconProbe::Core::set_status(const std::function<void(AppleProbeStatus&)>& change) {
  std::lock_guard lock(mu_);
  change(status_);
}

AppleProbeStatus AppleSiliconProbe::Core::status() const {
  std::lock_guard lock(mu_);
  return status_;
}

std::optional<MacmonSocInfo> AppleSiliconProbe::Core::soc() const {
  std::lock_guard lock(mu_);
  return soc_;
}

void AppleSiliconProbe::Core::set_soc(std::optional<MacmonSocInfo> soc) {
  std::lock_guard lock(mu_);
  soc_ = std::move(soc);
}

// -- AppleSiliconProbe --

AppleSiliconProbe::AppleSiliconProbe(ProbeExecutors executors, AppleProbeOptions options)
    : executors_(std::move(executors)),
      core_(std::make_shared<Core>(executors_, std::move(options))) {}

AppleSiliconProbe::~AppleSiliconProbe() {
  // The child belongs to the strand: it is stopped there. If the io_context is not running any
  // more, the posted handler (and with it the Core) is destroyed with the io_context, which
  // kills and reaps the child.
  auto strand = core_->strand();
  asio::post(strand, [core = std::move(core_)] { core->shutdown(); });
}

std::chrono::milliseconds AppleSiliconProbe::min_interval() const noexcept {
  return core_->options().interval;
}

void AppleSiliconProbe::async_sample(SampleHandler handler) {
  asio::dispatch(core_->strand(),
                 [core = core_, h = std::move(handler)]() mutable { core->sample(std::move(h)); });
}

void AppleSiliconProbe::cancel() noexcept {
  try {
    asio::post(core_->strand(), [core = core_] { core->cancel_waiting(); });
  } catch (...) {
    // Out of memory while posting: nothing better to do; the wait ends at its deadline.
  }
}

void AppleSiliconProbe::stop() {
  asio::post(core_->strand(), [core = core_] { core->stop_child(); });
}

AppleProbeStatus AppleSiliconProbe::status() const { return core_->status(); }

std::optional<MacmonSocInfo> AppleSiliconProbe::soc_info() const { return core_->soc(); }

std::shared_ptr<AppleSiliconProbe> make_apple_probe(ProbeExecutors executors,
                                                    AppleProbeOptions options) {
  return std::make_shared<AppleSiliconProbe>(std::move(executors), std::move(options));
}

}  // namespace gpustream
