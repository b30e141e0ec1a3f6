// Scenario keys of the fake NVML's MIG instances and interconnect/health counters
// (fake_nvml_scenario.hpp).
#include <cstdio>
#include <sstream>

#include "fake_nvml_scenario.hpp"

namespace fake_nvml {

bool set_mig(Device& d, unsigned device_index, const std::string& key, const std::string& v) {
  if (key == "mig_mode") {
    d.mig_mode = std::stoi(v);
  } else if (key == "mig_pending") {
    d.mig_pending = std::stoi(v);
  } else if (key == "max_mig") {
    d.max_mig = static_cast<unsigned>(std::stoul(v));
  } else if (key.rfind("mig.", 0) == 0) {
    const auto dot = key.find('.', 4);
    if (dot == std::string::npos) return false;
    const auto k = std::stoul(key.substr(4, dot - 4));
    if (k >= 64) return false;
    if (d.mig.size() <= k) d.mig.resize(k + 1);
    if (!d.mig[k]) {
      MigInstance m;
      char buf[64];
      std::snprintf(buf, sizeof buf, "MIG-%08u-fake-4000-8000-%012lu", device_index, k);
      m.uuid = buf;
      m.gi = static_cast<unsigned>(k + 1);
      m.ci = 0;
      d.mig[k] = m;
    }
    auto& m = *d.mig[k];
    const auto field = key.substr(dot + 1);
    if (field == "gi")
      m.gi = static_cast<unsigned>(std::stoul(v));
    else if (field == "ci")
      m.ci = static_cast<unsigned>(std::stoul(v));
    else if (field == "profile")
      m.profile = v;
    else if (field == "uuid")
      m.uuid = v;
    else if (field == "memory_total")
      m.memory_total = std::stoull(v);
    else if (field == "memory_used")
      m.memory_used = std::stoull(v);
    else if (field == "compute") {
      m.compute.clear();
      std::stringstream ss(v);
      for (std::string item; std::getline(ss, item, ',');) {
        unsigned pid = 0;
        unsigned long long bytes = 0;
        if (std::sscanf(item.c_str(), "%u:%llu", &pid, &bytes) == 2)
          m.compute.push_back({pid, bytes});
      }
    } else if (field.rfind("gpm.", 0) == 0) {
      m.gpm_rate[static_cast<unsigned>(std::stoul(field.substr(4)))] = std::stod(v);
    } else {
      return false;
    }
  } else {
    return false;
  }
  return true;
}

bool set_health(Device& d, const std::string& key, const std::string& v) {
  auto& h = d.health;
  static const std::map<std::string, unsigned Health::*> kUints = {
      {"pcie_rx_kb", &Health::pcie_rx_kb},
      {"pcie_tx_kb", &Health::pcie_tx_kb},
      {"pcie_gen", &Health::pcie_gen},
      {"pcie_gen_max", &Health::pcie_gen_max},
      {"pcie_width", &Health::pcie_width},
      {"pcie_width_max", &Health::pcie_width_max},
      {"retired_single", &Health::retired_single},
      {"retired_double", &Health::retired_double},
      {"retired_pending", &Health::retired_pending},
      {"remapped_corrected", &Health::remapped_corrected},
      {"remapped_uncorrected", &Health::remapped_uncorrected},
      {"remapped_pending", &Health::remapped_pending},
      {"remapped_failure", &Health::remapped_failure},
      {"nvlinks", &Health::nvlinks}};
  static const std::map<std::string, int> kEcc = {{"ecc_corrected_volatile", 0},
                                                  {"ecc_uncorrected_volatile", 1},
                                                  {"ecc_corrected_aggregate", 2},
                                                  {"ecc_uncorrected_aggregate", 3}};
  if (auto it = kUints.find(key); it != kUints.end()) {
    h.*(it->second) = static_cast<unsigned>(std::stoul(v));
  } else if (auto e = kEcc.find(key); e != kEcc.end()) {
    h.ecc[e->second] = std::stoull(v);
  } else if (key == "nvlink_active") {
    h.nvlink_active = static_cast<unsigned>(std::stoul(v, nullptr, 0));
  } else if (key == "nvlink_rx_kib") {
    h.nvlink_rx_kib = std::stoull(v);
  } else if (key == "nvlink_tx_kib") {
    h.nvlink_tx_kib = std::stoull(v);
  } else {
    return false;
  }
  return true;
}

}  // namespace fake_nvml
