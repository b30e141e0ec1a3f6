// nvml_record.hpp — the NVIDIA probe's part of `gpustream capture`: one pass of the NVML calls
// the probe makes, through the probe's own function table (nvidia/nvml_api.hpp), written as a
// scenario of the fake libnvidia-ml.so.1 (tests/fakes/nvml/fake_nvml_scenario.hpp has the
// format).
//
// Thread safety: record_nvml initializes and shuts NVML down itself (call it while no NVML session
// of this process is open). Cancellation: none; a few dozen library calls.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gpustream::capture {

/// What record_nvml saw.
struct NvmlRecording {
  bool loaded = false;         // the library could be loaded and has the required functions
  bool initialized = false;    // nvmlInit succeeded
  std::string scenario;        // the fake libnvidia-ml.so.1 scenario (key=value lines)
  std::string driver_version;  // "" when unknown
  int devices = 0;
  std::vector<std::int64_t> pids;  // every pid of the process lists (their /proc is captured)
  std::vector<std::string> notes;  // what failed and why, one line each
};

/// Loads `library`, calls every NVML function the NVIDIA probe calls once per device (the same
/// versions of them, in the same way), and writes what each returned — values and return codes
/// — as a scenario of the fake NVML. A function the library does not export is recorded as
/// NVML_ERROR_NOT_SUPPORTED (the probe reports both the same way: absent `unsupported`). Never
/// throws for NVML failures: they are in the scenario (init_fail=, fail.<function>=) and notes.
NvmlRecording record_nvml(const std::string& library);

}  // namespace gpustream::capture
