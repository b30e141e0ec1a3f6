// gpustream/logging_spdlog.hpp — route the SDK's log lines into a host program's spdlog sink.
//
//   auto sink = my_logger->sinks().front();
//   gpustream::set_log_sink(sink);   // lines keep their time and level; logger name "gpustream"
//
// The sink receives every line at or above the SDK's level (gpustream/logging.hpp) that also
// passes the sink's own level. It replaces the callback or the default stderr output; a null
// sink restores the default. Thread safety: as set_log_callback (spdlog's *_mt sinks are).
#pragma once

#include <memory>

#include <spdlog/sinks/sink.h>

#include "gpustream/logging.hpp"

namespace gpustream {

void set_log_sink(std::shared_ptr<spdlog::sinks::sink> sink);

}  // namespace gpustream
