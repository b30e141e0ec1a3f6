// Links gpustream::probes alone (find_package(gpustream COMPONENTS probes)): one simulated GPU.
#include <chrono>
#include <iostream>

#include <gpustream/probes/registry.hpp>
#include <gpustream/telemetry.hpp>

int main() {
  gpustream::Config config;
  config.probes = {"simulated"};
  config.simulate = 1;
  gpustream::Telemetry telemetry(config, gpustream::probe_factory());
  telemetry.start();
  const auto snaps = telemetry.wait_for_first_samples(std::chrono::seconds{10});
  telemetry.stop();
  if (snaps.size() != 1 || snaps[0]->devices.size() != 1) {
    std::cerr << "probes_only: expected one snapshot with one device\n";
    return 1;
  }
  std::cout << "probes_only: ok devices=" << snaps[0]->devices.size() << "\n";
  return 0;
}
