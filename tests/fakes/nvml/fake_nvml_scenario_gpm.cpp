// Scenario keys of the fake NVML's GPM (fake_nvml_scenario.hpp, fake_nvml_gpm.cpp).
#include <string>

#include "fake_nvml_scenario.hpp"

namespace fake_nvml {

bool set_gpm(Device& d, const std::string& key, const std::string& v) {
  if (key == "gpm") {
    d.gpm = v == "1" || v == "true";
  } else if (key.rfind("gpm.", 0) == 0) {
    d.gpm_rate[static_cast<unsigned>(std::stoul(key.substr(4)))] = std::stod(v);
  } else if (key.rfind("gpm_fail.", 0) == 0) {
    d.gpm_fail[static_cast<unsigned>(std::stoul(key.substr(9)))] = code_of_name(v);
  } else {
    return false;
  }
  return true;
}

}  // namespace fake_nvml
