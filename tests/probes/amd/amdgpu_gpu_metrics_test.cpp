// The sysfs gpu_metrics parser (probes/amd/amdgpu_gpu_metrics.cpp) against tables packed from the
// kernel's layouts (gpu_metrics_tables.hpp): every known revision, and the bad inputs.
#include <gtest/gtest.h>

#include <string>

#include "amd/amdgpu_gpu_metrics.hpp"
#include "gpu_metrics_tables.hpp"
#include "support/temp_tree.hpp"

namespace gpustream {
namespace {

using amdgpu::parse_gpu_metrics;
using test::gpu_metrics_bytes;
using test::GpuMetricsSpec;

TEST(AmdgpuGpuMetrics, EveryDiscreteRevisionGivesGraphicsAndMemoryControllerPercent) {
  for (int content : {0, 1, 2, 3, 4, 5}) {
    const auto t = parse_gpu_metrics(
        gpu_metrics_bytes({.format = 1, .content = content, .gfx = 87, .umc = 23, .media = 9}));
    const auto rev = "1." + std::to_string(content);
    EXPECT_EQ(t.revision, rev);
    ASSERT_TRUE(t.graphics) << rev;
    EXPECT_DOUBLE_EQ(t.graphics.value(), 87.0) << rev;
    EXPECT_EQ(t.graphics.source(), Source::sysfs);
    ASSERT_TRUE(t.memory_controller) << rev;
    EXPECT_DOUBLE_EQ(t.memory_controller.value(), 23.0) << rev;
    EXPECT_TRUE(t.problem.empty()) << rev << ": " << t.problem;
  }
}

TEST(AmdgpuGpuMetrics, ApuTablesAreInHundredthsOfAPercentAndHaveNoMemoryController) {
  for (int content : {0, 1, 2, 3, 4}) {
    const auto t = parse_gpu_metrics(
        gpu_metrics_bytes({.format = 2, .content = content, .gfx = 4275, .media = 1200}));
    const auto rev = "2." + std::to_string(content);
    ASSERT_TRUE(t.graphics) << rev;
    EXPECT_DOUBLE_EQ(t.graphics.value(), 42.75) << rev;
    EXPECT_EQ(t.memory_controller.reason(), Absence::unsupported) << rev;
    EXPECT_TRUE(t.problem.empty()) << rev;
  }
}

TEST(AmdgpuGpuMetrics, Revision3GivesNoGraphicsActivityAndSaysWhy) {
  const auto t = parse_gpu_metrics(gpu_metrics_bytes({.format = 3, .content = 0, .gfx = 50}));
  EXPECT_EQ(t.revision, "3.0");
  EXPECT_EQ(t.graphics.reason(), Absence::unsupported);
  EXPECT_EQ(t.memory_controller.reason(), Absence::unsupported);
  EXPECT_NE(t.problem.find("3.0"), std::string::npos) << t.problem;
  EXPECT_NE(t.problem.find("unit"), std::string::npos) << t.problem;
}

TEST(AmdgpuGpuMetrics, NotAvailableSentinelIsAbsentNeverAValue) {
  auto t = parse_gpu_metrics(gpu_metrics_bytes({.content = 3, .gfx = 0xFFFF, .umc = 31}));
  EXPECT_FALSE(t.graphics);
  EXPECT_EQ(t.graphics.reason(), Absence::unsupported);
  EXPECT_DOUBLE_EQ(t.memory_controller.value(), 31.0);
  EXPECT_TRUE(t.problem.empty());
  t = parse_gpu_metrics(gpu_metrics_bytes({.content = 5, .gfx = 3, .umc = 0xFFFF}));
  EXPECT_DOUBLE_EQ(t.graphics.value(), 3.0);
  EXPECT_EQ(t.memory_controller.reason(), Absence::unsupported);
  t = parse_gpu_metrics(gpu_metrics_bytes({.format = 2, .content = 1, .gfx = 0xFFFF}));
  EXPECT_EQ(t.graphics.reason(), Absence::unsupported);
  // Zero is a value (an idle GPU), not a sentinel.
  t = parse_gpu_metrics(gpu_metrics_bytes({.content = 3, .gfx = 0, .umc = 0}));
  EXPECT_DOUBLE_EQ(t.graphics.value(), 0.0);
  EXPECT_DOUBLE_EQ(t.memory_controller.value(), 0.0);
}

TEST(AmdgpuGpuMetrics, BeyondOneHundredPercentIsRefused) {
  auto t = parse_gpu_metrics(gpu_metrics_bytes({.content = 3, .gfx = 101, .umc = 40}));
  EXPECT_EQ(t.graphics.reason(), Absence::tool_failed);
  EXPECT_DOUBLE_EQ(t.memory_controller.value(), 40.0);
  EXPECT_NE(t.problem.find("average_gfx_activity"), std::string::npos) << t.problem;
  t = parse_gpu_metrics(gpu_metrics_bytes({.format = 2, .content = 4, .gfx = 10001}));
  EXPECT_EQ(t.graphics.reason(), Absence::tool_failed);
  t = parse_gpu_metrics(gpu_metrics_bytes({.format = 2, .content = 4, .gfx = 10000}));
  EXPECT_DOUBLE_EQ(t.graphics.value(), 100.0);
}

void expect_refused(const amdgpu::GpuMetricsActivity& t, Absence why, const std::string& words) {
  EXPECT_EQ(t.graphics.reason(), why) << t.problem;
  EXPECT_EQ(t.memory_controller.reason(), why) << t.problem;
  EXPECT_FALSE(t.graphics);
  EXPECT_FALSE(t.memory_controller);
  EXPECT_NE(t.problem.find(words), std::string::npos) << t.problem;
}

TEST(AmdgpuGpuMetrics, UnknownRevisionsAreRefusedNamingTheRevision) {
  // 1.6 changed layout under the same number; 1.9 is attribute-encoded; 2.5 and 4.0 are unknown.
  for (auto [format, content] : {std::pair{1, 6}, {1, 7}, {1, 9}, {2, 5}, {3, 1}, {4, 0}, {0, 0}}) {
    const auto rev = std::to_string(format) + "." + std::to_string(content);
    const auto t = parse_gpu_metrics(test::gpu_metrics_unknown(format, content, 400));
    EXPECT_EQ(t.revision, rev);
    expect_refused(t, Absence::unsupported, "revision " + rev);
  }
}

TEST(AmdgpuGpuMetrics, ShortReadsAreRefused) {
  expect_refused(parse_gpu_metrics(""), Absence::tool_failed, "header");
  expect_refused(parse_gpu_metrics(std::string("\x78\x00\x01", 3)), Absence::tool_failed, "header");
  // A 1.3 table cut after 100 of its 120 bytes; an APU table cut before its activity.
  expect_refused(parse_gpu_metrics(gpu_metrics_bytes({.content = 3, .gfx = 5, .length = 100})),
                 Absence::tool_failed, "short read: 100 of 120 bytes");
  expect_refused(
      parse_gpu_metrics(gpu_metrics_bytes({.format = 2, .content = 1, .gfx = 5, .length = 20})),
      Absence::tool_failed, "short read: 20 of 120 bytes");
}

TEST(AmdgpuGpuMetrics, StructureSizeThatDisagreesWithTheRevisionIsRefused) {
  // A 1.3 header claiming 1.2's size, and one claiming more than it holds.
  expect_refused(parse_gpu_metrics(gpu_metrics_bytes({.content = 3, .structure_size = 104})),
                 Absence::tool_failed, "structure_size 104, its layout has 120");
  expect_refused(parse_gpu_metrics(gpu_metrics_bytes({.content = 3, .structure_size = 0xFFFF})),
                 Absence::tool_failed, "structure_size 65535");
}

TEST(AmdgpuGpuMetrics, OversizedInputIsRefusedWithoutReadingIt) {
  // The worst input: a valid 1.3 table followed by padding up to one byte over the bound.
  auto big = gpu_metrics_bytes({.content = 3, .gfx = 50, .umc = 50});
  big.resize(amdgpu::kGpuMetricsMaxBytes + 1, '\0');
  expect_refused(parse_gpu_metrics(big), Absence::tool_failed, "larger than 16384 bytes");
  // At the bound exactly, the table is read (the bytes after its structure_size are not its).
  big.resize(amdgpu::kGpuMetricsMaxBytes);
  EXPECT_DOUBLE_EQ(parse_gpu_metrics(big).graphics.value(), 50.0);
}

TEST(AmdgpuGpuMetrics, ReadsTheFileAndBoundsIt) {
  test::TempTree tree;
  tree.file("ok", gpu_metrics_bytes({.content = 3, .gfx = 64, .umc = 12}));
  auto t = amdgpu::read_gpu_metrics(tree.path("ok"));
  EXPECT_DOUBLE_EQ(t.graphics.value(), 64.0);
  EXPECT_DOUBLE_EQ(t.memory_controller.value(), 12.0);

  t = amdgpu::read_gpu_metrics(tree.path("missing"));
  EXPECT_EQ(t.graphics.reason(), Absence::unsupported);
  EXPECT_TRUE(t.problem.empty());  // a kernel or ASIC without the file: nothing to report

  tree.file("huge", std::string(3 * amdgpu::kGpuMetricsMaxBytes, '\x7F'));
  t = amdgpu::read_gpu_metrics(tree.path("huge"));
  expect_refused(t, Absence::tool_failed, "larger than 16384 bytes");
}

}  // namespace
}  // namespace gpustream
