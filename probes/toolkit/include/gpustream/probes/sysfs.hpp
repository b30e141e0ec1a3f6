// gpustream/probes/sysfs.hpp — the sysfs and hwmon readers the DRM probes share.
//
// Numbered entries (card3, hwmon2, tile0, gt1...), a PCI function's bus id and driver from its
// uevent, the hwmon temp<N>_input/temp<N>_label sensors, and "a metric is a value or an absence
// with the reason the file gave" (EACCES/EPERM → no_permission, anything else → unsupported).
//
// Thread safety: pure functions over the filesystem. Cancellation: each call is a few short
// blocking reads and belongs on the work pool.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "gpustream/model.hpp"
#include "gpustream/probes/readers.hpp"

namespace gpustream::sysfs {

/// One entry "<prefix><N>" of a directory.
struct Numbered {
  std::uint64_t number = 0;
  std::string name;  // "<prefix><N>"
};

/// The entries of `dir` named `prefix` followed by digits only, ascending by N; empty when the
/// directory cannot be listed.
std::vector<Numbered> numbered_entries(const std::string& dir, std::string_view prefix);

/// A PCI device's bus id in the canonical form (pci::normalize_bus_id): PCI_SLOT_NAME of
/// `device_dir`/uevent, else the name `device_dir` links to; "" when neither is a bus id.
std::string pci_bus_id_of(const std::string& device_dir);

/// The kernel driver bound to `device_dir`: DRIVER of its uevent, else the name its `driver`
/// link points to; "" when unknown.
std::string driver_of(const std::string& device_dir);

/// Why a file gave no value: EACCES/EPERM → no_permission, anything else → unsupported.
Absence absence_of(const readers::ReadError& e) noexcept;

/// Reads an unsigned attribute into `metric` (value × scale), or its absence with the reason.
void read_metric(MetricSet& m, Metric metric, const std::string& path, double scale,
                 Source source = Source::sysfs);

/// One hwmon temperature sensor.
struct Temperature {
  int index = 0;      // N of tempN_input
  std::string label;  // tempN_label, trimmed and lower-cased; "tempN" when there is none
  double celsius = 0;
};

/// Highest N of tempN_input examined.
inline constexpr int kMaxTemperatureSensors = 16;

/// Every readable tempN_input (m°C) of `hwmon_dir`, by N.
std::vector<Temperature> read_temperatures(const std::string& hwmon_dir);

/// The device temperature among `sensors`: the first whose label is one of `preferred`
/// (in that order of preference), else the lowest-numbered one. Every sensor also goes into
/// `d.attributes` as "temperature_<label>_celsius" (one decimal). Absent `unsupported` when
/// there is none.
void set_temperature(DeviceSample& d, const std::vector<Temperature>& sensors,
                     std::initializer_list<std::string_view> preferred);

}  // namespace gpustream::sysfs
