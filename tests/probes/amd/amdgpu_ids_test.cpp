// AMD marketing names from libdrm's amdgpu.ids (probes/amd/amdgpu_ids.cpp), and how the sysfs
// probe names its cards with them.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include <boost/json.hpp>

#include "gpustream/probes/amd_probe.hpp"
#include "probe_harness.hpp"
#include "support/temp_tree.hpp"

namespace gpustream {
namespace {

constexpr const char* kIds =
    "# List of AMDGPU IDs\n"
    "#\n"
    "# Syntax:\n"
    "# device_id,\trevision_id,\tproduct_name        <-- single tab after comma\n"
    "\n"
    "1.0.0\n"
    "73BF,\tC0,\tAMD Radeon RX 6900 XT\n"
    "73BF,\tC1,\tAMD Radeon RX 6800 XT\n"
    "744c,\tc8,\tAMD Radeon RX 7900 XTX\r\n"
    "744C,\tC8,\tA duplicate that must not win\n"
    "zzzz,\t00,\tnot hex\n"
    "7480,\t,\tno revision\n"
    "7480,\tC0\n"
    "7480,\tC1,\t\n";

TEST(AmdgpuIds, ParsesHexPairsSkipsCommentsVersionAndBadLines) {
  const auto ids = parse_amdgpu_ids(kIds);
  EXPECT_EQ(ids.names.size(), 3u);
  EXPECT_EQ(ids.find(0x73bf, 0xc1), "AMD Radeon RX 6800 XT");
  EXPECT_EQ(ids.find(0x744c, 0xc8), "AMD Radeon RX 7900 XTX");  // case, CR, first line wins
  EXPECT_FALSE(ids.find(0x73bf, 0xc2));                         // exact pairs only
  EXPECT_FALSE(ids.find(0x7480, 0xc0));
  EXPECT_TRUE(parse_amdgpu_ids("").names.empty());
}

TEST(AmdgpuIds, AFileOverTheCapIsNotRead) {
  test::TempTree t;
  std::string big(kMaxAmdgpuIdsBytes + 1, '#');
  const auto path = t.file("amdgpu.ids", big);
  auto r = load_amdgpu_ids(path);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, std::errc::file_too_large);
  EXPECT_TRUE(load_amdgpu_ids(t.file("ok.ids", kIds)));
  EXPECT_TRUE(load_amdgpu_ids(t.path("missing.ids")).error().not_found());
}

// The table Debian's libdrm-common installs (scripts/deps.sh test): it parses, and a
// long-standing entry is found.
TEST(AmdgpuIds, TheInstalledLibdrmTableParses) {
  if (!std::filesystem::exists(kDefaultAmdgpuIdsPath))
    GTEST_SKIP() << kDefaultAmdgpuIdsPath
                 << " missing: install libdrm-common (scripts/deps.sh test)";
  auto ids = load_amdgpu_ids(kDefaultAmdgpuIdsPath);
  ASSERT_TRUE(ids) << ids.error().message();
  EXPECT_GT(ids->names.size(), 300u);
  EXPECT_EQ(ids->find(0x67df, 0xc7), "AMD Radeon RX 480 Graphics");
}

class AmdNames : public ::testing::Test {
 protected:
  void card(const std::string& device, const std::string& revision, const char* product) {
    const std::string dev = "sys/class/drm/card0/device/";
    tree_.file(dev + "vendor", "0x1002\n");
    tree_.file(dev + "device", device + "\n");
    if (!revision.empty()) tree_.file(dev + "revision", revision + "\n");
    tree_.file(dev + "uevent", "DRIVER=amdgpu\nPCI_SLOT_NAME=0000:03:00.0\n");
    if (product) tree_.file(dev + "product_name", product);
  }
  std::string name(const std::string& ids_path) {
    auto p = make_amd_sysfs_probe(
        harness_.executors(),
        {.paths = {.sysfs_root = tree_.path("sys"), .procfs_root = tree_.path("proc")},
         .processes = false,
         .amdgpu_ids = ids_path});
    auto d = harness_.detect(*p);
    if (d.devices.size() != 1) throw std::runtime_error("expected one card");
    return d.devices[0].name;
  }
  test::TempTree tree_;
  test::ProbeHarness harness_;
};

TEST_F(AmdNames, MarketingNameByDeviceAndRevision) {
  card("0x744c", "0xc8", nullptr);
  EXPECT_EQ(name(tree_.file("amdgpu.ids", kIds)), "AMD Radeon RX 7900 XTX");
}

TEST_F(AmdNames, ProductNameWinsOverTheTable) {
  card("0x744c", "0xc8", "Radeon Pro W7900\n");
  EXPECT_EQ(name(tree_.file("amdgpu.ids", kIds)), "Radeon Pro W7900");
}

TEST_F(AmdNames, FallbackWhenTheTableCannotHelp) {
  card("0x744c", "0xcf", nullptr);  // a revision the table does not list
  const auto ids = tree_.file("amdgpu.ids", kIds);
  EXPECT_EQ(name(ids), "AMD GPU 0x744c");
  EXPECT_EQ(name(tree_.path("missing.ids")), "AMD GPU 0x744c");
  EXPECT_EQ(name(tree_.file("big.ids", std::string(kMaxAmdgpuIdsBytes + 1, '#'))),
            "AMD GPU 0x744c");
  tree_.remove("sys/class/drm/card0/device/revision");
  EXPECT_EQ(name(ids), "AMD GPU 0x744c");
}

TEST_F(AmdNames, LookupDisabledWithAnEmptyPath) {
  card("0x744c", "0xc8", nullptr);
  tree_.file("amdgpu.ids", kIds);
  EXPECT_EQ(name(""), "AMD GPU 0x744c");
}

TEST_F(AmdNames, ConfigSettingNamesTheTable) {
  card("0x744c", "0xc8", nullptr);
  Config config;
  config.paths = {.sysfs_root = tree_.path("sys"), .procfs_root = tree_.path("proc")};
  config.probe_settings["amd"] =
      ProbeSettings::Section{{"source", "sysfs"}, {"amdgpu_ids", tree_.file("amdgpu.ids", kIds)}};
  auto p = make_amd_probe_from_config(config, harness_.executors());
  auto d = harness_.detect(*p);
  ASSERT_EQ(d.devices.size(), 1u);
  EXPECT_EQ(d.devices[0].name, "AMD Radeon RX 7900 XTX");
  config.probe_settings.set("amd", "amdgpu_ids", 3);
  EXPECT_THROW(make_amd_probe_from_config(config, harness_.executors()), std::invalid_argument);
}

}  // namespace
}  // namespace gpustream
