// The test-only example vendor (example_vendor.hpp): its row alone brings it into the registry,
// the config loader, the CLI's flags, `doctor`, `capture` and the row conformance checks.
#include "example_vendor.hpp"

#include <gtest/gtest.h>

#include <stdlib.h>

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gpustream/config.hpp"
#include "gpustream/probes/capture.hpp"
#include "gpustream/probes/doctor.hpp"
#include "registry_extra.hpp"
#include "row_conformance.hpp"
#include "support/temp_tree.hpp"

namespace gpustream {
namespace {

class ExampleVendor : public ::testing::Test {
 protected:
  ExampleVendor() {
    tree.file("sys/example/gpus", "2\n");
    tree.dir("proc");
    tree.dir("dev");
    config.paths = {.sysfs_root = tree.path("sys"),
                    .procfs_root = tree.path("proc"),
                    .devfs_root = tree.path("dev")};
  }

  test::TempTree tree;
  Config config;
  const ProbeRow rows[1] = {test::example_probe_row()};
  ExtraProbeRows extra{rows};
};

TEST_F(ExampleVendor, IsARowOfTheTable) {
  EXPECT_TRUE(is_known_probe(test::kExampleProbe));
  EXPECT_EQ(probe_rows().back().name, test::kExampleProbe);
  EXPECT_NE(known_probe_list().find("example"), std::string::npos);
  const auto defaults = default_probe_names();
  EXPECT_NE(std::find(defaults.begin(), defaults.end(), "example"), defaults.end());
  EXPECT_NE(describe_probes_text().find("a test-only example vendor"), std::string::npos);
}

TEST_F(ExampleVendor, MakeProbesBuildsIt) {
  config.probes = {"example"};
  auto set = make_probes(config, {});
  EXPECT_TRUE(set.errors.empty());
  ASSERT_EQ(set.probes.size(), 1u);
  EXPECT_EQ(set.probes.front()->name(), "example");
}

// The CLI adds one option per flag of every row (cli/options.cpp) and reads the config file with
// config_sections(): both come from the row.
TEST_F(ExampleVendor, ItsSectionAndFlagsComeFromItsRow) {
  const auto sections = config_sections();
  EXPECT_NE(std::find(sections.begin(), sections.end(), "example"), sections.end());
  const auto* row = find_probe_row("example");
  ASSERT_NE(row, nullptr);
  ASSERT_EQ(row->flags.size(), 1u);
  EXPECT_EQ(row->flags.front().flag, "--example-count-file");

  tree.file("config.json", R"({"example": {"count_file": "/nowhere"}})");
  const auto loaded = load_config(tree.path("config.json"), Config{}, sections);
  ASSERT_NE(loaded.probe_settings.get("example", "count_file"), nullptr);
  EXPECT_EQ(*loaded.probe_settings.get("example", "count_file")->if_string(), "/nowhere");
  tree.file("typo.json", R"({"exampel": {"count_file": "/nowhere"}})");
  EXPECT_THROW(load_config(tree.path("typo.json"), Config{}, sections), ConfigError);

  // Its one reader: a misspelt key is an error where the probe, doctor and capture read it.
  Config bad = config;
  bad.probe_settings.set("example", "count_fil", "/x");
  EXPECT_THROW(row->read_settings(bad), std::invalid_argument);
  EXPECT_THROW(doctor::options_from_config(bad), std::invalid_argument);
}

TEST_F(ExampleVendor, DoctorRunsItsChecks) {
  auto o = doctor::options_from_config(config);
  o.probes = {"example"};
  auto report = doctor::run(o);
  ASSERT_EQ(report.probes, std::vector<std::string>{"example"});
  ASSERT_EQ(report.findings.size(), 1u);
  EXPECT_EQ(report.findings.front().check, "count_file");
  EXPECT_EQ(report.findings.front().status, doctor::Status::ok);

  o.probe_settings.set("example", "count_file", tree.path("missing"));
  report = doctor::run(o);
  ASSERT_EQ(report.findings.size(), 1u);
  EXPECT_EQ(report.findings.front().status, doctor::Status::blocker);
  EXPECT_EQ(report.findings.front().fix, "give --example-count-file PATH");
}

TEST_F(ExampleVendor, CaptureTakesItsSources) {
  const auto s = capture::sources(config);
  ASSERT_FALSE(s.files.empty());
  EXPECT_EQ(s.files.back().key, "example_count");
  EXPECT_EQ(s.files.back().path, tree.path("sys/example/gpus"));
  const auto tools = capture::tool_commands(config);
  ASSERT_FALSE(tools.empty());
  EXPECT_EQ(tools.back().tool, "example-tool");
  EXPECT_EQ(s.replay_flags.back().flag, "--example-count-file");
  EXPECT_EQ(capture::pci_vendor_name(0xe1e1), "example");
}

// Its environment column: doctor reports the variable as the program started, and
// set_probe_environment sets it unless the user did. (Every row's variables are restored after.)
TEST_F(ExampleVendor, ItsEnvironmentIsReportedAndSetWithoutOverwriting) {
  std::vector<std::pair<std::string, std::optional<std::string>>> saved;
  for (const auto& row : probe_rows())
    for (const auto& e : row.environment) {
      const std::string name(e.name);
      const char* v = std::getenv(name.c_str());
      saved.emplace_back(name, v ? std::optional<std::string>(v) : std::nullopt);
    }

  ::unsetenv(test::kExampleEnv);
  EXPECT_FALSE(doctor::environment_snapshot().contains(test::kExampleEnv));
  set_probe_environment();
  ASSERT_NE(std::getenv(test::kExampleEnv), nullptr);
  EXPECT_STREQ(std::getenv(test::kExampleEnv), "1");

  ::setenv(test::kExampleEnv, "mine", 1);
  const auto snapshot = doctor::environment_snapshot();
  ASSERT_TRUE(snapshot.contains(test::kExampleEnv));
  EXPECT_EQ(snapshot.at(test::kExampleEnv), "mine");
  set_probe_environment();
  EXPECT_STREQ(std::getenv(test::kExampleEnv), "mine");

  for (const auto& [name, value] : saved) {
    if (value)
      ::setenv(name.c_str(), value->c_str(), 1);
    else
      ::unsetenv(name.c_str());
  }
}

TEST_F(ExampleVendor, AnswersTheRowContract) {
  test::check_row_conforms(test::example_probe_row(), config);
}

}  // namespace
}  // namespace gpustream
