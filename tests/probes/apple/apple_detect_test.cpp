// AppleSiliconProbe detection (against the fake macmon), its configuration and registry row.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include <boost/json.hpp>

#include "apple_test_util.hpp"
#include "gpustream/probes/apple_probe.hpp"
#include "gpustream/probes/registry.hpp"

namespace gpustream {
namespace {

using namespace std::chrono_literals;
using test::AppleRig;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Sets PATH for the scope (posix_spawnp searches the PATH of this process).
class ScopedPath {
 public:
  explicit ScopedPath(const std::string& value) {
    if (const char* old = std::getenv("PATH")) old_ = old;
    ::setenv("PATH", value.c_str(), 1);
  }
  ~ScopedPath() { ::setenv("PATH", old_.c_str(), 1); }
  ScopedPath(const ScopedPath&) = delete;
  ScopedPath& operator=(const ScopedPath&) = delete;

 private:
  std::string old_;
};

TEST(AppleDetect, WithoutAPathOffMacosItSaysNotMacos) {
  EXPECT_EQ(AppleProbeOptions{}.search_path, kIsMacOS);
  AppleRig rig;
  auto o = rig.options();
  o.macmon.clear();
  o.search_path = false;
  rig.make(o);
  const auto d = rig.detect();
  EXPECT_FALSE(d.available);
  EXPECT_TRUE(contains(d.reason, "not macOS")) << d.reason;
  EXPECT_TRUE(contains(d.reason, "--macmon PATH")) << d.reason;
  EXPECT_TRUE(d.devices.empty());
}

TEST(AppleDetect, SearchesPathForMacmonWhenAsked) {
  AppleRig rig;
  auto o = rig.options();
  o.macmon.clear();
  o.search_path = true;
  rig.make(o);
  {
    ScopedPath path(std::string(fakes::kFakeMacmonDir) + ":/usr/bin:/bin");
    const auto d = rig.detect();
    EXPECT_TRUE(d.available) << d.reason;
  }
  {
    ScopedPath path("/nonexistent-gpustream-dir");
    const auto d = rig.detect();
    EXPECT_FALSE(d.available);
    EXPECT_TRUE(contains(d.reason, "macmon not found in PATH")) << d.reason;
  }
}

TEST(AppleDetect, ExplicitPathThatIsMissingOrNotAProgram) {
  AppleRig rig;
  auto o = rig.options();
  o.macmon = "/nonexistent-gpustream-dir/macmon";
  rig.make(o);
  auto d = rig.detect();
  EXPECT_FALSE(d.available);
  EXPECT_EQ(d.reason, "macmon not found at '/nonexistent-gpustream-dir/macmon'");

  AppleRig rig2;
  o = rig2.options();
  o.macmon = std::string(fakes::kFakeMacmonLines) + "/v0.4.jsonl";  // a file, not executable
  rig2.make(o);
  d = rig2.detect();
  EXPECT_FALSE(d.available);
  EXPECT_TRUE(contains(d.reason, "cannot run")) << d.reason;
}

TEST(AppleDetect, SocInfoNamesTheGpu) {
  AppleRig rig;
  rig.make(rig.options());
  const auto d = rig.detect();
  ASSERT_TRUE(d.available) << d.reason;
  ASSERT_EQ(d.devices.size(), 1u);
  EXPECT_EQ(d.devices[0].id, kAppleGpuId);
  EXPECT_EQ(d.devices[0].vendor, Vendor::apple);
  EXPECT_EQ(d.devices[0].name, "Apple M4 Pro GPU");
  const auto soc = rig.probe().soc_info();
  ASSERT_TRUE(soc);
  EXPECT_EQ(soc->gpu_cores, 20);
  EXPECT_EQ(soc->mac_model, "Mac16,8");
  // Detection is a one-shot run: the persistent child is only started by sampling.
  EXPECT_EQ(rig.probe().status().starts, 0u);

  // The sample's device carries the chip name detection found.
  ASSERT_TRUE(rig.wait_lines(1));
  const auto s = rig.sample();
  EXPECT_EQ(s.snapshot.devices.at(0).name, "Apple M4 Pro GPU");
  EXPECT_EQ(s.snapshot.devices.at(0).attributes.at("pcpu_cores"), "10");
}

TEST(AppleDetect, MacmonBeforeV07HasNoSocInfoAndStillWorks) {
  for (const char* schema : {"v0.4", "v0.6"}) {
    AppleRig rig;
    rig.make(rig.options(std::string("--fake-schema ") + schema));
    const auto d = rig.detect();
    ASSERT_TRUE(d.available) << schema << ": " << d.reason;
    EXPECT_EQ(d.devices.at(0).name, "Apple Silicon GPU");
    EXPECT_FALSE(rig.probe().soc_info());
    // `-i` goes before `pipe`, which v0.4 requires.
    ASSERT_TRUE(rig.wait_lines(1)) << schema;
    EXPECT_EQ(rig.sample().snapshot.devices.at(0).attributes.at("macmon_schema"), "v0.4-v0.6");
  }
}

TEST(AppleDetect, FailingMacmonIsUnavailableWithItsReason) {
  {
    AppleRig rig;
    rig.make(
        rig.options("--fake-lines /nonexistent-gpustream-file --fake-stderr no-such-recording"));
    const auto d = rig.detect();
    EXPECT_FALSE(d.available);
    EXPECT_TRUE(contains(d.reason, "exited with code 4")) << d.reason;
  }
  {
    AppleRig rig;
    rig.make(rig.options("--fake-garbage-at 1"));
    const auto d = rig.detect();
    EXPECT_FALSE(d.available);
    EXPECT_TRUE(contains(d.reason, "not a macmon line")) << d.reason;
  }
  {
    AppleRig rig;
    auto o = rig.options("--fake-first-delay 60000");
    o.detect_timeout = 200ms;
    rig.make(o);
    const auto d = rig.detect();
    EXPECT_FALSE(d.available);
    EXPECT_TRUE(contains(d.reason, "printed no sample within 200 ms")) << d.reason;
  }
}

TEST(AppleConfig, OptionsComeFromTheAppleSectionAndTheInterval) {
  Config c;
  EXPECT_EQ(apple_probe_options(c).macmon, "");
  EXPECT_EQ(apple_probe_options(c).interval, 1000ms);
  c.probe_settings["apple"] = ProbeSettings::Section{{"macmon", "/opt/bin/macmon"}};
  c.probe_intervals["apple"] = 250ms;
  auto o = apple_probe_options(c);
  EXPECT_EQ(o.macmon, "/opt/bin/macmon");
  EXPECT_EQ(o.interval, 250ms);
  c.probe_intervals["apple"] = 20ms;
  EXPECT_EQ(apple_probe_options(c).interval, 100ms);  // macmon's own floor

  c.probe_settings["apple"] = ProbeSettings::Section{{"macmon", 3}};
  EXPECT_THROW(apple_probe_options(c), std::invalid_argument);
  c.probe_settings["apple"] = ProbeSettings::Section{{"macmom", "/typo"}};
  try {
    apple_probe_options(c);
    FAIL() << "an unknown key must be an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(contains(e.what(), "apple.macmom")) << e.what();
  }
}

TEST(AppleConfig, TheRegistryBuildsItFromTheConfig) {
  const ProbeRow* row = find_probe_row("apple");
  ASSERT_NE(row, nullptr);
  EXPECT_TRUE(is_known_probe("apple"));
  AppleRig rig;  // for its io_context only
  boost::asio::thread_pool pool(1);
  Config c;
  c.probes = {"apple"};
  c.probe_settings["apple"] = ProbeSettings::Section{{"macmon", fakes::kFakeMacmon}};
  c.probe_intervals["apple"] = 100ms;
  auto set = make_probes(c, {rig.io().get_executor(), pool.get_executor()});
  ASSERT_TRUE(set.errors.empty()) << set.errors.front();
  ASSERT_EQ(set.probes.size(), 1u);
  EXPECT_EQ(set.probes[0]->name(), "apple");
  EXPECT_EQ(set.probes[0]->min_interval(), 100ms);
  std::optional<Detection> d;
  set.probes[0]->async_detect([&](Detection r) { d = std::move(r); });
  ASSERT_TRUE(rig.run_until([&] { return d.has_value(); }));
  EXPECT_TRUE(d->available) << d->reason;

  c.probe_settings["apple"] = ProbeSettings::Section{{"bogus", 1}};
  set = make_probes(c, {rig.io().get_executor(), pool.get_executor()});
  ASSERT_EQ(set.errors.size(), 1u);
  EXPECT_TRUE(contains(set.errors[0], "probe 'apple'")) << set.errors[0];
}

}  // namespace
}  // namespace gpustream
