// Devices and snapshots shared by the dcgm-exporter exposition tests (prometheus_dcgm_test.cpp,
// prometheus_dcgm_writer_test.cpp).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "gpustream/model.hpp"

namespace gpustream::transport::test {

/// A 1g.10gb MIG instance of `parent` (GPU instance 9, compute instance 0; id "MIG-1111",
/// index 7) that uses one GiB of memory; `parent` is marked partitioned.
inline DeviceSample mig_1g_10gb_of(DeviceSample& parent) {
  parent.partitioned = true;
  DeviceSample mig;
  mig.id = "MIG-1111";
  mig.vendor = Vendor::nvidia;
  mig.index = 7;
  mig.name = "NVIDIA H100 80GB HBM3 MIG 1g.10gb";
  mig.parent = parent.id;
  mig.mig = MigIdentity{9, 0, "1g.10gb"};
  mig.metrics.set(Metric::memory_used_bytes, 1024.0 * 1024.0 * 1024.0, Source::nvml);
  return mig;
}

/// A snapshot of `devices` from `node` (this machine: ""), its probe named after the first
/// device's vendor ("nvidia" when there is none).
inline std::shared_ptr<GpuSnapshot> snapshot_of(std::vector<DeviceSample> devices,
                                                std::string node = {}) {
  auto s = std::make_shared<GpuSnapshot>();
  s->probe = devices.empty() ? "nvidia" : std::string(to_string(devices[0].vendor));
  s->node = std::move(node);
  s->devices = std::move(devices);
  return s;
}

}  // namespace gpustream::transport::test
