#include <algorithm>
#include <cctype>
#include <filesystem>
#include <stdexcept>
#include <utility>

#include "gpustream/probes/amd_probe.hpp"
#include "gpustream/probes/drm_client_tracker.hpp"
#include "gpustream/probes/drm_fdinfo.hpp"
#include "gpustream/probes/readers.hpp"

namespace gpustream {
namespace {

using readers::join_path;
namespace fs = std::filesystem;

constexpr std::uint64_t kAmdVendor = 0x1002;

// Names of entries of `dir` starting with `prefix` followed by digits, sorted by that number.
std::vector<std::string> numbered_entries(const std::string& dir, std::string_view prefix) {
  std::vector<std::pair<std::uint64_t, std::string>> found;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const auto name = it->path().filename().string();
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
    if (auto n = readers::parse_uint(std::string_view(name).substr(prefix.size())))
      found.emplace_back(*n, name);
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  for (auto& f : found) out.push_back(std::move(f.second));
  return out;
}

// The reason a file could not be read, as an Absence.
Absence absence_of(const readers::ReadError& e) {
  if (e.code == std::errc::permission_denied || e.code == std::errc::operation_not_permitted)
    return Absence::no_permission;
  return Absence::unsupported;
}

// Reads an unsigned sysfs attribute into `metric`, scaled by `scale`.
void read_metric(MetricSet& m, Metric metric, const std::string& path, double scale) {
  auto v = readers::read_uint_file(path);
  if (v) {
    m.set(metric, static_cast<double>(*v) * scale, Source::sysfs);
  } else {
    m.set_absent(metric, absence_of(v.error()), Source::sysfs);
  }
}

std::string pci_bus_id_of(const std::string& device_dir) {
  if (auto uevent = readers::read_file(join_path(device_dir, "uevent"))) {
    if (auto slot = readers::find_value(*uevent, "PCI_SLOT_NAME", '=')) return std::string(*slot);
  }
  if (auto target = readers::read_link(device_dir))
    return fs::path(*target).filename().string();
  return {};
}

void read_hwmon(const std::string& device_dir, DeviceSample& d) {
  auto& m = d.metrics;
  const auto hwmons = numbered_entries(join_path(device_dir, "hwmon"), "hwmon");
  if (hwmons.empty()) {
    for (auto metric : {Metric::temperature_celsius, Metric::power_watts,
                        Metric::power_average_watts, Metric::power_limit_watts, Metric::fan_rpm})
      m.set_absent(metric, Absence::unsupported, Source::sysfs);
    return;
  }
  const auto dir = join_path(device_dir, "hwmon/" + hwmons.front());
  // Temperatures: "edge" is the device temperature; the others become attributes.
  for (int i = 1; i <= 8; ++i) {
    const auto base = join_path(dir, "temp" + std::to_string(i));
    auto value = readers::read_int_file(base + "_input");
    if (!value) continue;
    std::string label = "temp" + std::to_string(i);
    if (auto l = readers::read_file(base + "_label")) label = std::string(readers::trim(*l));
    const double celsius = static_cast<double>(*value) / 1000.0;
    if (label == "edge" || (i == 1 && !m[Metric::temperature_celsius]))
      m.set(Metric::temperature_celsius, celsius, Source::sysfs);
    d.attributes["temperature_" + label + "_celsius"] = std::to_string(celsius);
  }
  if (!m[Metric::temperature_celsius])
    m.set_absent(Metric::temperature_celsius, Absence::unsupported, Source::sysfs);

  read_metric(m, Metric::power_average_watts, join_path(dir, "power1_average"), 1e-6);
  read_metric(m, Metric::power_watts, join_path(dir, "power1_input"), 1e-6);
  read_metric(m, Metric::power_limit_watts, join_path(dir, "power1_cap"), 1e-6);
  read_metric(m, Metric::fan_rpm, join_path(dir, "fan1_input"), 1.0);
  // freqN_input in Hz, labelled sclk / mclk.
  for (int i = 1; i <= 4; ++i) {
    const auto base = join_path(dir, "freq" + std::to_string(i));
    auto hz = readers::read_uint_file(base + "_input");
    if (!hz) continue;
    auto label = readers::read_file(base + "_label");
    const auto l = label ? readers::trim(*label) : std::string_view{};
    const double mhz = static_cast<double>(*hz) / 1e6;
    if (l == "sclk") m.set(Metric::clock_graphics_mhz, mhz, Source::sysfs);
    if (l == "mclk") m.set(Metric::clock_memory_mhz, mhz, Source::sysfs);
  }
}

}  // namespace

std::string amd_device_id(std::string_view pci_bus_id) {
  std::string out = "amd:";
  for (char c : pci_bus_id) out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::optional<double> parse_dpm_current_mhz(std::string_view text) noexcept {
  while (!text.empty()) {
    const auto nl = text.find('\n');
    auto line = readers::trim(text.substr(0, nl));
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    if (line.empty() || line.back() != '*') continue;
    const auto colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    auto v = readers::trim(line.substr(colon + 1, line.size() - colon - 2));
    // "1800Mhz" or "1800MHz"
    std::size_t digits = 0;
    while (digits < v.size() && v[digits] >= '0' && v[digits] <= '9') ++digits;
    if (auto n = readers::parse_uint(v.substr(0, digits))) return static_cast<double>(*n);
  }
  return std::nullopt;
}

AmdSysfsProbe::AmdSysfsProbe(ProbeExecutors executors, AmdSysfsProbeOptions options)
    : BlockingProbe(std::move(executors)), options_(std::move(options)) {}

AmdSysfsProbe::~AmdSysfsProbe() = default;

std::vector<AmdSysfsProbe::Card> AmdSysfsProbe::scan_cards() const {
  std::vector<Card> out;
  const auto drm = join_path(options_.paths.sysfs_root, "class/drm");
  for (const auto& name : numbered_entries(drm, "card")) {
    Card card;
    card.dir = join_path(drm, name);
    const auto device = join_path(card.dir, "device");
    auto vendor = readers::read_uint_file(join_path(device, "vendor"), 16);
    if (!vendor || *vendor != kAmdVendor) continue;
    card.info.vendor = Vendor::amd;
    card.info.index = static_cast<int>(out.size());
    card.info.pci_bus_id = pci_bus_id_of(device);
    card.info.id = card.info.pci_bus_id.empty() ? "amd:" + name : amd_device_id(card.info.pci_bus_id);
    if (auto product = readers::read_file(join_path(device, "product_name"));
        product && !readers::trim(*product).empty()) {
      card.info.name = std::string(readers::trim(*product));
    } else {
      auto id = readers::read_file(join_path(device, "device"));
      card.info.name = "AMD GPU " + (id ? std::string(readers::trim(*id)) : std::string("?"));
    }
    out.push_back(std::move(card));
  }
  return out;
}

Detection AmdSysfsProbe::detect() {
  auto cards = scan_cards();
  Detection d;
  for (const auto& c : cards) d.devices.push_back(c.info);
  d.available = !cards.empty();
  if (!d.available)
    d.reason = "no amdgpu device under " + join_path(options_.paths.sysfs_root, "class/drm");
  std::lock_guard lock(mutex_);
  cards_ = std::move(cards);
  return d;
}

DeviceSample AmdSysfsProbe::sample_card(const Card& card) const {
  DeviceSample d;
  d.id = card.info.id;
  d.vendor = Vendor::amd;
  d.index = card.info.index;
  d.name = card.info.name;
  d.pci_bus_id = card.info.pci_bus_id;
  const auto device = join_path(card.dir, "device");
  auto& m = d.metrics;

  // Reading the other attributes would resume a runtime-suspended device: look first.
  if (auto status = readers::read_file(join_path(device, "power/runtime_status"))) {
    if (readers::trim(*status) == "suspended") {
      d.power_state = PowerState::suspended;
      m.fill_absent(Absence::suspended, Source::sysfs);
      return d;
    }
    d.power_state = PowerState::active;
  }
  read_metric(m, Metric::utilization_percent, join_path(device, "gpu_busy_percent"), 1.0);
  read_metric(m, Metric::memory_utilization_percent, join_path(device, "mem_busy_percent"), 1.0);
  read_metric(m, Metric::memory_total_bytes, join_path(device, "mem_info_vram_total"), 1.0);
  read_metric(m, Metric::memory_used_bytes, join_path(device, "mem_info_vram_used"), 1.0);
  read_metric(m, Metric::gtt_total_bytes, join_path(device, "mem_info_gtt_total"), 1.0);
  read_metric(m, Metric::gtt_used_bytes, join_path(device, "mem_info_gtt_used"), 1.0);
  read_hwmon(device, d);
  if (!m[Metric::clock_graphics_mhz]) {
    auto t = readers::read_file(join_path(device, "pp_dpm_sclk"));
    if (auto mhz = t ? parse_dpm_current_mhz(*t) : std::nullopt) {
      m.set(Metric::clock_graphics_mhz, *mhz, Source::sysfs);
    }
  }
  if (!m[Metric::clock_memory_mhz]) {
    auto t = readers::read_file(join_path(device, "pp_dpm_mclk"));
    if (auto mhz = t ? parse_dpm_current_mhz(*t) : std::nullopt) {
      m.set(Metric::clock_memory_mhz, *mhz, Source::sysfs);
    }
  }
  if (auto uid = readers::read_file(join_path(device, "unique_id"))) {
    auto v = readers::trim(*uid);
    if (!v.empty()) d.attributes["unique_id"] = std::string(v);
  }
  m.fill_absent(Absence::unsupported, Source::sysfs);
  return d;
}

void AmdSysfsProbe::add_processes(std::vector<DeviceSample>& devices, GpuSnapshot& snap) {
  if (!clients_)
    clients_ = std::make_unique<drm::ClientTracker>(
        drm::TrackerOptions{.procfs_root = options_.paths.procfs_root,
                            .drivers = {"amdgpu"},
                            .freshness = options_.process_freshness,
                            .max_clients = options_.max_clients});
  drm::WalkStats stats;
  const auto clients = clients_->sample(snap.monotonic_ns, &stats);
  if (stats.clients_capped > 0) {
    // The count changes from tick to tick; the message must not (the Scheduler logs each
    // distinct message once), so only the configured bound is in it.
    snap.errors.push_back({"clients_capped",
                           "more than " + std::to_string(options_.max_clients) +
                               " DRM clients: the others are not reported",
                           {}});
  }
  engines_.begin(snap.monotonic_ns);
  // (device index, pid) -> process, and its engines summed over its distinct clients.
  std::map<std::pair<std::size_t, std::int64_t>, ProcessSample> procs;
  std::map<std::pair<std::size_t, std::int64_t>, EngineUsage> usage;
  for (const auto& c : clients) {
    std::size_t dev = devices.size();
    for (std::size_t i = 0; i < devices.size(); ++i)
      if (!c.info.pdev.empty() && amd_device_id(c.info.pdev) == devices[i].id) dev = i;
    if (dev == devices.size()) continue;  // a device we do not report
    const auto key = std::make_pair(dev, c.pid);
    auto& p = procs[key];
    p.pid = c.pid;
    p.name = c.comm;
    std::optional<std::uint64_t> vram;
    if (auto it = c.info.resident_bytes.find("vram"); it != c.info.resident_bytes.end()) {
      vram = it->second;
    } else if (auto l = c.info.legacy_memory_bytes.find("vram");
               l != c.info.legacy_memory_bytes.end()) {
      vram = l->second;
    }
    if (vram) p.gpu_memory_bytes = p.gpu_memory_bytes.value_or(0) + *vram;
    // Clients without a drm-client-id (old kernels) share one counter per (pid, device). The
    // tracker's instance joins the device part of the key: a reused pid starts afresh.
    const EngineBusyTracker::Key ck{c.pid, c.info.pdev + '#' + std::to_string(c.instance),
                                    c.info.client_id.value_or(~0ULL)};
    add_engine_usage(usage[key], engines_.update(ck, c.info.engine_ns));
  }
  for (auto& [key, p] : procs) {
    set_engine_usage(p, usage[key], Source::fdinfo);
    devices[key.first].processes.push_back(std::move(p));
  }
}

GpuSnapshot AmdSysfsProbe::sample() {
  std::lock_guard lock(mutex_);
  if (cards_.empty()) {
    auto cards = scan_cards();
    cards_ = std::move(cards);
  }
  GpuSnapshot snap;
  // The sample time, also the base of engine deltas and of the tracker's round robins.
  snap.monotonic_ns = options_.monotonic_clock ? options_.monotonic_clock() : steady_now_ns();
  for (const auto& card : cards_) snap.devices.push_back(sample_card(card));
  if (options_.processes && !cards_.empty()) add_processes(snap.devices, snap);
  return snap;
}

std::shared_ptr<AmdSysfsProbe> make_amd_sysfs_probe(ProbeExecutors executors,
                                                    AmdSysfsProbeOptions options) {
  return std::make_shared<AmdSysfsProbe>(std::move(executors), std::move(options));
}

bool amd_sysfs_available(const SystemPaths& paths) {
  AmdSysfsProbe probe({}, {.paths = paths, .processes = false});
  return probe.detect_now().available;
}

}  // namespace gpustream
