// Built by run_pkgconfig_test.cmake with only pkg-config's flags: one simulated GPU through the
// embedding header and the registry, and the version from gpustream/version.hpp.
#include <cstring>
#include <iostream>

#include <gpustream/probes/registry.hpp>
#include <gpustream/telemetry.hpp>
#include <gpustream/version.hpp>

int main() {
  if (std::strcmp(gpustream::kVersionString, EXPECTED_VERSION) != 0) {
    std::cerr << "pkg-config consumer: version.hpp says " << gpustream::kVersionString
              << ", pkg-config " << EXPECTED_VERSION << "\n";
    return 1;
  }
  gpustream::Config config;
  config.probes = {"simulated"};
  config.simulate = 1;
  config.interval = std::chrono::milliseconds{50};
  gpustream::Telemetry telemetry(config, gpustream::probe_factory());
  telemetry.start();
  const auto snaps = telemetry.wait_for_first_samples(std::chrono::seconds{10});
  telemetry.stop();
  if (snaps.size() != 1 || snaps[0]->devices.size() != 1) {
    std::cerr << "pkg-config consumer: expected one snapshot with one device\n";
    return 1;
  }
  std::cout << "pkg-config consumer: ok version=" << GPUSTREAM_VERSION_STRING
            << " devices=" << snaps[0]->devices.size() << "\n";
  return 0;
}
