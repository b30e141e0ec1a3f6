// Human-readable rendering of snapshots for the terminal (watch, replay).
#pragma once

#include <string>
#include <vector>

#include "gpustream/events.hpp"
#include "gpustream/model.hpp"

namespace gpustream::cli {

/// One line per device (and one for the host part), aligned columns; an absent metric is "-".
std::string format_table(const std::vector<const GpuSnapshot*>& snapshots);

/// The header line matching format_table's columns.
std::string table_header();

/// "12.3 GiB", "512 MiB" ...
std::string human_bytes(double bytes);

/// One GPU event on one line (no '\n'): its time (UTC, milliseconds), device, kind and detail,
/// then its sequence number and probe:
///   "2026-11-26T09:00:00.123Z GPU-8f6c... xid 79 (#7, nvidia)"
/// The detail is the Xid number (xid), the clocks-event reasons mask in hex (clock_event), the
/// vendor's event type bits in hex (other), or the data when another kind has one.
std::string event_line(const GpuEvent& e);

}  // namespace gpustream::cli
