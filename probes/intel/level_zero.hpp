// level_zero.hpp — the Level Zero Sysman augment of the Intel probe (private).
//
// Opens the loader with dlopen and resolves every function it may call up front (a missing
// optional symbol leaves its metric to sysfs; a missing enumeration symbol makes the augment
// unusable; nothing is ever called unresolved). Initialization goes through a LibrarySession:
// zesInit(0) where the loader exports it, else zeInit(0) (on such loaders Sysman works only when
// the program had ZES_ENABLE_SYSMAN=1 in its environment before that call; the SDK never sets
// it). Devices are enumerated again inside every session and matched to sysfs by PCI bus id.
//
// Thread safety: none; owned by the probe, used by one detect/sample at a time.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "gpustream/dynamic_library.hpp"
#include "gpustream/library_session.hpp"
#include "gpustream/log.hpp"
#include "gpustream/model.hpp"
#include "gpustream/probes/counter_rate.hpp"

namespace gpustream {

struct LevelZeroFunctions;

class LevelZeroAugment {
 public:
  LevelZeroAugment(std::string library, LibrarySessionMode mode);
  ~LevelZeroAugment();

  /// Loads (once) and initializes the loader, enumerates devices. Returns the status line;
  /// after a failure ("no Level Zero devices ...") later samples do not retry until refresh().
  std::string refresh();
  /// The last status line.
  const std::string& status() const noexcept { return status_; }
  /// PCI bus ids of the Sysman devices seen by the last refresh()/augment().
  const std::vector<std::string>& devices() const noexcept { return bus_ids_; }

  /// Adds Level Zero metrics to the devices it knows (matched by pci_bus_id), without replacing
  /// a sysfs value, and sets "metrics_source". Never throws.
  void augment(std::vector<DeviceSample>& devices, std::int64_t now_ns);

 private:
  struct EnergyState {
    std::optional<std::uint64_t> last_uj;
    rate::CounterRate uj_per_us;  // energy (µJ) over the counter's timestamp (µs): watts
    double offset_uj = 0;         // sum of the values before each reset
  };
  struct EngineKey {
    std::uint32_t type, subdevice;
    auto operator<=>(const EngineKey&) const = default;
  };
  struct DeviceState {
    EnergyState energy;
    rate::CounterRates<EngineKey> engines;  // active time over timestamp (both µs)
  };

  bool load();
  /// Enumerated devices as (bus id, handle); empty on failure with status_ set.
  std::vector<std::pair<std::string, void*>> enumerate();
  void add_metrics(void* device, DeviceSample& out, DeviceState& state);
  void add_engines(void* device, DeviceSample& out, DeviceState& state);
  void add_energy(void* device, DeviceSample& out, EnergyState& state);

  std::string library_;
  LibrarySessionMode mode_;
  std::optional<DynamicLibrary> lib_;
  std::unique_ptr<LevelZeroFunctions> fn_;
  std::unique_ptr<LibrarySession> session_;
  bool failed_ = false;
  std::string status_ = "not loaded";
  std::vector<std::string> bus_ids_;
  std::map<std::string, DeviceState> states_;
  LogOnce log_once_;
};

}  // namespace gpustream
