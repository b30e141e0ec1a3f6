// Uses the installed SDK: one simulated GPU, wait for its first snapshot, print what it saw.
#include <cstring>
#include <iostream>

#include <gpustream/logging.hpp>

#include <gpustream/json.hpp>
#include <gpustream/probes/registry.hpp>
#include <gpustream/telemetry.hpp>
#include <gpustream/version.hpp>

int run_own_asio();  // own_asio.cpp: the consumer's own Asio code

int main() {
  if (std::strcmp(gpustream::kVersionString, EXPECTED_VERSION) != 0) {
    std::cerr << "consumer: version.hpp says " << gpustream::kVersionString
              << ", the package config " << EXPECTED_VERSION << "\n";
    return 1;
  }
  if (run_own_asio() != 1) {
    std::cerr << "consumer: its own io_service did not run its handler\n";
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
    std::cerr << "consumer: expected one snapshot with one device\n";
    return 1;
  }
  const auto json = gpustream::to_json_string(*snaps[0]);
  std::cout << "consumer: ok version=" << GPUSTREAM_VERSION_STRING
            << " devices=" << snaps[0]->devices.size() << " bytes=" << json.size() << "\n";
  return 0;
}
