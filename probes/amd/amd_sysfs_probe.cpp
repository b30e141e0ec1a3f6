#include <algorithm>
#include <cctype>
#include <stdexcept>
#include <utility>

#include "amd/amdgpu_gpu_metrics.hpp"
#include "gpustream/log.hpp"
#include "gpustream/probes/amd_probe.hpp"
#include "gpustream/probes/drm_client_tracker.hpp"
#include "gpustream/probes/drm_fdinfo.hpp"
#include "gpustream/probes/pci.hpp"
#include "gpustream/probes/power.hpp"
#include "gpustream/probes/readers.hpp"
#include "gpustream/probes/sysfs.hpp"

namespace gpustream {
namespace {

using readers::join_path;

constexpr std::uint64_t kAmdVendor = 0x1002;

void read_hwmon(const std::string& device_dir, DeviceSample& d) {
  auto& m = d.metrics;
  const auto hwmons = sysfs::numbered_entries(join_path(device_dir, "hwmon"), "hwmon");
  if (hwmons.empty()) {
    for (auto metric : {Metric::temperature_celsius, Metric::power_watts,
                        Metric::power_average_watts, Metric::power_limit_watts, Metric::fan_rpm})
      m.set_absent(metric, Absence::unsupported, Source::sysfs);
    return;
  }
  const auto dir = join_path(device_dir, "hwmon/" + hwmons.front().name);
  // Temperatures: "edge" is the device temperature; every sensor also becomes an attribute.
  sysfs::set_temperature(d, sysfs::read_temperatures(dir), {"edge"});

  // power1_input is instantaneous; most consumer boards only have the driver's power1_average,
  // which then becomes power_watts too (power::settle, PowerKind::average).
  sysfs::read_metric(m, Metric::power_average_watts, join_path(dir, "power1_average"), 1e-6);
  sysfs::read_metric(m, Metric::power_watts, join_path(dir, "power1_input"), 1e-6);
  if (m[Metric::power_watts]) d.power_kind = PowerKind::instant;
  power::settle(d);
  sysfs::read_metric(m, Metric::power_limit_watts, join_path(dir, "power1_cap"), 1e-6);
  sysfs::read_metric(m, Metric::fan_rpm, join_path(dir, "fan1_input"), 1.0);
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
  if (auto canonical = pci::normalize_bus_id(pci_bus_id); !canonical.empty())
    return "amd:" + canonical;
  std::string out = "amd:";  // not a bus id: kept as given, lower case
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

AmdSysfsProbe::~AmdSysfsProbe() = default;

AmdSysfsProbe::AmdSysfsProbe(ProbeExecutors executors, AmdSysfsProbeOptions options)
    : BlockingProbe(std::move(executors)),
      options_(std::move(options)),
      process_table_(options_.paths.procfs_root) {}

std::string AmdSysfsProbe::card_name(const std::string& device, std::optional<AmdgpuIds>& ids) {
  if (auto product = readers::read_file(join_path(device, "product_name"));
      product && !readers::trim(*product).empty())
    return std::string(readers::trim(*product));
  auto id_text = readers::read_file(join_path(device, "device"));
  const std::string id = id_text ? std::string(readers::trim(*id_text)) : std::string("?");
  auto device_id = readers::read_uint_file(join_path(device, "device"), 16);
  auto revision = readers::read_uint_file(join_path(device, "revision"), 16);
  if (device_id && revision && !options_.amdgpu_ids.empty()) {
    if (!ids) {
      auto loaded = load_amdgpu_ids(options_.amdgpu_ids);
      if (loaded) {
        ids = std::move(loaded).value();
      } else {
        ids.emplace();  // tried: do not read it again for the other cards of this scan
        if (!loaded.error().not_found() && log_once_.first("amdgpu.ids"))
          logger()->warn("amd probe: {} (cards are named by PCI device id)",
                         loaded.error().message());
      }
    }
    if (auto name = ids->find(static_cast<std::uint32_t>(*device_id),
                              static_cast<std::uint32_t>(*revision)))
      return *name;
  }
  return "AMD GPU " + id;
}

std::vector<AmdSysfsProbe::Card> AmdSysfsProbe::scan_cards() {
  std::vector<Card> out;
  std::optional<AmdgpuIds> ids;
  const auto drm = join_path(options_.paths.sysfs_root, "class/drm");
  for (const auto& [number, name] : sysfs::numbered_entries(drm, "card")) {
    Card card;
    card.dir = join_path(drm, name);
    const auto device = join_path(card.dir, "device");
    auto vendor = readers::read_uint_file(join_path(device, "vendor"), 16);
    if (!vendor || *vendor != kAmdVendor) continue;
    card.info.vendor = Vendor::amd;
    card.info.index = static_cast<int>(out.size());
    card.info.pci_bus_id = sysfs::pci_bus_id_of(device);
    card.info.id =
        card.info.pci_bus_id.empty() ? "amd:" + name : amd_device_id(card.info.pci_bus_id);
    card.info.name = card_name(device, ids);
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

void AmdSysfsProbe::read_activity(const std::string& device_dir, DeviceSample& d,
                                  std::vector<SampleError>& errors) {
  // The SMU's time-filtered activities from the binary gpu_metrics table (amdgpu_gpu_metrics.hpp):
  // only revisions of known layout are read.
  const auto table = amdgpu::read_gpu_metrics(join_path(device_dir, "gpu_metrics"));
  d.metrics[Metric::graphics_activity_percent] = table.graphics;
  d.metrics[Metric::dram_activity_percent] = table.memory_controller;
  if (table.problem.empty()) return;
  // A refused table is reported in the snapshot (counted per sample) and logged once per card
  // and reason; an unknown revision is a device gpustream cannot read, not an error.
  const bool unknown = table.graphics.reason() == Absence::unsupported &&
                       table.memory_controller.reason() == Absence::unsupported;
  if (!unknown) errors.push_back({"gpu_metrics_invalid", table.problem, d.id});
  if (log_once_.first(d.id + ":gpu_metrics:" + table.problem))
    logger()->warn("amd probe: {}: {}", d.id, table.problem);
}

DeviceSample AmdSysfsProbe::sample_card(const Card& card, std::vector<SampleError>& errors) {
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
  sysfs::read_metric(m, Metric::utilization_percent, join_path(device, "gpu_busy_percent"), 1.0);
  sysfs::read_metric(m, Metric::memory_utilization_percent, join_path(device, "mem_busy_percent"),
                     1.0);
  sysfs::read_metric(m, Metric::memory_total_bytes, join_path(device, "mem_info_vram_total"), 1.0);
  sysfs::read_metric(m, Metric::memory_used_bytes, join_path(device, "mem_info_vram_used"), 1.0);
  sysfs::read_metric(m, Metric::gtt_total_bytes, join_path(device, "mem_info_gtt_total"), 1.0);
  sysfs::read_metric(m, Metric::gtt_used_bytes, join_path(device, "mem_info_gtt_used"), 1.0);
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
  read_activity(device, d, errors);
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
                            .devfs_root = options_.paths.devfs_root,
                            .drivers = {"amdgpu"},
                            .freshness = options_.process_freshness,
                            .sweep_period = options_.process_sweep,
                            .count_period = options_.process_fd_count_period,
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
    // drm-resident-<region> (kernels with drm_print_memory_stats), else amdgpu's legacy
    // drm-memory-<region>; a region the client does not report stays unknown.
    const auto region = [&](const char* name) -> std::optional<std::uint64_t> {
      if (auto it = c.info.resident_bytes.find(name); it != c.info.resident_bytes.end())
        return it->second;
      if (auto it = c.info.legacy_memory_bytes.find(name); it != c.info.legacy_memory_bytes.end())
        return it->second;
      return std::nullopt;
    };
    if (const auto vram = region("vram"))
      p.gpu_memory_bytes = p.gpu_memory_bytes.value_or(0) + *vram;
    if (const auto gtt = region("gtt")) p.gtt_memory_bytes = p.gtt_memory_bytes.value_or(0) + *gtt;
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
  process_table_.fill(devices);  // name and host RSS from /proc/<pid>/{comm,statm}
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
  for (const auto& card : cards_) snap.devices.push_back(sample_card(card, snap.errors));
  if (options_.processes && !cards_.empty()) add_processes(snap.devices, snap);
  if (!options_.processes)
    for (auto& d : snap.devices) d.processes_absent = Absence::not_collected;
  return snap;
}

std::shared_ptr<AmdSysfsProbe> make_amd_sysfs_probe(ProbeExecutors executors,
                                                    AmdSysfsProbeOptions options) {
  return std::make_shared<AmdSysfsProbe>(std::move(executors), std::move(options));
}

bool amd_sysfs_available(const SystemPaths& paths) {
  AmdSysfsProbe probe({}, {.paths = paths, .processes = false, .amdgpu_ids = ""});
  return probe.detect_now().available;
}

}  // namespace gpustream
