// approx_bytes: the estimate the channel's byte bounds count with, against what a copy of the
// snapshot really allocates. In a plain build this binary's operator new counts (on the thread
// that asks); under AddressSanitizer, whose allocator owns operator new, its own count of
// allocated bytes does.
#include <cstdlib>
#include <new>

#include <gtest/gtest.h>

#include "gpustream/model.hpp"

#if defined(__SANITIZE_ADDRESS__)
// The sanitizer runtime's count of bytes allocated and not yet freed (declared here: GCC does not
// install <sanitizer/allocator_interface.h>).
extern "C" std::size_t __sanitizer_get_current_allocated_bytes();
#define GPUSTREAM_COUNT_WITH_ASAN 1
#endif

#if !defined(GPUSTREAM_COUNT_WITH_ASAN)
namespace {

thread_local bool t_counting = false;
thread_local std::size_t t_allocated = 0;

void* counted_alloc(std::size_t n) {
  if (t_counting) t_allocated += n;
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}

}  // namespace

// Replaceable allocation functions (the aligned and nothrow forms keep their defaults, which
// libstdc++ builds on these or on aligned_alloc/free).
void* operator new(std::size_t n) { return counted_alloc(n); }
void* operator new[](std::size_t n) { return counted_alloc(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
#endif

namespace {
/// Heap bytes `f` allocates (and does not free).
template <typename F>
std::size_t heap_during(F&& f) {
#if defined(GPUSTREAM_COUNT_WITH_ASAN)
  const std::size_t before = __sanitizer_get_current_allocated_bytes();
  f();
  return __sanitizer_get_current_allocated_bytes() - before;
#else
  t_allocated = 0;
  t_counting = true;
  f();
  t_counting = false;
  return t_allocated;
#endif
}
}  // namespace

namespace gpustream {
namespace {

/// Heap bytes a copy of `s` allocates (into an empty `out`). The processes' placement blocks
/// (container, slurm, pod) are shared with `s`, not allocated.
std::size_t allocated_by_copy(const GpuSnapshot& s, GpuSnapshot& out) {
  return heap_during([&] { out = s; });
}

/// Heap bytes a copy of `s` allocates when its placement blocks are copied too (into an empty
/// `out`): all the heap `s` holds, as if nothing shared its blocks.
std::size_t allocated_by_deep_copy(const GpuSnapshot& s, GpuSnapshot& out) {
  return heap_during([&] {
    out = s;
    for (auto& d : out.devices)
      for (auto& p : d.processes) {  // a write through a shared block copies it first
        if (p.container) (void)p.container->id;
        if (p.slurm) (void)p.slurm->job_id;
        if (p.pod) (void)p.pod->name;
      }
  });
}

std::string long_string(std::size_t n, char c) { return std::string(n, c); }

GpuSnapshot big_snapshot(int devices, int processes) {
  GpuSnapshot s;
  s.probe = "nvidia-with-a-probe-name-longer-than-the-small-buffer";
  s.node = "a-node-name-longer-than-the-small-string-buffer";
  for (int d = 0; d < devices; ++d) {
    DeviceSample dev;
    dev.id = "GPU-" + long_string(36, 'a' + d % 26);
    dev.name = "NVIDIA H100 80GB HBM3 with a long name";
    dev.pci_bus_id = "00000000:17:00.0";
    dev.metrics.set(Metric::utilization_percent, 42.0, Source::nvml);
    dev.throttle_reasons = {"sw_power_cap_with_a_long_reason", "hw_slowdown"};
    dev.engines.push_back(EngineSample{"render-engine-with-a-long-name", Reading{}});
    dev.attributes["metrics_source"] = "nvml-and-a-value-longer-than-sso";
    dev.attributes["uuid"] = dev.id;
    dev.parent = "GPU-" + long_string(36, 'p');
    dev.mig = MigIdentity{1, 0, "a-profile-name-longer-than-sso-1g.5gb"};
    dev.pods = {KubernetesPod{long_string(253, 'p'), long_string(63, 'n'), long_string(63, 'c')}};
    for (int p = 0; p < processes; ++p) {
      ProcessSample ps;
      ps.pid = 1000 + p;
      ps.name = "python3-training-worker-" + std::to_string(p);
      ps.gpu_memory_bytes = 1u << 30;
      ps.container = ProcessContainer{"containerd", long_string(64, 'f'),
                                      "6f1c2a3b-0000-4c6a-9d9e-1234567890ab", "burstable"};
      ps.slurm = SlurmJob{.job_id = "4294967295",
                          .step = "interactive-step-name-longer-than-sso",
                          .uid = 1000u,
                          .user = "a-user-name-longer-than-the-small-buffer",
                          .array_job_id = "array-job-id-longer-than-the-buffer",
                          .array_task_id = "array-task-id-longer-than-the-buffer"};
      ps.pod = KubernetesPod{long_string(253, 'p'), long_string(63, 'n'), long_string(63, 'c')};
      ps.engines.push_back(EngineSample{"compute-engine-with-a-long-name", Reading{}});
      dev.processes.push_back(std::move(ps));
    }
    s.devices.push_back(std::move(dev));
  }
  HostSample host;
  host.processes.push_back(HostProcess{1, "a-host-process-with-a-long-name", 123});
  host.metrics["system_power_watts_and_a_long_key"] = 100.0;
  s.host = std::move(host);
  s.errors.push_back(SampleError{"tool_failed", long_string(200, 'x'), "GPU-0"});
  return s;
}

TEST(ApproxBytes, CoversWhatACopyAllocatesWithinAQuarter) {
  for (auto [devices, processes] : {std::pair{1, 0}, std::pair{8, 10}, std::pair{8, 500}}) {
    const GpuSnapshot s = big_snapshot(devices, processes);
    GpuSnapshot copy;
    const std::size_t heap = allocated_by_deep_copy(s, copy);
    ASSERT_EQ(copy, s);
    const std::size_t estimate = approx_bytes(copy);  // a copy's buffers are exactly sized
    const std::size_t real = heap + sizeof(GpuSnapshot);
    EXPECT_GE(estimate, real) << devices << " devices, " << processes << " processes";
    EXPECT_LE(estimate, real + real / 4) << devices << " devices, " << processes << " processes";
  }
}

TEST(ApproxBytes, CountsSharedPlacementsWholeInEverySnapshotThatHoldsThem) {
  // A copy shares the processes' placement blocks (far less heap), yet each copy's estimate
  // still counts them: a byte bound that counts snapshots with approx_bytes never undercounts.
  const GpuSnapshot s = big_snapshot(8, 10);
  GpuSnapshot shared;
  GpuSnapshot deep;
  const std::size_t shared_heap = allocated_by_copy(s, shared);
  const std::size_t deep_heap = allocated_by_deep_copy(s, deep);
  EXPECT_LT(shared_heap + 80 * (253 + 63 + 63), deep_heap) << "a copy shares the pod strings";
  EXPECT_EQ(approx_bytes(shared), approx_bytes(deep));
  EXPECT_GE(approx_bytes(shared), deep_heap + sizeof(GpuSnapshot));
}

TEST(ApproxBytes, GrowsWithProcessesAndCountsSpareCapacity) {
  const auto small = approx_bytes(big_snapshot(8, 0));
  const auto large = approx_bytes(big_snapshot(8, 1000));
  // 8,000 processes, each at least its object and its long strings.
  EXPECT_GT(large - small, 8000 * (sizeof(ProcessSample) + 64));

  GpuSnapshot s = big_snapshot(1, 0);
  const auto before = approx_bytes(s);
  s.devices.reserve(s.devices.capacity() + 1000);  // memory held, though unused
  EXPECT_GE(approx_bytes(s), before + 1000 * sizeof(DeviceSample));
}

TEST(ApproxBytes, AnEmptySnapshotIsItsObject) {
  EXPECT_EQ(approx_bytes(GpuSnapshot{}), sizeof(GpuSnapshot));
}

}  // namespace
}  // namespace gpustream
