// The "amd" registry row: chooses between the AMD SMI library, the sysfs/fdinfo path and the CLIs.
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>

#include <boost/json.hpp>

#include "gpustream/dynamic_library.hpp"
#include "gpustream/log.hpp"
#include "gpustream/probes/amd_probe.hpp"
#include "gpustream/probes/settings.hpp"
#include "gpustream/probes/source_note.hpp"

namespace gpustream {
namespace {

/// The chosen probe, unchanged, and the note saying why it was chosen.
class AmdSourceProbe final : public Probe, public SourceNote {
 public:
  AmdSourceProbe(ProbePtr inner, std::string note)
      : inner_(std::move(inner)), note_(std::move(note)) {}
  std::string_view name() const noexcept override { return inner_->name(); }
  ProbeKind kind() const noexcept override { return inner_->kind(); }
  std::chrono::milliseconds min_interval() const noexcept override {
    return inner_->min_interval();
  }
  void async_detect(DetectHandler handler) override { inner_->async_detect(std::move(handler)); }
  void async_sample(SampleHandler handler) override { inner_->async_sample(std::move(handler)); }
  void cancel() noexcept override { inner_->cancel(); }
  std::string source_note() const override { return note_; }

 private:
  ProbePtr inner_;
  std::string note_;
};

/// Logs each distinct choice once per process.
void log_choice(const std::string& note) {
  static std::mutex mu;
  static std::set<std::string> seen;
  std::lock_guard lock(mu);
  if (seen.insert(note).second) logger()->info("amd probe: {}", note);
}

}  // namespace

AmdSettings amd_settings(const Config& config) {
  const auto* section =
      settings::section(config, "amd",
                        {"source", "library", "amd_smi", "rocm_smi", "amdgpu_ids",
                         "process_freshness_ms", "process_fd_count_ms", "process_sweep_ms"});
  AmdSettings s;
  s.source = settings::string_at(section, "amd", "source").value_or("auto");
  // Checked whichever source is chosen: a bad value is an error even where it does not apply.
  s.tracker = settings::tracker_periods_at(section, "amd");
  s.library = settings::string_at(section, "amd", "library");
  s.amd_smi = settings::string_at(section, "amd", "amd_smi");
  s.rocm_smi = settings::string_at(section, "amd", "rocm_smi");
  s.amdgpu_ids = settings::string_at(section, "amd", "amdgpu_ids", settings::Empty::allowed);
  if (s.source != "auto" && s.source != "library" && s.source != "sysfs" && s.source != "cli" &&
      s.source != "amd-smi" && s.source != "rocm-smi")
    throw std::invalid_argument("unknown amd source '" + s.source +
                                "' (use auto, library, sysfs, cli, amd-smi or rocm-smi)");
  return s;
}

ProbePtr make_amd_probe_from_config(const Config& config, ProbeExecutors executors) {
  const auto settings = amd_settings(config);
  auto source = settings.source;
  const auto& tracker = settings.tracker;
  const auto& library = settings.library;
  const auto& amd_smi = settings.amd_smi;
  const auto& rocm_smi = settings.rocm_smi;
  const auto& amdgpu_ids = settings.amdgpu_ids;
  if (source == "cli") source = "amd-smi";

  const auto library_probe = [&] {
    AmdSmiLibProbeOptions o;
    if (library) o.library = *library;
    o.library_session = config.library_session;
    o.procfs_root = config.paths.procfs_root;
    return make_amd_smi_lib_probe(executors, std::move(o));
  };

  std::string note;
  if (source == "auto") {
    // The library when it loads and finds GPUs, else sysfs, else the CLI.
    std::string passed_over;
    try {
      auto probe = library_probe();
      auto d = probe->detect_now();
      if (d.available) {
        note = "source: library (" + probe->describe() + ")";
        log_choice(note);
        return std::make_shared<AmdSourceProbe>(std::move(probe), note);
      }
      passed_over = "library: " + d.reason;
    } catch (const DynamicLibraryError& e) {
      passed_over = "library: " + e.message();
    } catch (const std::exception& e) {
      passed_over = std::string("library: ") + e.what();
    }
    if (amd_sysfs_available(config.paths)) {
      source = "sysfs";
    } else {
      passed_over +=
          "; sysfs: no readable amdgpu card under " + config.paths.sysfs_root + "/class/drm";
      source = "amd-smi";
    }
    note = "source: " + (source == "sysfs" ? std::string("sysfs") : "cli (amd-smi)") +
           " (auto; passed over " + passed_over + ")";
    log_choice(note);
  } else {
    note = "source: " + source + " (configured)";
  }

  ProbePtr chosen;
  if (source == "library") {
    chosen = library_probe();
  } else if (source == "sysfs") {
    AmdSysfsProbeOptions options;
    options.paths = config.paths;
    if (amdgpu_ids) options.amdgpu_ids = *amdgpu_ids;  // "": no lookup
    tracker.apply(options.process_freshness, options.process_fd_count_period,
                  options.process_sweep);
    chosen = make_amd_sysfs_probe(std::move(executors), std::move(options));
  } else {
    AmdProbeOptions options;
    options.tool = source == "amd-smi" ? AmdTool::amd_smi : AmdTool::rocm_smi;
    options.procfs_root = config.paths.procfs_root;
    options.path = (source == "amd-smi" ? amd_smi : rocm_smi).value_or("");
    chosen = make_amd_cli_probe(std::move(executors), std::move(options));
  }
  return std::make_shared<AmdSourceProbe>(std::move(chosen), note);
}

}  // namespace gpustream
