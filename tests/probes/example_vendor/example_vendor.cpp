// The test-only example vendor: its probe and its row (example_vendor.hpp).
#include "example_vendor.hpp"

#include <memory>
#include <string>

#include "gpustream/blocking_probe.hpp"
#include "gpustream/probes/capture.hpp"
#include "gpustream/probes/readers.hpp"
#include "gpustream/probes/settings.hpp"
#include "toolkit/doctor_checks.hpp"

namespace gpustream::test {
namespace {

constexpr ProbeFlag kFlags[] = {
    {"--example-count-file", "count_file", "the example vendor's GPU count file"},
};

constexpr ProbeEnvironment kEnvironment[] = {
    {kExampleEnv, "1", "the example vendor's library reads it once, at its first call"},
};

/// The "example" section's one reader (the probe, doctor and capture use it).
std::string count_file(const Config& config) {
  const auto* section = settings::section(config, kExampleProbe, {"count_file"});
  return settings::string_at(section, kExampleProbe, "count_file")
      .value_or(readers::join_path(config.paths.sysfs_root, "example/gpus"));
}

class ExampleProbe final : public BlockingProbe {
 public:
  ExampleProbe(ProbeExecutors executors, std::string file)
      : BlockingProbe(std::move(executors)), file_(std::move(file)) {}
  std::string_view name() const noexcept override { return kExampleProbe; }
  ProbeKind kind() const noexcept override { return ProbeKind::gpu; }
  std::chrono::milliseconds min_interval() const noexcept override {
    return std::chrono::milliseconds{100};
  }
  void cancel() noexcept override {}

 private:
  Detection detect() override {
    Detection d;
    const auto n = readers::read_uint_file(file_);
    if (!n || *n == 0) {
      d.reason = "no example GPU: " + file_ + " has no count";
      return d;
    }
    d.available = true;
    for (std::uint64_t i = 0; i < *n && i < 8; ++i)
      d.devices.push_back({"example:" + std::to_string(i), Vendor::unknown, static_cast<int>(i),
                           "Example GPU", ""});
    return d;
  }
  GpuSnapshot sample() override {
    GpuSnapshot s;
    for (const auto& info : detect().devices) {
      DeviceSample d;
      d.id = info.id;
      d.vendor = info.vendor;
      d.index = info.index;
      d.name = info.name;
      d.metrics.set(Metric::utilization_percent, 42.0, Source::sysfs);
      d.metrics.fill_absent(Absence::unsupported);  // it reads nothing else
      d.processes_absent = Absence::unsupported;    // nor processes
      s.devices.push_back(std::move(d));
    }
    return s;
  }

  std::string file_;
};

ProbePtr make_example_probe_from_config(const Config& config, ProbeExecutors executors) {
  return std::make_shared<ExampleProbe>(std::move(executors), count_file(config));
}

void read_settings(const Config& config) { (void)count_file(config); }

void check_example(const doctor::CheckContext& c) {
  const auto file = count_file(c.options.config());
  if (readers::read_uint_file(file))
    c.add(kExampleProbe, "count_file", doctor::Status::ok, file + " is readable");
  else
    c.add(kExampleProbe, "count_file", doctor::Status::blocker, file + " cannot be read",
          "give --example-count-file PATH");
}

void capture_sources(capture::Sources& s, const Config& config) {
  s.files.push_back({"example_count", count_file(config), "share/example-gpus"});
  s.tools.push_back({"example-tool", "example.tool", {"--list"}});
  s.replay_flags.push_back({"--example-count-file", "share/example-gpus"});
  s.pci_vendors.emplace_back(0xe1e1, "example");
}

}  // namespace

const ProbeRow& example_probe_row() noexcept {
  static constexpr ProbeRow kRow{
      kExampleProbe,    "a test-only example vendor (tests/probes/example_vendor/)",
      kExampleProbe,    ProbeKind::gpu,
      kFlags,           &make_example_probe_from_config,
      &read_settings,   &check_example,
      &capture_sources, kEnvironment};
  return kRow;
}

}  // namespace gpustream::test
