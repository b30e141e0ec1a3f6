// gpustream/log.hpp — the SDK's logger (for the SDK's own code and probes) and the "log once"
// helper. Host programs use gpustream/logging.hpp (level, callback) or
// gpustream/logging_spdlog.hpp (an spdlog sink) instead.
//
// All SDK logging goes through one spdlog logger named "gpustream", created on first use and
// not registered with spdlog (the host's spdlog::set_level does not change it). Its level is
// warn until set_log_level or a Telemetry with Config::log_level says otherwise. A host program
// that registered its own spdlog logger named "gpustream" before first use gets the lines in
// that logger's sinks by default. LogOnce is in gpustream/log_once.hpp (standard library only).
#pragma once

#include <memory>
#include <string>

#include <spdlog/spdlog.h>

#include "gpustream/log_once.hpp"

namespace gpustream {

std::shared_ptr<spdlog::logger> logger();

/// Sets the level of the gpustream logger from a name (see log_level_from_string).
/// Returns false for an unknown name.
bool set_log_level(const std::string& level);

}  // namespace gpustream
