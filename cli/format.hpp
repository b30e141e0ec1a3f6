// Human-readable rendering of snapshots for the terminal (watch, replay).
#pragma once

#include <string>
#include <vector>

#include "gpustream/model.hpp"

namespace gpustream::cli {

/// One line per device (and one for the host part), aligned columns; an absent metric is "-".
std::string format_table(const std::vector<const GpuSnapshot*>& snapshots);

/// The header line matching format_table's columns.
std::string table_header();

/// "12.3 GiB", "512 MiB" ...
std::string human_bytes(double bytes);

}  // namespace gpustream::cli
