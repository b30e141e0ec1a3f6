// nvidia_fakes.hpp — drives the fake libnvidia-ml.so.1 and the fake nvidia-smi from a test.
//
//   FakeNvml nvml;                       // loads the fake (kept loaded), resets its counters
//   nvml.scenario("devices=2\n...");     // written to a file named by the environment variable
//   nvml.count("nvmlInit_v2");           // the fake's counters
//
//   FakeSmi smi;                         // a folder the fake nvidia-smi reads
//   smi.file("query-gpu.csv", "...");    // what it prints for --query-gpu
//
//   proc_entry(tree, 4242, "python3", 2048);  // <tree>/4242/comm and statm (RSS 2048 kB)
//   find_error(snapshot, "gpu_lost");         // the snapshot's first error with that code
//
// Tests are single-purpose processes: setting the environment here is fine as long as no probe
// operation is in flight. A driven steady clock (DrivenClock) moves only when told.
#pragma once

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpustream/dynamic_library.hpp"
#include "gpustream/model.hpp"
#include "gpustream_fake_nvidia_smi_paths.hpp"
#include "gpustream_fake_nvml_paths.hpp"
#include "support/temp_tree.hpp"

namespace gpustream::test {

class FakeNvml {
 public:
  explicit FakeNvml(const char* library = fakes::kFakeNvml)
      : lib_(DynamicLibrary::load(library)), path_(library) {
    count_ = lib_.required<int(const char*)>("gpustreamFakeNvmlCount");
    reset_ = lib_.required<void()>("gpustreamFakeNvmlReset");
    last_seen_ = lib_.required<unsigned long long(unsigned)>("gpustreamFakeNvmlLastSeen");
    block_ = lib_.required<void(int)>("gpustreamFakeNvmlBlock");
    reload_ = lib_.required<int()>("gpustreamFakeNvmlReload");
    reset_();
    scenario("devices=1\n");
  }
  ~FakeNvml() {
    block_(0);
    ::unsetenv(fakes::kFakeNvmlScenarioEnv);
  }
  FakeNvml(const FakeNvml&) = delete;
  FakeNvml& operator=(const FakeNvml&) = delete;

  /// Writes the scenario file (read by the fake at its next nvmlInit).
  void scenario(const std::string& text) {
    const auto file = tree_.file("scenario.txt", text);
    ::setenv(fakes::kFakeNvmlScenarioEnv, file.c_str(), 1);
  }
  /// Writes the scenario and makes the fake apply it now, without a new init.
  void reload(const std::string& text) {
    scenario(text);
    if (reload_() != 0) throw std::runtime_error("fake NVML rejected the scenario");
  }
  int count(const char* what) const { return count_(what); }
  unsigned long long last_seen(unsigned device) const { return last_seen_(device); }
  void block(bool on) { block_(on ? 1 : 0); }
  const std::string& path() const { return path_; }

 private:
  TempTree tree_;
  DynamicLibrary lib_;
  std::string path_;
  int (*count_)(const char*) = nullptr;
  void (*reset_)() = nullptr;
  unsigned long long (*last_seen_)(unsigned) = nullptr;
  void (*block_)(int) = nullptr;
  int (*reload_)() = nullptr;
};

class FakeSmi {
 public:
  FakeSmi() { ::setenv(fakes::kFakeNvidiaSmiDirEnv, tree_.path().c_str(), 1); }
  ~FakeSmi() { ::unsetenv(fakes::kFakeNvidiaSmiDirEnv); }
  FakeSmi(const FakeSmi&) = delete;
  FakeSmi& operator=(const FakeSmi&) = delete;

  void file(const std::string& name, const std::string& text) { tree_.file(name, text); }
  void remove(const std::string& name) { tree_.remove(name); }
  /// The argument lines of every run so far.
  std::vector<std::string> calls() const {
    std::vector<std::string> out;
    std::ifstream in(tree_.path("calls.log"));
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
  }
  const char* tool() const { return fakes::kFakeNvidiaSmi; }

 private:
  TempTree tree_;
};

/// The snapshot's first error with `code`, or null.
inline const SampleError* find_error(const GpuSnapshot& s, const std::string& code) {
  for (const auto& e : s.errors)
    if (e.code == code) return &e;
  return nullptr;
}

/// What the probe reads of a process in a procfs tree: <pid>/comm (its name) and <pid>/statm
/// (sizes in pages; the second is the resident set).
inline void proc_entry(TempTree& tree, std::int64_t pid, const std::string& name,
                       std::uint64_t rss_kb) {
  const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  const auto dir = std::to_string(pid) + "/";
  tree.file(dir + "comm", name + "\n");
  tree.file(dir + "statm", "90000 " + std::to_string(rss_kb * 1024 / page) + " 300 20 0 8000 0\n");
}

/// A steady clock that moves only when told (for retry and min-interval logic).
class DrivenClock {
 public:
  std::function<std::chrono::steady_clock::time_point()> function() {
    return [this] { return std::chrono::steady_clock::time_point{} + offset(); };
  }
  void advance(std::chrono::milliseconds d) { ms_ += d.count(); }

 private:
  std::chrono::milliseconds offset() const {
    return std::chrono::hours(1) + std::chrono::milliseconds(ms_.load());
  }
  std::atomic<long long> ms_{0};
};

}  // namespace gpustream::test
