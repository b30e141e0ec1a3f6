// gpustream through add_subdirectory: the embedding header, a Telemetry with a probe of the
// program's own (no registry: the parent links gpustream::sdk only), and the version.
#include <cstring>
#include <iostream>

#include <gpustream/blocking_probe.hpp>
#include <gpustream/telemetry.hpp>
#include <gpustream/version.hpp>

namespace {

class OneGpu final : public gpustream::BlockingProbe {
 public:
  using BlockingProbe::BlockingProbe;
  std::string_view name() const noexcept override { return "mine"; }

 protected:
  gpustream::Detection detect() override {
    gpustream::Detection d;
    d.available = true;
    return d;
  }
  gpustream::GpuSnapshot sample() override {
    gpustream::GpuSnapshot s;
    s.devices.emplace_back().id = "mine-0";
    return s;
  }
};

}  // namespace

int main() {
  if (std::strcmp(gpustream::kVersionString, EXPECTED_VERSION) != 0) {
    std::cerr << "parent: version.hpp says " << gpustream::kVersionString << ", project() "
              << EXPECTED_VERSION << "\n";
    return 1;
  }
  gpustream::Config config;
  config.probes = {"mine"};
  config.interval = std::chrono::milliseconds{50};
  gpustream::Telemetry telemetry(
      config,
      [](const gpustream::Config&, const gpustream::ProbeExecutors& ex, std::vector<std::string>&) {
        return std::vector<gpustream::ProbePtr>{std::make_shared<OneGpu>(ex)};
      });
  telemetry.start();
  const auto snaps = telemetry.wait_for_first_samples(std::chrono::seconds{10});
  telemetry.stop();
  if (snaps.size() != 1 || snaps[0]->devices.size() != 1) {
    std::cerr << "parent: expected one snapshot with one device\n";
    return 1;
  }
  std::cout << "parent consumer: ok version=" << GPUSTREAM_VERSION_STRING << "\n";
  return 0;
}
