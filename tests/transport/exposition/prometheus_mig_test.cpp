// The Prometheus exposition of MIG instances (their own `device`, a `parent` label, the MIG
// identity on gpustream_gpu_info) and of the interconnect/health metrics (PCIe, NVLink, ECC
// counters with their labels, retired pages, remapped rows), checked by `promtool check metrics`.
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <string>

#include <gtest/gtest.h>

#include "gpustream/transport/prometheus.hpp"
#include "support/temp_tree.hpp"

namespace gpustream::transport::test {
namespace {

constexpr const char* kPromtool = "/usr/bin/promtool";

/// `promtool check metrics` on `text`: its exit code and output.
std::pair<int, std::string> promtool(const std::string& text) {
  gpustream::test::TempTree tmp;
  const auto file = tmp.file("metrics.txt", text);
  const std::string cmd = std::string(kPromtool) + " check metrics < '" + file + "' 2>&1";
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return {-1, "popen failed"};
  std::array<char, 4096> buf{};
  for (std::size_t n = 0; (n = std::fread(buf.data(), 1, buf.size(), p)) > 0;)
    out.append(buf.data(), n);
  const int status = ::pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

SnapshotPtr mig_snapshot() {
  auto s = std::make_shared<GpuSnapshot>();
  s->probe = "nvidia";
  DeviceSample gpu;
  gpu.id = "GPU-a";
  gpu.vendor = Vendor::nvidia;
  gpu.name = "A100";
  gpu.pci_bus_id = "0000:07:00.0";
  gpu.partitioned = true;
  auto& m = gpu.metrics;
  m.set(Metric::utilization_percent, 50, Source::nvml);
  m.set(Metric::pcie_rx_bytes_per_second, 2048, Source::nvml);
  m.set(Metric::pcie_tx_bytes_per_second, 1024, Source::nvml);
  m.set(Metric::pcie_link_generation, 3, Source::nvml);
  m.set(Metric::pcie_link_generation_max, 4, Source::nvml);
  m.set(Metric::pcie_link_width, 8, Source::nvml);
  m.set(Metric::pcie_link_width_max, 16, Source::nvml);
  m.set(Metric::nvlink_rx_bytes_per_second, 4096, Source::nvml);
  m.set(Metric::ecc_corrected_volatile, 3, Source::nvml);
  m.set(Metric::ecc_uncorrected_volatile, 1, Source::nvml);
  m.set(Metric::ecc_corrected_aggregate, 120, Source::nvml);
  m.set(Metric::ecc_uncorrected_aggregate, 2, Source::nvml);
  m.set(Metric::remapped_rows_corrected, 6, Source::nvml);
  m.set(Metric::remapped_rows_uncorrected, 2, Source::nvml);
  m.set(Metric::remapped_rows_pending, 0, Source::nvml);
  m.set(Metric::remapped_rows_failed, 1, Source::nvml);
  m.fill_absent(Absence::unsupported, Source::nvml);
  DeviceSample inst;
  inst.id = "MIG-b";
  inst.vendor = Vendor::nvidia;
  inst.name = "A100 MIG 1g.5gb";
  inst.pci_bus_id = gpu.pci_bus_id;
  inst.parent = gpu.id;
  inst.mig = MigIdentity{5, 2, "1g.5gb"};
  inst.metrics.set(Metric::memory_used_bytes, 1024, Source::nvml);
  inst.metrics.set(Metric::memory_total_bytes, 4096, Source::nvml);
  inst.metrics.fill_absent(Absence::unsupported, Source::nvml);
  s->devices = {gpu, inst};
  return s;
}

bool has(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos;
}

TEST(TransportPrometheusMig, InstancesAreDevicesWithAParentLabel) {
  const auto text = render_prometheus({mig_snapshot()}, {}, nullptr);
  const std::string inst =
      R"(device="MIG-b",vendor="nvidia",probe="nvidia",name="A100 MIG 1g.5gb",)"
      R"(parent="GPU-a")";
  EXPECT_TRUE(has(text, "gpustream_gpu_memory_used_bytes{" + inst + "} 1024")) << text;
  EXPECT_TRUE(has(text, "gpustream_gpu_info{" + inst +
                            R"(,pci_bus_id="0000:07:00.0",index="0",mig_profile="1g.5gb",)"
                            R"(gpu_instance_id="5",compute_instance_id="2"} 1)"))
      << text;
  EXPECT_TRUE(has(text, R"(gpustream_gpu_info{device="GPU-a",vendor="nvidia",probe="nvidia",)"
                        R"(name="A100",pci_bus_id="0000:07:00.0",index="0",mig_mode="enabled"} 1)"))
      << text;
  // What an instance does not have is not written (never 0, never the parent's).
  EXPECT_EQ(text.find("gpustream_gpu_utilization_ratio{" + inst), std::string::npos) << text;
}

TEST(TransportPrometheusMig, InterconnectAndHealthSeries) {
  const auto text = render_prometheus({mig_snapshot()}, {}, nullptr);
  const std::string l = R"(device="GPU-a",vendor="nvidia",probe="nvidia",name="A100")";
  EXPECT_TRUE(has(text, "gpustream_gpu_pcie_rx_bytes_per_second{" + l + "} 2048")) << text;
  EXPECT_TRUE(has(text, "gpustream_gpu_pcie_tx_bytes_per_second{" + l + "} 1024"));
  EXPECT_TRUE(has(text, "gpustream_gpu_pcie_link_generation{" + l + "} 3"));
  EXPECT_TRUE(has(text, "gpustream_gpu_pcie_link_generation_max{" + l + "} 4"));
  EXPECT_TRUE(has(text, "gpustream_gpu_pcie_link_width_lanes{" + l + "} 8"));
  EXPECT_TRUE(has(text, "gpustream_gpu_pcie_link_width_max_lanes{" + l + "} 16"));
  EXPECT_TRUE(has(text, "gpustream_gpu_nvlink_rx_bytes_per_second{" + l + "} 4096"));
  EXPECT_EQ(text.find("gpustream_gpu_nvlink_tx_bytes_per_second{"), std::string::npos);
  EXPECT_TRUE(has(
      text, "gpustream_gpu_ecc_errors_total{" + l + R"(,error="corrected",counter="volatile"} 3)"));
  EXPECT_TRUE(has(text, "gpustream_gpu_ecc_errors_total{" + l +
                            R"(,error="uncorrected",counter="volatile"} 1)"));
  EXPECT_TRUE(has(text, "gpustream_gpu_ecc_errors_total{" + l +
                            R"(,error="corrected",counter="aggregate"} 120)"));
  EXPECT_TRUE(has(text, "gpustream_gpu_ecc_errors_total{" + l +
                            R"(,error="uncorrected",counter="aggregate"} 2)"));
  EXPECT_TRUE(has(text, "gpustream_gpu_remapped_rows{" + l + R"(,cause="corrected"} 6)"));
  EXPECT_TRUE(has(text, "gpustream_gpu_remapped_rows{" + l + R"(,cause="uncorrected"} 2)"));
  EXPECT_TRUE(has(text, "gpustream_gpu_remapped_rows_pending{" + l + "} 0"));
  EXPECT_TRUE(has(text, "gpustream_gpu_remapped_rows_failed{" + l + "} 1"));
  EXPECT_EQ(text.find("gpustream_gpu_retired_pages"), std::string::npos);  // absent: not written
  // One HELP/TYPE per family, though four metrics share the ECC one.
  std::size_t types = 0;
  for (auto at = text.find("# TYPE gpustream_gpu_ecc_errors_total counter");
       at != std::string::npos; at = text.find("# TYPE gpustream_gpu_ecc_errors_total", at + 1))
    ++types;
  EXPECT_EQ(types, 1u);
}

TEST(TransportPrometheusMig, PromtoolAcceptsIt) {
  ASSERT_EQ(::access(kPromtool, X_OK), 0) << kPromtool << " is missing (Debian 'prometheus')";
  const auto text = render_prometheus({mig_snapshot()}, {}, nullptr);
  const auto [rc, out] = promtool(text);
  EXPECT_EQ(rc, 0) << out << "\non:\n" << text;
  EXPECT_EQ(out, "") << text;
}

}  // namespace
}  // namespace gpustream::transport::test
