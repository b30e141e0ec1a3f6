#include "nvidia/smi_backend.hpp"

#include <algorithm>
#include <exception>
#include <utility>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>

#include "gpustream/errors.hpp"
#include "gpustream/log.hpp"
#include "gpustream/probes/nvidia_formats.hpp"
#include "gpustream/probes/readers.hpp"

namespace gpustream::nvidia_detail {
namespace {

std::string first_line(std::string_view text) {
  text = readers::trim(text);
  return std::string(text.substr(0, std::min(text.find('\n'), std::size_t{120})));
}

/// "exited with code 6: ..." plus what the tool printed on stdout ("No devices were found").
std::string describe(const RunResult& r) {
  auto out = r.describe();
  if (const auto line = first_line(r.output); !line.empty()) out += " (" + line + ")";
  return out;
}

/// Whether `app` runs on `d` (one of `devices` devices).
bool runs_on(const DeviceSample& d, const nvidia::SmiComputeApp& app, std::size_t devices) {
  if (!app.gpu_uuid.empty()) {
    const auto it = d.attributes.find("uuid");
    return it != d.attributes.end() && it->second == app.gpu_uuid;
  }
  if (!app.gpu_bus_id.empty()) return d.pci_bus_id == app.gpu_bus_id;
  return devices == 1;
}

DeviceSample* device_for(std::vector<DeviceSample>& devices, const nvidia::SmiComputeApp& app) {
  for (auto& d : devices)
    if (runs_on(d, app, devices.size())) return &d;
  return nullptr;
}

std::string join_fields(std::span<const std::string_view> fields) {
  std::string out;
  for (auto f : fields) {
    if (!out.empty()) out += ',';
    out += f;
  }
  return out;
}

}  // namespace

std::span<const std::string_view> smi_field_list(SmiFieldList list) noexcept {
  switch (list) {
    case SmiFieldList::power_fields:
      return kSmiGpuFields;
    case SmiFieldList::power_draw:
      return kSmiPowerDrawGpuFields;
    case SmiFieldList::power_draw_no_cap:
      return kSmiPowerDrawNoCapGpuFields;
    case SmiFieldList::basic:
      break;
  }
  return kSmiBasicGpuFields;
}

std::optional<SmiFieldList> smi_next_field_list(SmiFieldList from,
                                                std::string_view rejected) noexcept {
  const bool power_field = rejected == "power.draw.instant" || rejected == "power.draw.average";
  switch (from) {
    case SmiFieldList::power_fields:
      return power_field ? SmiFieldList::power_draw : SmiFieldList::basic;
    case SmiFieldList::power_draw:
      return rejected == "compute_cap" ? SmiFieldList::power_draw_no_cap : SmiFieldList::basic;
    case SmiFieldList::power_draw_no_cap:
      return SmiFieldList::basic;
    case SmiFieldList::basic:
      break;
  }
  return std::nullopt;
}

std::vector<std::string> smi_gpu_argv(const std::string& tool,
                                      std::span<const std::string_view> fields) {
  return {tool, "--query-gpu=" + join_fields(fields), "--format=csv,noheader,nounits"};
}

std::vector<std::string> smi_apps_argv(const std::string& tool) {
  return {tool, "--query-compute-apps=" + join_fields(kSmiAppFields),
          "--format=csv,noheader,nounits"};
}

GpuSnapshot smi_snapshot(std::string_view gpu_csv, std::span<const std::string_view> fields,
                         const std::string* apps, const std::string& apps_error,
                         proc::ProcessTable& processes) {
  GpuSnapshot snap;
  snap.probe = "nvidia";
  snap.devices = nvidia::smi_devices_from_csv(gpu_csv, fields, &snap.errors);
  if (!apps) {
    snap.errors.push_back({"tool_failed", apps_error, {}});
    for (auto& d : snap.devices) d.processes_absent = Absence::tool_failed;
    return snap;
  }
  struct Placed {
    DeviceSample* device;
    nvidia::SmiComputeApp app;
  };
  std::vector<Placed> placed;
  std::vector<std::int64_t> pids;
  for (auto& app : nvidia::smi_compute_apps_from_csv(*apps, kSmiAppFields, &snap.errors)) {
    DeviceSample* d = device_for(snap.devices, app);
    if (!d) {
      snap.errors.push_back({"parse_error",
                             "nvidia-smi lists pid " + std::to_string(app.pid) +
                                 " on a GPU it did not report (" + app.gpu_uuid + ")",
                             {}});
      continue;
    }
    pids.push_back(app.pid);
    placed.push_back({d, std::move(app)});
  }
  const auto infos = processes.read(pids);
  for (std::size_t i = 0; i < placed.size(); ++i) {
    auto& [d, app] = placed[i];
    ProcessSample p;
    p.pid = app.pid;
    p.name = infos[i].name.empty() ? app.process_name : infos[i].name;
    p.gpu_memory_bytes = app.used_memory_bytes;
    p.host_rss_bytes = infos[i].rss_bytes;
    p.per_process_exact = false;
    d->processes.push_back(std::move(p));
  }
  return snap;
}

SmiBackend::SmiBackend(ProbeExecutors executors, SmiOptions options)
    : executors_(std::move(executors)),
      options_(std::move(options)),
      strand_(boost::asio::make_strand(executors_.io)),
      processes_(options_.paths.procfs_root, options_.clock) {}

std::span<const std::string_view> SmiBackend::fields() const noexcept {
  return smi_field_list(field_list_.load());
}

RunOptions SmiBackend::run_options(std::vector<std::string> argv) const {
  RunOptions o;
  o.argv = std::move(argv);
  o.timeout = options_.timeout;
  return o;
}

bool SmiBackend::rejected_field(const RunResult& r, std::string* name) {
  constexpr std::string_view kNeedle = "is not a valid field";
  for (const std::string* text : {&r.output, &r.stderr_tail}) {
    const auto at = text->find(kNeedle);
    if (at == std::string::npos) continue;
    // 'Field "power.draw.instant" is not a valid field to query.'
    const std::string_view before(text->data(), at);
    const auto close = before.rfind('"');
    const auto open = close == std::string_view::npos || close == 0 ? std::string_view::npos
                                                                    : before.rfind('"', close - 1);
    name->clear();
    if (open != std::string_view::npos)
      *name = std::string(before.substr(open + 1, close - open - 1));
    return true;
  }
  return false;
}

void SmiBackend::finish(SampleHandler handler, boost::system::error_code ec, GpuSnapshot snap) {
  boost::asio::post(executors_.io, [h = std::move(handler), ec, s = std::move(snap)]() mutable {
    h(ec, std::move(s));
  });
}

void SmiBackend::run_gpu_query(
    std::function<void(boost::system::error_code, std::string, std::string)> done) {
  auto self = shared_from_this();
  async_run(strand_, run_options(smi_gpu_argv(options_.tool, fields())),
            boost::asio::bind_cancellation_slot(cancel_.slot(), [self, done = std::move(done)](
                                                                    boost::system::error_code ec,
                                                                    RunResult r) mutable {
              const auto& tool = self->options_.tool;
              if (ec == boost::asio::error::operation_aborted)
                return done(ec, {}, "nvidia-smi was cancelled");
              if (ec == errc::timeout)
                return done(ec, {},
                            "nvidia-smi --query-gpu did not finish within " +
                                std::to_string(self->options_.timeout.count()) +
                                " ms and was killed");
              if (ec)
                return done(make_error_code(errc::tool_failed), {},
                            "cannot run " + tool + ": " + ec.message());
              if (!r.success()) {
                // Each retry asks a strictly smaller list: at most three retries.
                std::string field;
                if (rejected_field(r, &field)) {
                  const auto from = self->field_list_.load();
                  if (const auto next = smi_next_field_list(from, field)) {
                    logger()->info("nvidia probe: {} rejects the query field '{}' ({}); asking {}",
                                   tool, field, first_line(r.output + r.stderr_tail),
                                   *next == SmiFieldList::basic ? "the basic field list"
                                                                : "power.draw instead");
                    self->field_list_ = *next;
                    return self->run_gpu_query(std::move(done));
                  }
                }
                return done(make_error_code(errc::tool_failed), {},
                            tool + " --query-gpu: " + describe(r));
              }
              done({}, std::move(r.output), {});
            }));
}

void SmiBackend::async_detect(std::function<void(Detection)> handler) {
  boost::asio::post(strand_, [self = shared_from_this(), h = std::move(handler)]() mutable {
    self->run_gpu_query([self, h = std::move(h)](boost::system::error_code ec,
                                                 const std::string& out, std::string why) mutable {
      Detection d;
      if (ec) {
        d.reason = std::move(why);
      } else {
        for (auto& dev : nvidia::smi_devices_from_csv(out, self->fields()))
          d.devices.push_back({dev.id, Vendor::nvidia, dev.index, dev.name, dev.pci_bus_id});
        d.available = !d.devices.empty();
        if (!d.available)
          d.reason = self->options_.tool + " lists no GPU ('" + first_line(out) + "')";
      }
      boost::asio::post(self->executors_.io,
                        [h = std::move(h), d = std::move(d)]() mutable { h(std::move(d)); });
    });
  });
}

void SmiBackend::async_sample(SampleHandler handler) {
  boost::asio::post(strand_, [self = shared_from_this(), h = std::move(handler)]() mutable {
    const auto t0 = steady_now_ns();  // the cost, on the real clock
    const auto at =
        std::chrono::duration_cast<std::chrono::nanoseconds>(
            (self->options_.clock ? self->options_.clock() : std::chrono::steady_clock::now())
                .time_since_epoch())
            .count();
    const auto wall = wall_now_ns();
    self->run_gpu_query([self, h = std::move(h), t0, at, wall](boost::system::error_code ec,
                                                               std::string gpu_out,
                                                               std::string why) mutable {
      if (ec) {
        GpuSnapshot s;
        s.probe = "nvidia";
        s.errors.push_back({ec == errc::timeout ? "timeout" : "tool_failed", std::move(why), {}});
        return self->finish(std::move(h), ec, std::move(s));
      }
      auto on_apps = [self, h = std::move(h), gpu = std::move(gpu_out), t0, at, wall](
                         boost::system::error_code ec2, RunResult r) mutable {
        if (ec2 == boost::asio::error::operation_aborted) {
          GpuSnapshot s;
          s.probe = "nvidia";
          s.errors.push_back({"cancelled", "nvidia-smi was cancelled", {}});
          return self->finish(std::move(h), ec2, std::move(s));
        }
        std::optional<std::string> apps;
        std::string apps_error;
        if (!ec2 && r.success()) {
          apps = std::move(r.output);
        } else {
          apps_error =
              "nvidia-smi --query-compute-apps: " +
              (ec2 ? ec2 == errc::timeout ? std::string("timed out and was killed") : ec2.message()
                   : describe(r));
        }
        boost::asio::post(self->executors_.work, [self, h = std::move(h), gpu = std::move(gpu),
                                                  apps = std::move(apps),
                                                  apps_error = std::move(apps_error), t0, at,
                                                  wall]() mutable {
          boost::system::error_code result;
          GpuSnapshot s;
          try {
            s = smi_snapshot(gpu, self->fields(), apps ? &*apps : nullptr, apps_error,
                             self->processes_);
          } catch (const std::exception& e) {
            s.errors.push_back({"parse_error", e.what(), {}});
          }
          s.probe = "nvidia";
          if (s.devices.empty()) {
            result = errc::parse_error;
            s.errors.push_back({"parse_error",
                                "nvidia-smi printed no usable GPU line: '" + first_line(gpu) + "'",
                                {}});
          }
          s.time_unix_ns = wall;
          s.monotonic_ns = at;
          s.sample_duration_ns = steady_now_ns() - t0;
          self->finish(std::move(h), result, std::move(s));
        });
      };
      async_run(self->strand_, self->run_options(smi_apps_argv(self->options_.tool)),
                boost::asio::bind_cancellation_slot(self->cancel_.slot(), std::move(on_apps)));
    });
  });
}

void SmiBackend::cancel() {
  boost::asio::post(strand_, [self = shared_from_this()] {
    self->cancel_.emit(boost::asio::cancellation_type::terminal);
  });
}

std::optional<std::vector<ProcessDeviceUsage>> SmiBackend::process_usage(
    std::int64_t pid, std::vector<SampleError>& errors) {
  std::vector<ProcessDeviceUsage> out;
  const auto field_list = fields();
  boost::system::error_code ec;
  auto r = run(run_options(smi_gpu_argv(options_.tool, field_list)), ec);
  if (ec || !r.success()) {
    errors.push_back(
        {"tool_failed", options_.tool + " --query-gpu: " + (ec ? ec.message() : describe(r)), {}});
    return std::nullopt;
  }
  auto devices = nvidia::smi_devices_from_csv(r.output, field_list, &errors);
  auto apps_run = run(run_options(smi_apps_argv(options_.tool)), ec);
  std::vector<nvidia::SmiComputeApp> apps;
  if (ec || !apps_run.success()) {
    errors.push_back(
        {"tool_failed",
         options_.tool + " --query-compute-apps: " + (ec ? ec.message() : describe(apps_run)),
         {}});
  } else {
    apps = nvidia::smi_compute_apps_from_csv(apps_run.output, kSmiAppFields, &errors);
  }
  for (auto& d : devices) {
    ProcessDeviceUsage u;
    u.device_id = d.id;
    u.index = d.index;
    u.name = d.name;
    u.source = Source::nvidia_smi;
    if (auto v = d.metrics[Metric::memory_used_bytes].get())
      u.device_memory_used_bytes = static_cast<std::uint64_t>(*v);
    if (auto v = d.metrics[Metric::memory_total_bytes].get())
      u.device_memory_total_bytes = static_cast<std::uint64_t>(*v);
    for (const auto& app : apps)
      if (app.pid == pid && runs_on(d, app, devices.size()))
        u.gpu_memory_bytes = app.used_memory_bytes;
    out.push_back(std::move(u));
  }
  return out;
}

}  // namespace gpustream::nvidia_detail
