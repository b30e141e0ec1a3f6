// A fake libamd_smi.so: the AMD SMI C functions gpustream's AMD library backend uses, with the
// signatures, enum values and struct layouts of two named releases, written here from the public
// amdsmi.h independently of the probe's own declarations:
//   * "6.x": ROCm 6.2.0 (ROCm/amdsmi tag rocm-6.2.0, library 24.6.x): amdsmi_version_t {year,
//     major, minor, release, build}, amdsmi_power_info_t of uint32_t (68 bytes, 0xFFFF = N/A),
//     amdsmi_proc_info_t with 32-byte names (224 bytes);
//   * "26.x": amdsmi 26.1.0 (ROCm 7.x): amdsmi_version_t {major, minor, release, build},
//     amdsmi_power_info_t with uint64_t socket_power and voltages (192 bytes, UINT32_MAX = N/A),
//     amdsmi_proc_info_t with 256-byte names, cu_occupancy, evicted_time (704 bytes).
// The version in the scenario picks the layout the fake writes (23.x/24.x: 6.x; 26.x: 26.x; any
// other version is reported as it is, with the 26.x version struct).
//
// Driven by a scenario file named by GPUSTREAM_FAKE_AMDSMI_SCENARIO, re-read at every
// amdsmi_init (a test rewrites it between lazy sessions), one `key=value` per line, '#' comments:
//
//   version=24.6.0|26.1.0|...   the library version (default 26.1.0)
//   init_fail=CODE              amdsmi_init answers CODE
//   devices=N                   number of GPUs (default 1), one socket each
//   order=2,0,1                 the slots in the order the library lists them (default 0..N-1)
//   fail.<function>=CODE        that function answers CODE on every device
//   call_cost_ns=N              burn N ns of CPU in every call (benchmarks: a real call's cost)
//   device.<i>.<key>=value      uuid, bdf (dddd:bb:dd.f), name, gfx, umc, mm (%), vram_used,
//                               vram_total, gtt_used, gtt_total (bytes), current_power,
//                               average_power, power_limit (W, written in µW by 24.5.2..24.x;
//                               "na": not available), energy
//                               (counter), energy_resolution (µJ), temp_edge, temp_hotspot,
//                               temp_mem (°C), clk_gfx, clk_mem (MHz), fan (0..255), fan_rpm,
//                               throttle_status, indep_throttle_status (gpu_metrics bits, 0x..
//                               allowed; "na": all ones, amdsmi's not available), metrics_revision
//                               (the driver table's format.content, default 1.5),
//                               metrics_gfx, metrics_umc (gpu_metrics average_gfx/umc_activity,
//                               raw uint16 %; "na": 0xFFFF; default: gfx, umc),
//                               processes=pid:name:vram:gtt:gfx_ns:enc_ns;...,
//                               fail.<function>=CODE
//
// CODE: NOT_SUPPORTED, NO_PERM, INVAL, NOT_FOUND, DRIVER_NOT_LOADED, INIT_ERROR, UNKNOWN (with or
// without the AMDSMI_STATUS_ prefix) or a number.
//
// Every init, shutdown and misuse is appended as one line to the file named by
// GPUSTREAM_FAKE_AMDSMI_LOG: "init", "shutdown", "init_while_initialized", "shutdown_uninit",
// "stale_handle <function>", "uninitialized_call <function>" (a call on a library not initialized;
// the count-only amdsmi_get_socket_handles is the exception: it is how the "already
// initialized?" question is asked). Like the real library, amdsmi_init
// on an initialized library answers SUCCESS and one amdsmi_shut_down ends it for everybody
// (not reference-counted): the log lets the tests see who called what.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#define EXPORT extern "C" __attribute__((visibility("default")))

using amdsmi_status_t = std::uint32_t;
using amdsmi_processor_handle = void*;
using amdsmi_socket_handle = void*;

namespace {

constexpr amdsmi_status_t SUCCESS = 0, INVAL = 1, NOT_SUPPORTED = 2, OUT_OF_RESOURCES = 15,
                          NOT_INIT = 32;

// ---- the two releases' structs ----------------------------------------------------------------
struct version_6x_t {
  std::uint32_t year, major, minor, release;
  const char* build;
};
struct version_26x_t {
  std::uint32_t major, minor, release;
  const char* build;
};
struct engine_usage_t {
  std::uint32_t gfx_activity, umc_activity, mm_activity, reserved[13];
};
struct clk_info_t {
  std::uint32_t clk, min_clk, max_clk;
  std::uint8_t clk_locked, clk_deep_sleep;
  std::uint32_t reserved[4];
};
struct power_info_6x_t {
  std::uint32_t current_socket_power, average_socket_power, gfx_voltage, soc_voltage, mem_voltage,
      power_limit, reserved[11];
};
struct power_info_26x_t {
  std::uint64_t socket_power;
  std::uint32_t current_socket_power, average_socket_power;
  std::uint64_t gfx_voltage, soc_voltage, mem_voltage;
  std::uint32_t power_limit;
  std::uint64_t reserved[18];
};
struct proc_info_6x_t {
  char name[32];
  std::uint32_t pid;
  std::uint64_t mem;
  struct {
    std::uint64_t gfx, enc;
    std::uint32_t reserved[12];
  } engine_usage;
  struct {
    std::uint64_t gtt_mem, cpu_mem, vram_mem;
    std::uint32_t reserved[10];
  } memory_usage;
  char container_name[32];
  std::uint32_t reserved[4];
};
struct proc_info_26x_t {
  char name[256];
  std::uint32_t pid;
  std::uint64_t mem;
  struct {
    std::uint64_t gfx, enc;
    std::uint32_t reserved[12];
  } engine_usage;
  struct {
    std::uint64_t gtt_mem, cpu_mem, vram_mem;
    std::uint32_t reserved[10];
  } memory_usage;
  char container_name[256];
  std::uint32_t cu_occupancy, evicted_time, reserved[10];
};
struct asic_info_26x_t {  // only market_name is filled; the rest is zero
  char market_name[256];
  std::uint32_t vendor_id;
  char rest[1024];
};
// amdsmi_gpu_metrics_t: the header and the gpu_metrics v1.0-v1.3 fields (the same in every
// release), then the rest of each release's struct, which the fake leaves at 0xFF (amdsmi's "not
// available"). Whole sizes, by release: 352 bytes in 23.4 (ROCm 6.0: v1.4 fields after these),
// 424 in 24.5/24.6 (ROCm 6.1/6.2: v1.5 fields), 1832 in 24.7 (ROCm 6.3: v1.6 and XCP
// statistics), 4720 in 26.x (v1.7-v1.9 fields and the APU pointer too; rocm-systems 019df164).
struct gpu_metrics_v13_t {
  std::uint16_t structure_size;
  std::uint8_t format_revision;
  std::uint8_t content_revision;
  std::uint16_t temperature_edge, temperature_hotspot, temperature_mem;
  std::uint16_t temperature_vrgfx, temperature_vrsoc, temperature_vrmem;
  std::uint16_t average_gfx_activity, average_umc_activity, average_mm_activity;
  std::uint16_t average_socket_power;
  std::uint64_t energy_accumulator;
  std::uint64_t system_clock_counter;
  std::uint16_t average_gfxclk_frequency, average_socclk_frequency, average_uclk_frequency;
  std::uint16_t average_vclk0_frequency, average_dclk0_frequency, average_vclk1_frequency;
  std::uint16_t average_dclk1_frequency;
  std::uint16_t current_gfxclk, current_socclk, current_uclk, current_vclk0, current_dclk0;
  std::uint16_t current_vclk1, current_dclk1;
  std::uint32_t throttle_status;
  std::uint16_t current_fan_speed;
  std::uint16_t pcie_link_width, pcie_link_speed;
  std::uint32_t gfx_activity_acc, mem_activity_acc;
  std::uint16_t temperature_hbm[4];
  std::uint64_t firmware_timestamp;
  std::uint16_t voltage_soc, voltage_gfx, voltage_mem;
  std::uint64_t indep_throttle_status;
};
static_assert(offsetof(gpu_metrics_v13_t, average_gfx_activity) == 16 &&
              offsetof(gpu_metrics_v13_t, throttle_status) == 68 &&
              offsetof(gpu_metrics_v13_t, indep_throttle_status) == 112 &&
              sizeof(gpu_metrics_v13_t) == 120);
static_assert(sizeof(version_6x_t) == 24 && sizeof(version_26x_t) == 24);
static_assert(sizeof(power_info_6x_t) == 68 && sizeof(power_info_26x_t) == 192);
static_assert(sizeof(proc_info_6x_t) == 224 && sizeof(proc_info_26x_t) == 704);

// ---- the scenario -----------------------------------------------------------------------------
struct Process {
  std::uint32_t pid = 0;
  std::string name;
  std::uint64_t vram = 0, gtt = 0, gfx_ns = 0, enc_ns = 0;
};

struct Device {
  std::string uuid, bdf, name = "AMD Instinct MI300X";
  std::uint32_t gfx = 0, umc = 0, mm = 0;
  std::uint64_t vram_used = 0, vram_total = 0, gtt_used = 0, gtt_total = 0;
  std::int64_t current_power = -1, average_power = -1, power_limit = -1;  // -1: N/A
  std::uint64_t energy = 0;
  float energy_resolution = 15.3f;
  std::int64_t temp_edge = 40, temp_hotspot = 50, temp_mem = 45;
  std::uint32_t clk_gfx = 0, clk_mem = 0;
  std::int64_t fan = 0, fan_rpm = 0;
  std::uint64_t throttle_status = 0, indep_throttle_status = 0;  // all ones: not available
  unsigned metrics_format = 1, metrics_content = 5;              // the driver's table: 1.5
  std::int64_t metrics_gfx = -1, metrics_umc = -1;               // -1: gfx, umc
  std::vector<Process> processes;
  std::map<std::string, amdsmi_status_t> fail;
};

struct Scenario {
  unsigned v0 = 26, v1 = 1, v2 = 0;  // version words as written
  amdsmi_status_t init_fail = 0;
  std::vector<Device> devices;
  std::vector<unsigned> order;
  std::map<std::string, amdsmi_status_t> fail;
  long call_cost_ns = 0;
  bool v6() const { return v0 == 23 || v0 == 24; }
  /// sizeof(amdsmi_gpu_metrics_t) of this release.
  std::size_t gpu_metrics_size() const {
    if (v0 == 23) return 352;
    if (v0 == 24) return v1 >= 7 ? 1832 : 424;
    return 4720;
  }
  // ROCm 6.0.x (23.4) and 6.1.0 (24.5.0): amdsmi_get_gpu_process_list fills pids
  // (amdsmi_process_handle_t), amdsmi_get_gpu_process_info gives each one's amdsmi_proc_info_t.
  bool process_pids() const { return v0 == 23 || (v0 == 24 && (v1 < 5 || (v1 == 5 && v2 == 0))); }
};

amdsmi_status_t code_of(std::string v) {
  if (v.rfind("AMDSMI_STATUS_", 0) == 0) v = v.substr(14);
  static const std::map<std::string, amdsmi_status_t> kCodes = {{"INVAL", 1},
                                                                {"NOT_SUPPORTED", 2},
                                                                {"NO_PERM", 10},
                                                                {"INIT_ERROR", 18},
                                                                {"NOT_FOUND", 31},
                                                                {"NOT_INIT", 32},
                                                                {"DRIVER_NOT_LOADED", 34},
                                                                {"NO_DATA", 40},
                                                                {"UNKNOWN", 0xFFFFFFFFu}};
  if (auto it = kCodes.find(v); it != kCodes.end()) return it->second;
  return static_cast<amdsmi_status_t>(std::stoul(v));
}

std::int64_t power_of(const std::string& v) { return v == "na" ? -1 : std::stoll(v); }

void set_device(Device& d, const std::string& key, const std::string& v) {
  if (key.rfind("fail.", 0) == 0) {
    d.fail[key.substr(5)] = code_of(v);
    return;
  }
  if (key == "uuid")
    d.uuid = v;
  else if (key == "bdf")
    d.bdf = v;
  else if (key == "name")
    d.name = v;
  else if (key == "gfx")
    d.gfx = std::stoul(v);
  else if (key == "umc")
    d.umc = std::stoul(v);
  else if (key == "mm")
    d.mm = std::stoul(v);
  else if (key == "vram_used")
    d.vram_used = std::stoull(v);
  else if (key == "vram_total")
    d.vram_total = std::stoull(v);
  else if (key == "gtt_used")
    d.gtt_used = std::stoull(v);
  else if (key == "gtt_total")
    d.gtt_total = std::stoull(v);
  else if (key == "current_power")
    d.current_power = power_of(v);
  else if (key == "average_power")
    d.average_power = power_of(v);
  else if (key == "power_limit")
    d.power_limit = power_of(v);
  else if (key == "energy")
    d.energy = std::stoull(v);
  else if (key == "energy_resolution")
    d.energy_resolution = std::stof(v);
  else if (key == "temp_edge")
    d.temp_edge = std::stoll(v);
  else if (key == "temp_hotspot")
    d.temp_hotspot = std::stoll(v);
  else if (key == "temp_mem")
    d.temp_mem = std::stoll(v);
  else if (key == "clk_gfx")
    d.clk_gfx = std::stoul(v);
  else if (key == "clk_mem")
    d.clk_mem = std::stoul(v);
  else if (key == "fan")
    d.fan = std::stoll(v);
  else if (key == "fan_rpm")
    d.fan_rpm = std::stoll(v);
  else if (key == "throttle_status")
    d.throttle_status = v == "na" ? 0xFFFFFFFFULL : std::stoull(v, nullptr, 0);
  else if (key == "indep_throttle_status")
    d.indep_throttle_status = v == "na" ? ~0ULL : std::stoull(v, nullptr, 0);
  else if (key == "metrics_gfx")
    d.metrics_gfx = v == "na" ? 0xFFFF : std::stoll(v);
  else if (key == "metrics_umc")
    d.metrics_umc = v == "na" ? 0xFFFF : std::stoll(v);
  else if (key == "metrics_revision")
    std::sscanf(v.c_str(), "%u.%u", &d.metrics_format, &d.metrics_content);
  else if (key == "processes") {
    std::stringstream ss(v);
    std::string item;
    while (std::getline(ss, item, ';')) {
      Process p;
      char name[64] = {};
      unsigned long long vram = 0, gtt = 0, gfx = 0, enc = 0;
      if (std::sscanf(item.c_str(), "%u:%63[^:]:%llu:%llu:%llu:%llu", &p.pid, name, &vram, &gtt,
                      &gfx, &enc) >= 2) {
        p.name = name;
        p.vram = vram, p.gtt = gtt, p.gfx_ns = gfx, p.enc_ns = enc;
        d.processes.push_back(p);
      }
    }
  }
}

Scenario load_scenario() {
  Scenario s;
  std::map<unsigned, std::map<std::string, std::string>> per_device;
  unsigned count = 1;
  if (const char* path = std::getenv("GPUSTREAM_FAKE_AMDSMI_SCENARIO")) {
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty() || line[0] == '#') continue;
      const auto eq = line.find('=');
      if (eq == std::string::npos) continue;
      const auto key = line.substr(0, eq), value = line.substr(eq + 1);
      if (key == "version") {
        std::sscanf(value.c_str(), "%u.%u.%u", &s.v0, &s.v1, &s.v2);
      } else if (key == "init_fail") {
        s.init_fail = code_of(value);
      } else if (key == "devices") {
        count = static_cast<unsigned>(std::stoul(value));
      } else if (key == "call_cost_ns") {
        s.call_cost_ns = std::stol(value);
      } else if (key == "order") {
        std::stringstream ss(value);
        std::string item;
        while (std::getline(ss, item, ',')) s.order.push_back(std::stoul(item));
      } else if (key.rfind("fail.", 0) == 0) {
        s.fail[key.substr(5)] = code_of(value);
      } else if (key.rfind("device.", 0) == 0) {
        const auto dot = key.find('.', 7);
        per_device[std::stoul(key.substr(7, dot - 7))][key.substr(dot + 1)] = value;
      }
    }
  }
  for (unsigned i = 0; i < count; ++i) {
    Device d;
    char buf[64];
    std::snprintf(buf, sizeof buf, "%08x-0000-1000-80ea-e05c945bb3b%u", 0xa4ff7400U + i, i % 10);
    d.uuid = buf;
    std::snprintf(buf, sizeof buf, "0000:%02x:00.0", 0x03 + i);
    d.bdf = buf;
    d.gfx = 10 + i, d.umc = 5 + i, d.mm = i;
    d.vram_total = 192ULL << 30, d.vram_used = (1ULL + i) << 30;
    d.gtt_total = 64ULL << 30, d.gtt_used = 256ULL << 20;
    d.current_power = 300 + i, d.average_power = 290 + i, d.power_limit = 750;
    d.energy = 1000000;
    d.clk_gfx = 2100, d.clk_mem = 1300;
    for (const auto& [k, v] : per_device[i]) set_device(d, k, v);
    s.devices.push_back(std::move(d));
  }
  if (s.order.empty())
    for (unsigned i = 0; i < count; ++i) s.order.push_back(i);
  return s;
}

// ---- state ------------------------------------------------------------------------------------
struct State {
  std::mutex mu;
  Scenario scenario;
  bool initialized = false;
  std::uintptr_t generation = 0;
};

State& state() {
  static State s;
  return s;
}

void log_event(const std::string& what) {
  if (const char* path = std::getenv("GPUSTREAM_FAKE_AMDSMI_LOG")) {
    std::ofstream out(path, std::ios::app);
    out << what << "\n";
  }
}

void burn(long ns) {
  if (ns <= 0) return;
  const auto end = std::chrono::steady_clock::now() + std::chrono::nanoseconds(ns);
  while (std::chrono::steady_clock::now() < end) {}
}

// Handles carry the session that issued them: one from an earlier session is refused (INVAL)
// and logged, so a backend that does not re-resolve its handles after a re-init is caught.
void* handle_of(const State& st, unsigned slot, unsigned tag) {
  return reinterpret_cast<void*>((st.generation << 20) | (std::uintptr_t{tag} << 16) | (slot + 1));
}

struct Call {
  explicit Call(const char* fn) : st(state()), lock(st.mu), name(fn) {
    burn(st.scenario.call_cost_ns);
  }
  amdsmi_status_t begin() {
    if (!st.initialized) {
      log_event("uninitialized_call " + name);
      return NOT_INIT;
    }
    if (auto it = st.scenario.fail.find(name); it != st.scenario.fail.end()) return it->second;
    return SUCCESS;
  }
  amdsmi_status_t slot_of(void* h, unsigned tag, unsigned* slot) {
    const auto v = reinterpret_cast<std::uintptr_t>(h);
    const auto s = static_cast<unsigned>(v & 0xFFFF);
    if ((v >> 20) != st.generation || ((v >> 16) & 0xF) != tag || s == 0 ||
        s > st.scenario.devices.size()) {
      log_event("stale_handle " + name);
      return INVAL;
    }
    *slot = s - 1;
    return SUCCESS;
  }
  amdsmi_status_t device(amdsmi_processor_handle h, Device** dev) {
    if (auto rc = begin(); rc != SUCCESS) return rc;
    unsigned slot = 0;
    if (auto rc = slot_of(h, 2, &slot); rc != SUCCESS) return rc;
    auto& d = st.scenario.devices[slot];
    if (auto it = d.fail.find(name); it != d.fail.end()) return it->second;
    *dev = &d;
    return SUCCESS;
  }
  State& st;
  std::unique_lock<std::mutex> lock;
  std::string name;
};

template <class T>
void write_name(T& field, const std::string& s) {
  std::snprintf(field, sizeof field, "%s", s.c_str());
}

// 23.4 and 24.5.0: the pids only; a list too short for them is refused, as those releases do.
amdsmi_status_t fill_pids(const Device& d, std::uint32_t* max, std::uint32_t* out) {
  const auto n = static_cast<std::uint32_t>(d.processes.size());
  if (*max == 0 || n == 0) {
    *max = n;
    return SUCCESS;
  }
  if (out == nullptr) return INVAL;
  if (*max < n) return OUT_OF_RESOURCES;
  for (std::uint32_t i = 0; i < n; ++i) out[i] = d.processes[i].pid;
  *max = n;
  return SUCCESS;
}

template <class Info>
Info info_of(const Process& p) {
  Info info{};
  write_name(info.name, p.name);
  info.pid = p.pid;
  info.mem = p.vram + p.gtt;
  info.engine_usage.gfx = p.gfx_ns;
  info.engine_usage.enc = p.enc_ns;
  info.memory_usage.gtt_mem = p.gtt;
  info.memory_usage.vram_mem = p.vram;
  return info;
}

template <class Info>
amdsmi_status_t fill_processes(const Device& d, std::uint32_t* max, void* out) {
  const auto n = static_cast<std::uint32_t>(d.processes.size());
  if (*max == 0 || out == nullptr) {
    *max = n;
    return SUCCESS;
  }
  const auto room = *max;
  auto* list = static_cast<Info*>(out);
  for (std::uint32_t i = 0; i < n && i < room; ++i) {
    list[i] = info_of<Info>(d.processes[i]);
  }
  *max = n;
  return room >= n ? SUCCESS : OUT_OF_RESOURCES;
}

}  // namespace

// ---- AMD SMI ----------------------------------------------------------------------------------

EXPORT amdsmi_status_t amdsmi_init(std::uint64_t flags) {
  auto& st = state();
  std::lock_guard lock(st.mu);
  if (st.initialized) {  // the real library: SUCCESS, nothing done (no reference count)
    log_event("init_while_initialized");
    return SUCCESS;
  }
  auto scenario = load_scenario();
  if (scenario.init_fail) return scenario.init_fail;
  if ((flags & (1U << 1)) == 0) return INVAL;  // AMDSMI_INIT_AMD_GPUS expected
  st.scenario = std::move(scenario);
  st.initialized = true;
  ++st.generation;
  log_event("init");
  return SUCCESS;
}

EXPORT amdsmi_status_t amdsmi_shut_down() {
  auto& st = state();
  std::lock_guard lock(st.mu);
  if (!st.initialized) {
    log_event("shutdown_uninit");
    return SUCCESS;
  }
  st.initialized = false;
  log_event("shutdown");
  return SUCCESS;
}

EXPORT amdsmi_status_t amdsmi_status_code_to_string(amdsmi_status_t status, const char** text) {
  if (!text) return INVAL;
  switch (status) {
    case 0:
      *text = "AMDSMI_STATUS_SUCCESS: Call succeeded";
      break;
    case 2:
      *text = "AMDSMI_STATUS_NOT_SUPPORTED: Feature not supported";
      break;
    case 10:
      *text = "AMDSMI_STATUS_NO_PERM: Permission Denied";
      break;
    case 32:
      *text = "AMDSMI_STATUS_NOT_INIT: Device not initialized";
      break;
    default:
      *text = "An unknown error occurred";
      break;
  }
  return SUCCESS;
}

EXPORT amdsmi_status_t amdsmi_get_lib_version(void* version) {
  Call c("amdsmi_get_lib_version");
  if (auto rc = c.begin(); rc != SUCCESS) return rc;
  if (!version) return INVAL;
  const auto& s = c.st.scenario;
  static const char* kBuild = "fake";
  if (s.v6()) {
    version_6x_t v{s.v0, s.v1, s.v2, 0, kBuild};
    std::memcpy(version, &v, sizeof v);
  } else {
    version_26x_t v{s.v0, s.v1, s.v2, kBuild};
    std::memcpy(version, &v, sizeof v);
  }
  return SUCCESS;
}

EXPORT amdsmi_status_t amdsmi_get_socket_handles(std::uint32_t* count,
                                                 amdsmi_socket_handle* sockets) {
  Call c("amdsmi_get_socket_handles");
  // amdsmi_get_socket_handles(&n, NULL) before init answers NOT_INIT, as the real library does:
  // that is how a program asks whether someone initialized the library, not a misuse.
  if (!c.st.initialized && !sockets) return NOT_INIT;
  if (auto rc = c.begin(); rc != SUCCESS) return rc;
  if (!count) return INVAL;
  const auto& order = c.st.scenario.order;
  const auto n = static_cast<std::uint32_t>(order.size());
  if (!sockets) {
    *count = n;
    return SUCCESS;
  }
  *count = std::min(*count, n);
  for (std::uint32_t i = 0; i < *count; ++i) sockets[i] = handle_of(c.st, order[i], 1);
  return SUCCESS;
}

EXPORT amdsmi_status_t amdsmi_get_processor_handles(amdsmi_socket_handle socket,
                                                    std::uint32_t* count,
                                                    amdsmi_processor_handle* handles) {
  Call c("amdsmi_get_processor_handles");
  if (auto rc = c.begin(); rc != SUCCESS) return rc;
  unsigned slot = 0;
  if (auto rc = c.slot_of(socket, 1, &slot); rc != SUCCESS) return rc;
  if (!count) return INVAL;
  if (!handles) {
    *count = 1;
    return SUCCESS;
  }
  if (*count < 1) return OUT_OF_RESOURCES;
  *count = 1;
  handles[0] = handle_of(c.st, slot, 2);
  return SUCCESS;
}

EXPORT amdsmi_status_t amdsmi_get_gpu_device_uuid(amdsmi_processor_handle h, unsigned* length,
                                                  char* uuid) {
  Call c("amdsmi_get_gpu_device_uuid");
  Device* d = nullptr;
  if (auto rc = c.device(h, &d); rc != SUCCESS) return rc;
  if (!length || !uuid || *length <= d->uuid.size()) return INVAL;
  std::memcpy(uuid, d->uuid.c_str(), d->uuid.size() + 1);
  *length = static_cast<unsigned>(d->uuid.size());
  return SUCCESS;
}

EXPORT amdsmi_status_t amdsmi_get_gpu_device_bdf(amdsmi_processor_handle h, std::uint64_t* bdf) {
  Call c("amdsmi_get_gpu_device_bdf");
  Device* d = nullptr;
  if (auto rc = c.device(h, &d); rc != SUCCESS) return rc;
  unsigned long long domain = 0;
  unsigned bus = 0, dev = 0, fn = 0;
  std::sscanf(d->bdf.c_str(), "%llx:%x:%x.%x", &domain, &bus, &dev, &fn);
  *bdf = (fn & 7U) | ((dev & 0x1FU) << 3) | ((bus & 0xFFU) << 8) | (domain << 16);
  return SUCCESS;
}

EXPORT amdsmi_status_t amdsmi_get_gpu_asic_info(amdsmi_processor_handle h, void* info) {
  Call c("amdsmi_get_gpu_asic_info");
  Device* d = nullptr;
  if (auto rc = c.device(h, &d); rc != SUCCESS) return rc;
  asic_info_26x_t a{};
  write_name(a.market_name, d->name);
  a.vendor_id = 0x1002;
  // 6.2 and 26.x both start with char market_name[256]; the fake writes only what it declares.
  std::memcpy(info, &a, sizeof a.market_name + sizeof a.vendor_id);
  return SUCCESS;
}

EXPORT amdsmi_status_t amdsmi_get_gpu_activity(amdsmi_processor_handle h, engine_usage_t* u) {
  Call c("amdsmi_get_gpu_activity");
  Device* d = nullptr;
  if (auto rc = c.device(h, &d); rc != SUCCESS) return rc;
  *u = engine_usage_t{d->gfx, d->umc, d->mm, {}};
  return SUCCESS;
}

EXPORT amdsmi_status_t amdsmi_get_gpu_memory_total(amdsmi_processor_handle h, std::uint32_t type,
                                                   std::uint64_t* total) {
  Call c("amdsmi_get_gpu_memory_total");
  Device* d = nullptr;
  if (auto rc = c.device(h, &d); rc != SUCCESS) return rc;
  if (type == 0)
    *total = d->vram_total;
  else if (type == 2)
    *total = d->gtt_total;
  else
    return NOT_SUPPORTED;
  return SUCCESS;
}

EXPORT amdsmi_status_t amdsmi_get_gpu_memory_usage(amdsmi_processor_handle h, std::uint32_t type,
                                                   std::uint64_t* used) {
  Call c("amdsmi_get_gpu_memory_usage");
  Device* d = nullptr;
  if (auto rc = c.device(h, &d); rc != SUCCESS) return rc;
  if (type == 0)
    *used = d->vram_used;
  else if (type == 2)
    *used = d->gtt_used;
  else
    return NOT_SUPPORTED;
  return SUCCESS;
}

EXPORT amdsmi_status_t amdsmi_get_power_info(amdsmi_processor_handle h, void* info) {
  Call c("amdsmi_get_power_info");
  Device* d = nullptr;
  if (auto rc = c.device(h, &d); rc != SUCCESS) return rc;
  if (c.st.scenario.v6()) {
    const auto w = [](std::int64_t v) { return v < 0 ? 0xFFFFU : static_cast<std::uint32_t>(v); };
    power_info_6x_t p{};
    p.current_socket_power = w(d->current_power);
    p.average_socket_power = w(d->average_power);
    p.gfx_voltage = p.soc_voltage = p.mem_voltage = 0xFFFF;
    // power_limit is hwmon power1_cap: µW from 24.5.2 (ROCm 6.1.2) on, W (÷ 10^6) before.
    const auto& s = c.st.scenario;
    const bool microwatts = s.v0 > 24 || (s.v0 == 24 && (s.v1 > 5 || (s.v1 == 5 && s.v2 >= 2)));
    p.power_limit = d->power_limit < 0 ? 0xFFFFU
                    : microwatts       ? static_cast<std::uint32_t>(d->power_limit * 1000000)
                                       : static_cast<std::uint32_t>(d->power_limit);
    std::memcpy(info, &p, sizeof p);
  } else {
    const auto w = [](std::int64_t v) {
      return v < 0 ? 0xFFFFFFFFU : static_cast<std::uint32_t>(v);
    };
    power_info_26x_t p{};
    p.current_socket_power = w(d->current_power);
    p.average_socket_power = w(d->average_power);
    p.socket_power = d->current_power >= 0 ? d->current_power : w(d->average_power);
    p.gfx_voltage = p.soc_voltage = p.mem_voltage = 0xFFFFFFFFU;
    p.power_limit = w(d->power_limit);
    std::memcpy(info, &p, sizeof p);
  }
  return SUCCESS;
}

EXPORT amdsmi_status_t amdsmi_get_energy_count(amdsmi_processor_handle h, std::uint64_t* energy,
                                               float* resolution, std::uint64_t* timestamp) {
  Call c("amdsmi_get_energy_count");
  Device* d = nullptr;
  if (auto rc = c.device(h, &d); rc != SUCCESS) return rc;
  *energy = d->energy;
  *resolution = d->energy_resolution;
  *timestamp = 1712024507665ULL;
  return SUCCESS;
}

EXPORT amdsmi_status_t amdsmi_get_temp_metric(amdsmi_processor_handle h, std::uint32_t sensor,
                                              std::uint32_t metric, std::int64_t* temperature) {
  Call c("amdsmi_get_temp_metric");
  Device* d = nullptr;
  if (auto rc = c.device(h, &d); rc != SUCCESS) return rc;
  if (metric != 0) return NOT_SUPPORTED;  // AMDSMI_TEMP_CURRENT only
  const std::int64_t v = sensor == 0   ? d->temp_edge
                         : sensor == 1 ? d->temp_hotspot
                         : sensor == 2 ? d->temp_mem
                                       : -1;
  if (v < 0) return NOT_SUPPORTED;  // a negative scenario value: no such sensor
  *temperature = v;
  return SUCCESS;
}

EXPORT amdsmi_status_t amdsmi_get_clock_info(amdsmi_processor_handle h, std::uint32_t type,
                                             clk_info_t* info) {
  Call c("amdsmi_get_clock_info");
  Device* d = nullptr;
  if (auto rc = c.device(h, &d); rc != SUCCESS) return rc;
  if (type != 0 && type != 4) return NOT_SUPPORTED;  // GFX, MEM
  *info = clk_info_t{type == 0 ? d->clk_gfx : d->clk_mem, 500, 2500, 0, 0, {}};
  return SUCCESS;
}

EXPORT amdsmi_status_t amdsmi_get_gpu_fan_speed(amdsmi_processor_handle h, std::uint32_t,
                                                std::int64_t* speed) {
  Call c("amdsmi_get_gpu_fan_speed");
  Device* d = nullptr;
  if (auto rc = c.device(h, &d); rc != SUCCESS) return rc;
  *speed = d->fan;
  return SUCCESS;
}

EXPORT amdsmi_status_t amdsmi_get_gpu_fan_rpms(amdsmi_processor_handle h, std::uint32_t,
                                               std::int64_t* rpm) {
  Call c("amdsmi_get_gpu_fan_rpms");
  Device* d = nullptr;
  if (auto rc = c.device(h, &d); rc != SUCCESS) return rc;
  *rpm = d->fan_rpm;
  return SUCCESS;
}

EXPORT amdsmi_status_t amdsmi_get_gpu_process_list(amdsmi_processor_handle h,
                                                   std::uint32_t* max_processes, void* list) {
  Call c("amdsmi_get_gpu_process_list");
  Device* d = nullptr;
  if (auto rc = c.device(h, &d); rc != SUCCESS) return rc;
  if (!max_processes) return INVAL;
  if (c.st.scenario.process_pids())
    return fill_pids(*d, max_processes, static_cast<std::uint32_t*>(list));
  return c.st.scenario.v6() ? fill_processes<proc_info_6x_t>(*d, max_processes, list)
                            : fill_processes<proc_info_26x_t>(*d, max_processes, list);
}

// 23.4 and 24.5.0 only (later releases dropped it).
EXPORT amdsmi_status_t amdsmi_get_gpu_process_info(amdsmi_processor_handle h, std::uint32_t pid,
                                                   proc_info_6x_t* info) {
  Call c("amdsmi_get_gpu_process_info");
  Device* d = nullptr;
  if (auto rc = c.device(h, &d); rc != SUCCESS) return rc;
  if (!c.st.scenario.process_pids()) return NOT_SUPPORTED;
  if (!info) return INVAL;
  for (const auto& p : d->processes) {
    if (p.pid != pid) continue;
    *info = info_of<proc_info_6x_t>(p);
    return SUCCESS;
  }
  return 31;  // AMDSMI_STATUS_NOT_FOUND: the process ended
}

EXPORT amdsmi_status_t amdsmi_get_gpu_metrics_info(amdsmi_processor_handle h, void* metrics) {
  Call c("amdsmi_get_gpu_metrics_info");
  Device* d = nullptr;
  if (auto rc = c.device(h, &d); rc != SUCCESS) return rc;
  if (!metrics) return INVAL;
  gpu_metrics_v13_t m;
  std::memset(&m, 0xFF, sizeof m);
  m.structure_size = 0x100;
  m.format_revision = static_cast<std::uint8_t>(d->metrics_format);
  m.content_revision = static_cast<std::uint8_t>(d->metrics_content);
  m.temperature_edge = static_cast<std::uint16_t>(d->temp_edge);
  m.average_gfx_activity =
      static_cast<std::uint16_t>(d->metrics_gfx >= 0 ? d->metrics_gfx : std::int64_t{d->gfx});
  m.average_umc_activity =
      static_cast<std::uint16_t>(d->metrics_umc >= 0 ? d->metrics_umc : std::int64_t{d->umc});
  m.average_mm_activity = static_cast<std::uint16_t>(d->mm);
  m.throttle_status = static_cast<std::uint32_t>(d->throttle_status);
  m.indep_throttle_status = d->indep_throttle_status;
  // The whole struct of the release, as the library writes it.
  std::vector<unsigned char> full(c.st.scenario.gpu_metrics_size(), 0xFF);
  std::memcpy(full.data(), &m, sizeof m);
  std::memcpy(metrics, full.data(), full.size());
  return SUCCESS;
}
