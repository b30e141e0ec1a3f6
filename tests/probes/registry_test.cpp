#include "gpustream/probes/registry.hpp"

#include <gtest/gtest.h>
#include <boost/json/parse.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "gpustream/config_json.hpp"
#include "gpustream/probes/simulated_probe.hpp"
#include "probe_harness.hpp"
#include "support/temp_tree.hpp"

namespace gpustream {
namespace {

using test::ProbeHarness;

std::vector<std::string> names_of(const ProbeSet& set) {
  std::vector<std::string> out;
  for (const auto& p : set.probes) out.emplace_back(p->name());
  return out;
}

TEST(Registry, KnowsSixProbesEachWithItsRow) {
  const auto known = known_probe_names();
  EXPECT_EQ(
      std::vector<std::string_view>(known.begin(), known.end()),
      (std::vector<std::string_view>{"nvidia", "amd", "intel", "apple", "host", "simulated"}));
  EXPECT_TRUE(is_known_probe("nvidia"));
  EXPECT_FALSE(is_known_probe("bogus"));
  for (const auto& row : probe_rows()) {
    EXPECT_TRUE(is_known_probe(row.name)) << row.name;
    EXPECT_FALSE(row.description.empty());
    EXPECT_NE(row.factory, nullptr);
    EXPECT_EQ(find_probe_row(row.name), &row);
  }
  EXPECT_EQ(find_probe_row("bogus"), nullptr);
}

TEST(Registry, EmptyListBuildsEveryImplementedProbeButSimulated) {
  ProbeHarness h;
  Config config;
  const auto set = make_probes(config, h.executors());
  EXPECT_TRUE(set.errors.empty());
  const auto names = names_of(set);
  EXPECT_NE(std::find(names.begin(), names.end(), "host"), names.end());
  EXPECT_EQ(std::find(names.begin(), names.end(), "simulated"), names.end());
  EXPECT_EQ(names.size(), probe_rows().size() - 1);
}

TEST(Registry, SimulateAddsTheSimulatedProbeWithThatManyGpusAndSeed) {
  ProbeHarness h;
  Config config;
  config.simulate = 3;
  config.seed = 77;
  const auto set = make_probes(config, h.executors());
  EXPECT_TRUE(set.errors.empty());
  const auto names = names_of(set);
  ASSERT_EQ(names.back(), "simulated");
  const auto d = h.detect(*set.probes.back());
  ASSERT_EQ(d.devices.size(), 3u);
  EXPECT_EQ(d.devices[0].id, simulated_device_id(77, 0));

  config.probes = {"host"};  // --simulate adds to an explicit list too
  EXPECT_EQ(names_of(make_probes(config, h.executors())),
            (std::vector<std::string>{"host", "simulated"}));
}

TEST(Registry, ExplicitSimulatedWithoutCountGetsOneGpu) {
  ProbeHarness h;
  Config config;
  config.probes = {"simulated"};
  const auto set = make_probes(config, h.executors());
  ASSERT_EQ(set.probes.size(), 1u);
  EXPECT_EQ(h.detect(*set.probes[0]).devices.size(), 1u);
}

TEST(Registry, BuildsRequestedNamesInOrderAndExplainsTheRest) {
  ProbeHarness h;
  Config config;
  config.probes = {"simulated", "nvidia", "host", "bogus", "host"};
  const auto set = make_probes(config, h.executors());
  // Duplicates are dropped, order is kept.
  EXPECT_EQ(names_of(set), (std::vector<std::string>{"simulated", "nvidia", "host"}));
  EXPECT_EQ(set.errors, std::vector<std::string>{
                            "unknown probe 'bogus' (known: nvidia, amd, intel, apple, host, "
                            "simulated)"});
}

TEST(Registry, FactoryErrorsBecomeMessages) {
  ProbeHarness h;
  Config config;
  config.probes = {"host"};
  config.simulate = 100000;
  const auto set = make_probes(config, h.executors());
  EXPECT_EQ(names_of(set), std::vector<std::string>{"host"});
  ASSERT_EQ(set.errors.size(), 1u);
  EXPECT_EQ(set.errors[0].rfind("probe 'simulated': ", 0), 0u) << set.errors[0];
}

TEST(Registry, HostProbeGetsPathsAndWatchedPidsFromConfig) {
  test::TempTree tree;
  tree.file("proc/meminfo", "MemTotal: 100 kB\nMemAvailable: 40 kB\n");
  tree.file("proc/10/status", "Name:\tme\nVmRSS:\t 1 kB\n");
  tree.file("proc/20/status", "Name:\twatched\nVmRSS:\t 2 kB\n");
  tree.symlink("proc/self", "10");
  ProbeHarness h;
  Config config;
  config.probes = {"host"};
  config.paths.procfs_root = tree.path("proc");
  config.watch_pids = {20};
  const auto set = make_probes(config, h.executors());
  ASSERT_EQ(set.probes.size(), 1u);
  const auto r = h.sample(*set.probes[0]);
  ASSERT_FALSE(r.ec);
  ASSERT_TRUE(r.snapshot.host);
  EXPECT_EQ(r.snapshot.host->memory_used_bytes, 60u * 1024);
  ASSERT_EQ(r.snapshot.host->processes.size(), 2u);
  EXPECT_EQ(r.snapshot.host->processes[1].name, "watched");
}

TEST(Registry, MisspeltOrMistypedProbeSettingsAreErrorsNotIgnored) {
  ProbeHarness h;
  const auto error_for = [&](const char* probe, ProbeSettings::Section section) {
    Config c;
    c.probes = {probe};
    c.probe_settings[probe] = std::move(section);
    const auto set = make_probes(c, h.executors());
    EXPECT_TRUE(set.probes.empty()) << probe;
    return set.errors.empty() ? std::string() : set.errors[0];
  };
  EXPECT_EQ(error_for("amd", {{"sourc", "sysfs"}}),
            "probe 'amd': amd.sourc: unknown setting (known: source, library, amd_smi, rocm_smi, "
            "amdgpu_ids, process_freshness_ms, process_fd_count_ms, process_sweep_ms)");
  EXPECT_EQ(error_for("amd", {{"process_freshness_ms", 0}}),
            "probe 'amd': amd.process_freshness_ms: expected a positive integer");
  EXPECT_EQ(error_for("amd", {{"process_sweep_ms", 0}}),
            "probe 'amd': amd.process_sweep_ms: expected a positive integer");
  EXPECT_EQ(error_for("amd", {{"process_fd_count_ms", "30 s"}}),
            "probe 'amd': amd.process_fd_count_ms: expected a positive integer");
  EXPECT_EQ(error_for("amd", {{"amd_smi", 7}}),
            "probe 'amd': amd.amd_smi: expected a non-empty string");
  EXPECT_EQ(error_for("intel", {{"process_freshness_ms", -1}}),
            "probe 'intel': intel.process_freshness_ms: expected a positive integer");
  EXPECT_EQ(error_for("intel", {{"process_sweep_ms", -5}}),
            "probe 'intel': intel.process_sweep_ms: expected a positive integer");
  EXPECT_EQ(error_for("intel", {{"process_fd_count_ms", 0}}),
            "probe 'intel': intel.process_fd_count_ms: expected a positive integer");
  EXPECT_EQ(error_for("intel", {{"level_zero", "x"}}),
            "probe 'intel': intel.level_zero: unknown setting (known: level_zero_library, "
            "process_freshness_ms, process_fd_count_ms, process_sweep_ms)");
  EXPECT_EQ(error_for("host", {{"interval", 1}}),
            "probe 'host': host.interval: unknown setting (known: none)");
  EXPECT_EQ(error_for("simulated", {{"x", 1}}),
            "probe 'simulated': simulated.x: unknown setting (known: none)");
}

TEST(Registry, EachRowsKindSectionAndFlagsAreWhatItsProbeAndConfigUse) {
  // The SDK asks a probe its kind(); the registry row must say the same, since the CLI and the
  // default probe list go by the row.
  ProbeHarness h;
  for (const auto& row : probe_rows()) {
    Config c;
    c.probes = {std::string(row.name)};
    const auto set = make_probes(c, h.executors());
    ASSERT_EQ(set.probes.size(), 1u) << row.name;
    EXPECT_EQ(set.probes[0]->name(), row.name);
    EXPECT_EQ(set.probes[0]->kind(), row.kind) << row.name;
    for (const auto& f : row.flags) {
      EXPECT_EQ(f.flag.rfind("--", 0), 0u) << f.flag;
      EXPECT_FALSE(f.help.empty()) << f.flag;
      // A flag's key is a setting its probe accepts: a bad value is reported for that key
      // (a misspelt or unknown key would say "unknown setting").
      c.probe_settings.erase(row.section);
      c.probe_settings.set(row.section, f.key, 7);
      const auto bad = make_probes(c, h.executors());
      ASSERT_EQ(bad.errors.size(), 1u) << f.flag;
      EXPECT_EQ(bad.errors[0].find("unknown setting"), std::string::npos) << bad.errors[0];
      EXPECT_NE(bad.errors[0].find(std::string(row.section) + "." + std::string(f.key)),
                std::string::npos)
          << bad.errors[0];
    }
  }
  const auto flags_of = [](std::string_view name) {
    std::vector<std::string_view> out;
    for (const auto& f : find_probe_row(name)->flags) out.push_back(f.flag);
    return out;
  };
  EXPECT_EQ(flags_of("nvidia"), (std::vector<std::string_view>{"--nvml-library", "--nvidia-smi"}));
  EXPECT_EQ(find_probe_row("host")->kind, ProbeKind::host);
  EXPECT_EQ(find_probe_row(kSimulatedProbe)->kind, ProbeKind::simulated);
}

TEST(Registry, SectionsAndDefaultsComeFromTheRows) {
  EXPECT_EQ(config_sections(),
            (ConfigSections{"nvidia", "amd", "intel", "apple", "host", "simulated"}));
  EXPECT_EQ(default_probe_names(),
            (std::vector<std::string>{"nvidia", "amd", "intel", "apple", "host"}));
  EXPECT_EQ(known_probe_list(), "nvidia, amd, intel, apple, host, simulated");
  // Strict parsing with the registry's sections: a misspelt section is an error naming them.
  try {
    config_from_json(boost::json::parse(R"({"nvdia": {"library": "x"}})"), {}, config_sections());
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("'nvdia': unknown key"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("sections: nvidia, amd"), std::string::npos) << e.what();
  }
  const auto c = config_from_json(boost::json::parse(R"({"amd": {"source": "sysfs"}})"), {},
                                  config_sections());
  EXPECT_TRUE(c.probe_settings.contains("amd"));
}

TEST(Registry, DescribesEveryKnownProbe) {
  const auto all = describe_probes();
  ASSERT_EQ(all.size(), known_probe_names().size());
  for (const auto& d : all) {
    ASSERT_NE(find_probe_row(d.name), nullptr) << d.name;
    EXPECT_EQ(d.description, find_probe_row(d.name)->description);
  }
  const auto text = describe_probes_text();
  for (auto name : known_probe_names())
    EXPECT_NE(text.find(std::string(name) + " "), std::string::npos) << name;
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'),
            static_cast<long>(known_probe_names().size()));
}

}  // namespace
}  // namespace gpustream
