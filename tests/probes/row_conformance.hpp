// row_conformance.hpp — the contract every registry row answers, whatever its probe: checked by
// conformance_test.cpp over probe_rows() (and by a test that adds a row of its own, the same
// way). The vendor-specific contract (readings, energy, processes) is conformance_test.cpp's
// table of fake-driven runners.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "gpustream/probes/capture.hpp"
#include "gpustream/probes/doctor.hpp"
#include "gpustream/probes/registry.hpp"
#include "probe_harness.hpp"

namespace gpustream::test {

/// One row: its name is known and its section a config section; its factory builds, with
/// `config`, a probe of its name and kind whose detection is usable or says why not, and whose
/// sample names only detected devices; its doctor checks (if any) report under its name; its
/// capture sources (if any) name tools by the setting of its own section.
inline void check_row_conforms(const ProbeRow& row, const Config& config) {
  SCOPED_TRACE(std::string(row.name));
  EXPECT_TRUE(is_known_probe(row.name));
  if (!row.section.empty()) {
    const auto sections = config_sections();
    EXPECT_NE(std::find(sections.begin(), sections.end(), row.section), sections.end());
  }
  for (const auto& f : row.flags) {
    EXPECT_EQ(f.flag.substr(0, 2), "--");
    EXPECT_FALSE(f.key.empty());
    EXPECT_FALSE(row.section.empty()) << f.flag << ": a flag sets a key of the row's section";
  }
  if (row.read_settings) EXPECT_NO_THROW(row.read_settings(config));

  ProbeHarness h;
  auto probe = row.factory(config, h.executors());
  ASSERT_NE(probe, nullptr);
  EXPECT_EQ(probe->name(), row.name);
  EXPECT_EQ(probe->kind(), row.kind);
  const auto detection = h.detect(*probe);
  if (!detection.available) {
    EXPECT_FALSE(detection.reason.empty()) << "unavailable without a reason";
  } else {
    std::set<std::string> ids;
    for (const auto& d : detection.devices) {
      EXPECT_FALSE(d.id.empty());
      EXPECT_TRUE(ids.insert(d.id).second) << d.id << " twice";
    }
    const auto s = h.sample(*probe);
    for (const auto& d : s.snapshot.devices) EXPECT_TRUE(ids.contains(d.id)) << d.id;
  }
  probe->cancel();

  if (row.doctor) {
    doctor::Options o;
    o.paths = config.paths;
    o.probe_settings = config.probe_settings;
    o.probes = {std::string(row.name)};
    o.tool_timeout = std::chrono::milliseconds{2000};
    o.getenv = [](std::string_view) { return std::optional<std::string>{}; };
    const auto report = doctor::run(o);
    ASSERT_EQ(report.probes.size(), 1u);
    EXPECT_EQ(report.probes.front(), row.name);
    EXPECT_FALSE(report.findings.empty());
    for (const auto& f : report.findings) EXPECT_EQ(f.probe, row.name) << f.check;
  }
  if (row.capture) {
    capture::Sources s;
    row.capture(s, config);
    for (const auto& t : s.tools)
      EXPECT_EQ(t.setting.substr(0, row.section.size() + 1), std::string(row.section) + ".")
          << t.tool;
    for (const auto& f : s.replay_flags) {
      bool own = false;
      for (const auto& flag : row.flags) own = own || flag.flag == f.flag;
      EXPECT_TRUE(own) << f.flag << ": a replay sets one of the row's own flags";
    }
  }
}

}  // namespace gpustream::test
