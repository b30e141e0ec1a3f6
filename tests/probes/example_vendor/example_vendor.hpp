// example_vendor.hpp — a test-only probe: one folder and one row, as a vendor folder under
// probes/ would be, linked only into the probes test executable. Its row (example_probe_row())
// reaches make_probes, config_sections, the CLI's flags, `doctor`, `capture` and the row
// conformance checks through ExtraProbeRows (probes/registry_extra.hpp) alone: no product file
// names it.
//
// The probe reads <sysfs_root>/example/gpus (one line: how many GPUs) and reports that many
// devices with a utilization reading; its section "example" has one key, "count_file", which
// overrides that path (flag --example-count-file); its row asks for kExampleEnv=1 in the
// environment before threads start.
#pragma once

#include "gpustream/probes/registry.hpp"

namespace gpustream::test {

inline constexpr std::string_view kExampleProbe = "example";
/// The variable its row asks a program to set before threads start (its environment column).
inline constexpr const char* kExampleEnv = "GPUSTREAM_EXAMPLE_VENDOR_ENV";

/// The example vendor's row.
const ProbeRow& example_probe_row() noexcept;

}  // namespace gpustream::test
