#include "intel_sysfs.hpp"

#include <algorithm>
#include <cctype>
#include <map>

#include "gpustream/probes/readers.hpp"
#include "gpustream/probes/sysfs.hpp"

namespace gpustream::intel {
namespace {

using readers::join_path;

constexpr std::uint64_t kIntelVendor = 0x8086;

/// N of the entries "<prefix><N>" in `dir`, ascending.
std::vector<std::uint64_t> numbered(const std::string& dir, std::string_view prefix) {
  std::vector<std::uint64_t> out;
  for (const auto& e : sysfs::numbered_entries(dir, prefix)) out.push_back(e.number);
  return out;
}

std::optional<std::uint64_t> read_u64(const std::string& path) {
  auto v = readers::read_uint_file(path);
  if (!v) return std::nullopt;
  return *v;
}

std::string find_hwmon(const std::string& device_dir, const std::string& driver) {
  const auto dir = join_path(device_dir, "hwmon");
  for (const auto& [number, name] : sysfs::numbered_entries(dir, "hwmon")) {
    auto hw = join_path(dir, name);
    auto text = readers::read_file(join_path(hw, "name"));
    if (text && readers::trim(*text) == driver) return hw;  // not "i915_gt0"
  }
  return {};
}

void set_or_unsupported(MetricSet& m, Metric metric, std::optional<double> v) {
  if (v)
    m.set(metric, *v, Source::sysfs);
  else
    m.set_absent(metric, Absence::unsupported, Source::sysfs);
}

/// Graphics clock: the primary GT's actual frequency (requested when there is no actual file);
/// every GT's actual frequency goes into attributes.
void read_clocks(const Card& card, DeviceSample& out) {
  std::optional<double> primary;
  auto gt_freq = [&](const std::string& act, const std::string& cur, const std::string& attr) {
    auto v = read_u64(act);
    if (!v) v = read_u64(cur);
    if (!v) return;
    out.attributes[attr] = std::to_string(*v);
    if (!primary) primary = static_cast<double>(*v);
  };
  if (card.driver == "xe") {
    for (auto tile : numbered(card.device_dir, "tile")) {
      const auto tdir = join_path(card.device_dir, "tile" + std::to_string(tile));
      for (auto gt : numbered(tdir, "gt")) {
        const auto f = join_path(tdir, "gt" + std::to_string(gt) + "/freq0");
        gt_freq(join_path(f, "act_freq"), join_path(f, "cur_freq"),
                "tile" + std::to_string(tile) + "_gt" + std::to_string(gt) + "_act_freq_mhz");
      }
    }
  } else if (!card.card.empty()) {
    const auto gtdir = join_path(card.node_dir, "gt");
    for (auto gt : numbered(gtdir, "gt")) {
      const auto g = join_path(gtdir, "gt" + std::to_string(gt));
      gt_freq(join_path(g, "rps_act_freq_mhz"), join_path(g, "rps_cur_freq_mhz"),
              "gt" + std::to_string(gt) + "_act_freq_mhz");
    }
    if (!primary)
      gt_freq(join_path(card.node_dir, "gt_act_freq_mhz"),
              join_path(card.node_dir, "gt_cur_freq_mhz"), "gt0_act_freq_mhz");
  }
  set_or_unsupported(out.metrics, Metric::clock_graphics_mhz, primary);
}

void read_energy(const Card& card, DeviceSample& out, EnergyTracker& energy, std::int64_t now_ns) {
  std::string counter = "energy1_input";
  auto uj = readers::read_uint_file(join_path(card.hwmon_dir, counter));
  if (card.driver == "xe" && (!uj || *uj == 0)) {
    if (auto pkg = readers::read_uint_file(join_path(card.hwmon_dir, "energy2_input"))) {
      uj = std::move(pkg);
      counter = "energy2_input";
    }
  }
  if (!uj) {
    // i915/xe make the energy counters root-only on many kernels: say so (no_permission).
    const auto why = sysfs::absence_of(uj.error());
    out.metrics.set_absent(Metric::energy_joules, why, Source::sysfs);
    out.metrics.set_absent(Metric::power_watts, why, Source::sysfs);
    energy = {};
    return;
  }
  out.metrics.set(Metric::energy_joules, static_cast<double>(*uj) / 1e6, Source::sysfs);
  out.energy_kind = EnergyKind::counter;
  out.attributes["energy_counter"] = counter;
  // First reading, a counter reset, or a switch of counter: seed again (probes/toolkit
  // counter_rate). µJ per ns is 1000 W.
  if (energy.counter != counter) energy.uj_per_ns.clear();
  energy.counter = counter;
  const auto step =
      energy.uj_per_ns.update(*uj, static_cast<std::uint64_t>(std::max<std::int64_t>(now_ns, 0)));
  if (step.rate) {
    out.metrics.set(Metric::power_watts, *step.rate * 1e3, Source::sysfs);
  } else {
    out.metrics.set_absent(Metric::power_watts, Absence::not_yet_seeded, Source::sysfs);
  }
}

void read_power_limit(const Card& card, DeviceSample& out) {
  const char* i915_files[] = {"power1_max", "power1_rated_max"};
  const char* xe_files[] = {"power1_max", "power1_rated_max", "power2_max", "power2_rated_max"};
  std::optional<double> watts;
  const auto try_files = [&](auto& files) {
    for (const char* f : files) {
      auto uw = read_u64(join_path(card.hwmon_dir, f));
      if (uw && *uw > 0) {  // 0 means "limit disabled"
        watts = static_cast<double>(*uw) / 1e6;
        return;
      }
    }
  };
  if (card.driver == "xe")
    try_files(xe_files);
  else
    try_files(i915_files);
  set_or_unsupported(out.metrics, Metric::power_limit_watts, watts);
}

/// The GPU temperature: a sensor labelled pkg/package/gpu/card first, else the lowest-numbered
/// one; every sensor also goes into attributes as temperature_<label>_celsius.
void read_temperature(const Card& card, DeviceSample& out) {
  sysfs::set_temperature(out, sysfs::read_temperatures(card.hwmon_dir),
                         {"pkg", "package", "gpu", "card"});
}

void read_vram(const Card& card, DeviceSample& out) {
  // Summed over every VRAM region of every tile. A region whose file is missing or unreadable
  // makes that figure absent: a partial sum would understate the device.
  std::optional<std::uint64_t> total, used;
  bool total_complete = true, used_complete = true;
  if (card.driver == "xe") {
    for (auto tile : numbered(card.device_dir, "tile")) {
      const auto tdir = join_path(card.device_dir, "tile" + std::to_string(tile));
      for (auto v : numbered(tdir, "vram")) {
        const auto vdir = join_path(tdir, "vram" + std::to_string(v));
        if (auto t = read_u64(join_path(vdir, "total_bytes")))
          total = total.value_or(0) + *t;
        else
          total_complete = false;
        if (auto u = read_u64(join_path(vdir, "used_bytes")))
          used = used.value_or(0) + *u;
        else
          used_complete = false;
      }
    }
  }
  if (!total_complete) total.reset();
  if (!used_complete) used.reset();
  // i915 has no VRAM files in sysfs; Level Zero fills them on discrete parts.
  set_or_unsupported(out.metrics, Metric::memory_total_bytes,
                     total ? std::optional<double>(static_cast<double>(*total)) : std::nullopt);
  set_or_unsupported(out.metrics, Metric::memory_used_bytes,
                     used ? std::optional<double>(static_cast<double>(*used)) : std::nullopt);
}

}  // namespace

std::vector<Card> discover_cards(const std::string& sysfs_root) {
  const auto drm_dir = join_path(sysfs_root, "class/drm");
  std::map<std::string, Card> by_bus;
  std::vector<std::string> nodes;
  for (const auto& e : sysfs::numbered_entries(drm_dir, "card")) nodes.push_back(e.name);
  for (const auto& e : sysfs::numbered_entries(drm_dir, "renderD")) nodes.push_back(e.name);
  for (const auto& name : nodes) {
    const bool is_card = name.rfind("card", 0) == 0;
    const auto node_dir = join_path(drm_dir, name);
    const auto device_dir = join_path(node_dir, "device");
    auto vendor = readers::read_uint_file(join_path(device_dir, "vendor"), 16);
    if (!vendor || *vendor != kIntelVendor) continue;
    const std::string driver = sysfs::driver_of(device_dir);
    const std::string bus = sysfs::pci_bus_id_of(device_dir);
    if ((driver != "i915" && driver != "xe") || bus.empty()) continue;

    Card& card = by_bus[bus];
    card.pci_bus_id = bus;
    card.driver = driver;
    if (is_card) {
      card.card = name;
      card.node_dir = node_dir;
      card.device_dir = device_dir;
    } else {
      card.render = name;
      if (card.node_dir.empty()) {
        card.node_dir = node_dir;
        card.device_dir = device_dir;
      }
    }
  }
  std::vector<Card> out;
  for (auto& [bus, card] : by_bus) {
    if (auto id = readers::read_uint_file(join_path(card.device_dir, "device"), 16))
      card.device_id = static_cast<std::uint32_t>(*id);
    card.hwmon_dir = find_hwmon(card.device_dir, card.driver);
    card.discrete = bus.substr(5, 2) != "00";
    out.push_back(std::move(card));
  }
  return out;
}

void read_sysfs_metrics(const Card& card, DeviceSample& out, EnergyTracker& energy,
                        std::int64_t now_ns) {
  read_clocks(card, out);
  if (card.hwmon_dir.empty()) {
    for (auto m : {Metric::energy_joules, Metric::power_watts, Metric::power_limit_watts,
                   Metric::temperature_celsius, Metric::fan_rpm})
      out.metrics.set_absent(m, Absence::unsupported, Source::sysfs);
    energy = {};
  } else {
    read_energy(card, out, energy, now_ns);
    read_power_limit(card, out);
    read_temperature(card, out);
    std::optional<double> rpm;
    for (int i = 1; i <= 3 && !rpm; ++i)
      if (auto v = read_u64(join_path(card.hwmon_dir, "fan" + std::to_string(i) + "_input")))
        rpm = static_cast<double>(*v);
    set_or_unsupported(out.metrics, Metric::fan_rpm, rpm);
  }
  read_vram(card, out);
  if (auto status = readers::read_file(join_path(card.device_dir, "power/runtime_status"))) {
    const auto s = readers::trim(*status);
    out.power_state = s == "suspended" ? PowerState::suspended
                      : s == "active"  ? PowerState::active
                                       : PowerState::unknown;
  }
}

}  // namespace gpustream::intel
