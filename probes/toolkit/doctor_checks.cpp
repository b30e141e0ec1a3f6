// What the doctor's checks share (toolkit/doctor_checks.hpp): statuses, the report's counts, the
// check context and the bounded run of a check that calls a vendor library.
#include <algorithm>
#include <cstdlib>
#include <memory>
#include <thread>

#include "toolkit/doctor_checks.hpp"

namespace gpustream::doctor {

Config Options::config() const {
  Config c;
  c.paths = paths;
  c.probes = probes;
  c.simulate = simulate;
  c.probe_settings = probe_settings;
  return c;
}

std::string_view to_string(Status s) noexcept {
  switch (s) {
    case Status::ok:
      return "ok";
    case Status::info:
      return "info";
    case Status::warn:
      return "warn";
    case Status::blocker:
      return "blocker";
  }
  return "info";
}

bool Report::fully_readable() const noexcept { return count(Status::blocker) == 0; }
bool Report::enough_gpus() const noexcept {
  return gpus_expected == 0 || gpus_readable.value_or(0) >= gpus_expected;
}

std::size_t Report::count(Status s) const noexcept {
  return static_cast<std::size_t>(std::count_if(findings.begin(), findings.end(),
                                                [s](const Finding& f) { return f.status == s; }));
}

std::optional<std::string> CheckContext::env(std::string_view name) const {
  if (options.getenv) return options.getenv(name);
  // NOLINTNEXTLINE(concurrency-mt-unsafe): read-only, nothing here sets the environment.
  const char* v = std::getenv(std::string(name).c_str());
  if (!v) return std::nullopt;
  return std::string(v);
}

void CheckContext::add(std::string_view probe, std::string_view check, Status status,
                       std::string detail, std::string fix) const {
  out.push_back(
      {std::string(probe), std::string(check), status, std::move(detail), std::move(fix)});
}

namespace detail {

bool run_bounded(const Context& c, std::string_view probe, std::string_view check_name,
                 std::function<void(const Context&)> check) {
  struct Work {
    Options options;
    machine::Identity identity;
    std::vector<Finding> findings;
    std::function<void(const Context&)> check;
  };
  auto work = std::make_shared<Work>(Work{c.options, c.identity, {}, std::move(check)});
  std::promise<void> finished;
  std::shared_future<void> done = finished.get_future().share();
  std::thread([work, probe = std::string(probe), name = std::string(check_name),
               finished = std::move(finished)]() mutable {
    std::vector<std::shared_future<void>> unused;
    const Context local{work->options, work->identity, {}, work->findings, unused};
    try {
      work->check(local);
    } catch (const std::exception& e) {
      local.add(probe, name, Status::warn, std::string("this check failed: ") + e.what());
    }
    finished.set_value();
  }).detach();
  if (done.wait_for(c.options.tool_timeout) != std::future_status::ready) {
    c.pending.push_back(std::move(done));
    return false;
  }
  for (auto& f : work->findings) c.out.push_back(std::move(f));
  return true;
}

}  // namespace detail

}  // namespace gpustream::doctor
