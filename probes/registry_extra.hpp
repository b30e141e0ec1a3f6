// registry_extra.hpp — for tests (private, never installed): a test-only probe's row added to the
// table after the product's own rows, so that it is picked up everywhere a row is (make_probes,
// config_sections, the CLI's flags, `doctor`, `capture`) with no product file naming it.
#pragma once

#include <span>

#include "gpustream/probes/registry.hpp"

namespace gpustream {

/// Adds `rows` after the product's rows until destroyed. Not thread-safe: create it before
/// anything reads the table, destroy it after; the rows must outlive it. One at a time.
class ExtraProbeRows {
 public:
  explicit ExtraProbeRows(std::span<const ProbeRow> rows);
  ~ExtraProbeRows();
  ExtraProbeRows(const ExtraProbeRows&) = delete;
  ExtraProbeRows& operator=(const ExtraProbeRows&) = delete;
};

}  // namespace gpustream
