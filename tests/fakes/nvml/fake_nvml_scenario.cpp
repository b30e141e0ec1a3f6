#include "fake_nvml_scenario.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace fake_nvml {
namespace {

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return {};
  const auto e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

int code_of(std::string v) {
  if (v.rfind("NVML_ERROR_", 0) == 0) v = v.substr(11);
  static const std::map<std::string, int> kCodes = {
      {"UNINITIALIZED", 1},       {"INVALID_ARGUMENT", 2}, {"NOT_SUPPORTED", 3},
      {"NO_PERMISSION", 4},       {"NOT_FOUND", 6},        {"INSUFFICIENT_SIZE", 7},
      {"DRIVER_NOT_LOADED", 9},   {"TIMEOUT", 10},         {"LIBRARY_NOT_FOUND", 12},
      {"FUNCTION_NOT_FOUND", 13}, {"GPU_IS_LOST", 15},     {"UNKNOWN", 999}};
  if (auto it = kCodes.find(v); it != kCodes.end()) return it->second;
  return std::stoi(v);
}

std::vector<Process> processes(const std::string& v) {
  std::vector<Process> out;
  std::stringstream ss(v);
  std::string item;
  while (std::getline(ss, item, ',')) {
    item = trim(item);
    if (item.empty()) continue;
    const auto colon = item.find(':');
    Process p;
    p.pid = static_cast<unsigned>(std::stoul(item.substr(0, colon)));
    const auto mem = colon == std::string::npos ? std::string("0") : item.substr(colon + 1);
    p.memory = mem == "na" ? ~0ULL : std::stoull(mem);
    out.push_back(p);
  }
  return out;
}

std::vector<ProcessUtil> utils(const std::string& v) {
  std::vector<ProcessUtil> out;
  std::stringstream ss(v);
  std::string item;
  while (std::getline(ss, item, ',')) {
    unsigned pid = 0, sm = 0, mem = 0;
    if (std::sscanf(item.c_str(), "%u:%u:%u", &pid, &sm, &mem) >= 2) out.push_back({pid, sm, mem});
  }
  return out;
}

void defaults(Device& d, unsigned i) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "GPU-0000000%u-fake-4000-8000-%012u", i, 4242 + i);
  d.uuid = buf;
  d.name = "NVIDIA Fake GPU " + std::to_string(i);
  std::snprintf(buf, sizeof buf, "00000000:%02X:00.0", 0x17 + i);
  d.pci = buf;
  d.memory_total = 80ULL << 30;
  d.memory_used = (1ULL << 30) * (i + 1);
  d.memory_reserved = 512ULL << 20;
  d.util_gpu = 10 + i;
  d.util_memory = 5 + i;
  d.temperature = 40 + i;
  d.power_mw = 100000 + 1000 * i;
  d.power_limit_mw = 300000;
  d.energy_mj = 5000000 + i;
  d.clock_graphics = 1400;
  d.clock_sm = 1410;
  d.clock_memory = 1593;
  d.fan = 30;
  d.clock_reasons = 0;
}

bool set_device(Device& d, const std::string& key, const std::string& v) {
  if (key.rfind("fail.", 0) == 0) {
    d.fail[key.substr(5)] = code_of(v);
    return true;
  }
  static const std::map<std::string, unsigned Device::*> kUints = {
      {"util_gpu", &Device::util_gpu},
      {"util_memory", &Device::util_memory},
      {"temperature", &Device::temperature},
      {"power_mw", &Device::power_mw},
      {"power_limit_mw", &Device::power_limit_mw},
      {"clock_graphics", &Device::clock_graphics},
      {"clock_sm", &Device::clock_sm},
      {"clock_memory", &Device::clock_memory},
      {"fan", &Device::fan}};
  static const std::map<std::string, unsigned long long Device::*> kUlls = {
      {"memory_total", &Device::memory_total},
      {"memory_used", &Device::memory_used},
      {"memory_reserved", &Device::memory_reserved},
      {"energy_mj", &Device::energy_mj}};
  if (auto it = kUints.find(key); it != kUints.end()) {
    d.*(it->second) = static_cast<unsigned>(std::stoul(v));
  } else if (auto it2 = kUlls.find(key); it2 != kUlls.end()) {
    d.*(it2->second) = std::stoull(v);
  } else if (key == "clock_reasons") {
    d.clock_reasons = std::stoull(v, nullptr, 0);
  } else if (key == "architecture") {
    d.architecture = static_cast<unsigned>(std::stoul(v));
  } else if (key == "pci_device_id") {
    d.pci_device_id = static_cast<unsigned>(std::stoul(v, nullptr, 0));
  } else if (key == "power_instant_mw") {
    d.power_instant_mw = static_cast<unsigned>(std::stoul(v));
  } else if (key == "power_average_mw") {
    d.power_average_mw = static_cast<unsigned>(std::stoul(v));
  } else if (key == "supported_events") {
    d.supported_events = std::stoull(v, nullptr, 0);
  } else if (key == "uuid") {
    d.uuid = v;
  } else if (key == "name") {
    d.name = v;
  } else if (key == "pci") {
    d.pci = v;
  } else if (key == "compute") {
    d.compute = processes(v);
  } else if (key == "graphics") {
    d.graphics = processes(v);
  } else if (key == "process_util") {
    d.process_util = utils(v);
  } else if (key == "lost_after") {
    d.lost_after = std::stol(v);
  } else if (key == "power_curve") {
    PowerCurve c;
    const auto a = v.find(':'), b = v.find(':', a == std::string::npos ? a : a + 1);
    if (a == std::string::npos || b == std::string::npos) return false;
    c.base_mw = std::stod(v.substr(0, a));
    c.amplitude_mw = std::stod(v.substr(a + 1, b - a - 1));
    c.period_ms = std::stod(v.substr(b + 1));
    if (!(c.period_ms > 0)) return false;
    d.power_curve = c;
  } else {
    return false;
  }
  return true;
}

bool set_device(Device& d, unsigned index, const std::string& key, const std::string& v) {
  return set_device(d, key, v) || set_mig(d, index, key, v) || set_health(d, key, v) ||
         set_gpm(d, key, v) || set_power_samples(d, key, v);
}

}  // namespace

double PowerCurve::power_mw(long long t_ns) const {
  const double w = 2 * 3.14159265358979323846 / (period_ms * 1e-3);
  return base_mw + amplitude_mw * std::sin(w * static_cast<double>(t_ns) * 1e-9);
}

double PowerCurve::energy_mj(long long t_ns) const {
  const double w = 2 * 3.14159265358979323846 / (period_ms * 1e-3);
  const double t = static_cast<double>(t_ns) * 1e-9;
  return base_mw * t + amplitude_mw / w * (1 - std::cos(w * t));
}

int code_of_name(const std::string& v) { return code_of(v); }

Scenario parse_scenario(const std::string& text, std::string* error) {
  Scenario s;
  std::vector<std::pair<std::string, std::string>> entries;
  std::stringstream ss(text);
  std::string line;
  unsigned devices = 1, per_device = 0;
  while (std::getline(ss, line)) {
    line = trim(line.substr(0, line.find('#')));
    if (line.empty()) continue;
    const auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    entries.emplace_back(trim(line.substr(0, eq)), trim(line.substr(eq + 1)));
  }
  try {
    for (const auto& [k, v] : entries)
      if (k == "devices") devices = static_cast<unsigned>(std::stoul(v));
    s.devices.resize(devices);
    for (unsigned i = 0; i < devices; ++i) defaults(s.devices[i], i);
    for (const auto& [k, v] : entries) {
      if (k == "devices") continue;
      if (k == "process_stride") {
        s.process_stride = static_cast<unsigned>(std::stoul(v));
      } else if (k == "processes_per_device") {
        per_device = static_cast<unsigned>(std::stoul(v));
      } else if (k == "call_delay_us") {
        s.call_delay_us = std::stol(v);
      } else if (k == "call_cost_ns") {
        s.call_cost_ns = std::stol(v);
      } else if (k == "init_fail") {
        s.init_fail = code_of(v);
      } else if (k == "driver_version") {
        s.driver_version = v;
      } else if (k == "event_trigger") {
        s.event_trigger = v;
      } else if (k == "real_clock") {
        s.real_clock = v == "1" || v == "true";
      } else if (k == "rotate_on_init") {
        s.rotate_on_init = v == "1" || v == "true";
      } else if (k == "gpm_version") {
        s.gpm_version = static_cast<unsigned>(std::stoul(v));
      } else if (k == "gpm_metrics_version") {
        s.gpm_metrics_version = static_cast<unsigned>(std::stoul(v));
      } else if (k.rfind("fail.", 0) == 0) {
        s.fail[k.substr(5)] = code_of(v);
      } else if (k.rfind("device.", 0) == 0) {
        const auto dot = k.find('.', 7);
        const auto index = std::stoul(k.substr(7, dot - 7));
        if (index >= s.devices.size() || dot == std::string::npos ||
            !set_device(s.devices[index], static_cast<unsigned>(index), k.substr(dot + 1), v)) {
          if (error) *error += "bad key " + k + "; ";
        }
      } else if (error) {
        *error += "unknown key " + k + "; ";
      }
    }
  } catch (const std::exception& e) {
    if (error) *error += std::string("bad value: ") + e.what() + "; ";
  }
  for (unsigned i = 0; i < s.devices.size() && per_device > 0; ++i) {
    auto& d = s.devices[i];
    for (unsigned k = 0; k < per_device; ++k) {
      const unsigned pid = 100000 + 1000 * i + k;
      d.compute.push_back({pid, (k + 1ULL) << 20});
      d.process_util.push_back({pid, k % 100, k % 50});
    }
  }
  return s;
}

Scenario load_scenario(std::string* error) {
  const char* path = std::getenv("GPUSTREAM_FAKE_NVML_SCENARIO");
  if (!path || !*path) return parse_scenario("", error);
  std::ifstream in(path);
  if (!in) {
    if (error) *error = std::string("cannot open ") + path;
    return parse_scenario("", error);
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_scenario(ss.str(), error);
}

}  // namespace fake_nvml
