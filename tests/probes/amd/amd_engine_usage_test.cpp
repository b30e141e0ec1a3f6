// Per-process engine utilization: EngineBusyTracker and amd-smi `process --json` usage turned
// into percentages between two samples, for every schema generation that reports it.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "amd_fake_cli.hpp"
#include "gpustream/probes/amd_probe.hpp"
#include "probe_harness.hpp"

namespace gpustream {
namespace {

using test::FakeAmdCli;
using test::ProbeHarness;
using test::TempTree;

constexpr std::int64_t kSecond = 1'000'000'000;

TEST(AmdEngineBusyTracker, DeltaOverElapsedAfterASeedingSample) {
  EngineBusyTracker t;
  const EngineBusyTracker::Key k{42, "amd:0000:03:00.0", 0};
  t.begin(10 * kSecond);
  auto first = t.update(k, {{"gfx", 5'000'000'000}, {"enc", 0}});
  ASSERT_EQ(first.size(), 2u);
  EXPECT_FALSE(first.at("gfx"));  // only seeds
  EXPECT_FALSE(first.at("enc"));

  t.begin(12 * kSecond);  // 2 s later: +1 s gfx, +0.5 s enc
  auto second = t.update(k, {{"gfx", 6'000'000'000}, {"enc", 500'000'000}});
  EXPECT_DOUBLE_EQ(second.at("gfx").value(), 50.0);
  EXPECT_DOUBLE_EQ(second.at("enc").value(), 25.0);
}

TEST(AmdEngineBusyTracker, BackwardsCounterNewEngineAndSameTimeReseed) {
  EngineBusyTracker t;
  const EngineBusyTracker::Key k{42, "amd:0000:03:00.0", 0};
  t.begin(kSecond);
  t.update(k, {{"gfx", 9'000'000'000}});
  t.begin(2 * kSecond);
  // The pid was reused by a new process: its counter restarted. No negative value, a new base.
  auto reused = t.update(k, {{"gfx", 100'000'000}, {"enc", 7}});
  EXPECT_FALSE(reused.at("gfx"));
  EXPECT_FALSE(reused.at("enc"));  // an engine not seen before
  t.begin(3 * kSecond);
  auto after = t.update(k, {{"gfx", 350'000'000}, {"enc", 7}});
  EXPECT_DOUBLE_EQ(after.at("gfx").value(), 25.0);
  EXPECT_DOUBLE_EQ(after.at("enc").value(), 0.0);
  t.begin(3 * kSecond);  // no time passed: nothing to divide by
  EXPECT_FALSE(t.update(k, {{"gfx", 400'000'000}}).at("gfx"));
}

TEST(AmdEngineBusyTracker, VanishedKeysAreForgotten) {
  EngineBusyTracker t;
  const EngineBusyTracker::Key a{1, "d", 0}, b{2, "d", 0};
  t.begin(kSecond);
  t.update(a, {{"gfx", 0}});
  t.update(b, {{"gfx", 0}});
  EXPECT_EQ(t.tracked(), 2u);
  t.begin(2 * kSecond);
  t.update(a, {{"gfx", 10}});  // b exited
  EXPECT_EQ(t.tracked(), 1u);
  t.begin(3 * kSecond);
  EXPECT_TRUE(t.update(a, {{"gfx", 20}}).at("gfx"));
  // b comes back (a new process with that pid): seeded afresh, not compared with 2 samples ago.
  EXPECT_FALSE(t.update(b, {{"gfx", 500'000'000}}).at("gfx"));
}

TEST(AmdEngineBusyTracker, SumsClientsCapsAndSetsGfx) {
  EngineUsage total;
  add_engine_usage(total, {{"gfx", 70.0}, {"dma", 1.0}});
  add_engine_usage(total, {{"gfx", 60.0}, {"dma", std::nullopt}, {"enc", 5.0}});
  EXPECT_DOUBLE_EQ(total.at("gfx").value(), 130.0);
  EXPECT_FALSE(total.at("dma"));  // one unseeded client makes the sum unknown
  ProcessSample p;
  set_engine_usage(p, total, Source::amd_smi);
  ASSERT_EQ(p.engines.size(), 3u);
  EXPECT_EQ(p.engines[0].name, "dma");
  EXPECT_EQ(p.engines[0].utilization_percent.reason(), Absence::not_yet_seeded);
  EXPECT_EQ(p.engines[1].utilization_percent.value(), 5.0);
  EXPECT_EQ(p.engines[2].utilization_percent.value(), 100.0);  // capped
  EXPECT_EQ(p.engines[2].utilization_percent.source(), Source::amd_smi);
  EXPECT_EQ(p.gpu_utilization_percent, 100.0);
  set_engine_usage(p, {{"gfx", std::nullopt}}, Source::amd_smi);
  EXPECT_FALSE(p.gpu_utilization_percent);
}

TEST(AmdSmiParse, ProcessUsageUnitsPerGeneration) {
  // ROCm 6.0/6.1: bare numbers, ns (the unit only appeared in the human-readable output).
  auto v60 = amd_cli::parse_amd_smi_process(R"([{"gpu": 0, "process_info": {"name": "a",
      "pid": 7, "mem_usage": 0, "usage": {"gfx": 1500, "enc": 0},
      "memory_usage": {"gtt_mem": 0, "cpu_mem": 0, "vram_mem": 4096}}}])");
  ASSERT_EQ(v60.at(0).size(), 1u);
  EXPECT_EQ(v60.at(0)[0].engine_busy_ns,
            (std::map<std::string, std::uint64_t>{{"enc", 0}, {"gfx", 1500}}));
  // 6.2+ and amd-smi 26: {"value","unit"}; other time units converted; "N/A" and unknown
  // units left out rather than guessed.
  auto v62 = amd_cli::parse_amd_smi_process(R"([{"gpu": 1, "process_list": [{"process_info": {
      "name": "b", "pid": 8, "mem_usage": {"value": 0, "unit": "B"},
      "usage": {"gfx": {"value": 2, "unit": "ms"}, "enc": {"value": 3, "unit": "ns"},
                "dec": "N/A", "jpeg": {"value": 1, "unit": "furlongs"},
                "vcn": {"value": "N/A", "unit": "ns"}}}}]}])");
  ASSERT_EQ(v62.at(1).size(), 1u);
  EXPECT_EQ(v62.at(1)[0].engine_busy_ns,
            (std::map<std::string, std::uint64_t>{{"enc", 3}, {"gfx", 2'000'000}}));
  // The shared 6.2.0 fixture has no usage at all: no engines, no error.
  auto no_usage = amd_cli::parse_amd_smi_process(
      R"([{"gpu": 0, "process_list": [{"process_info": {"name": "c", "pid": 9}}]}])");
  EXPECT_TRUE(no_usage.at(0).at(0).engine_busy_ns.empty());
}

// The process JSON of one generation, for pids on GPU 0 and 1 with the given busy times.
struct Proc {
  int gpu;
  int pid;
  std::uint64_t gfx_ns, enc_ns;
};

std::string process_json(const std::string& generation, std::initializer_list<Proc> procs) {
  std::string out = "[";
  for (const auto& p : procs) {
    const auto ns = [&](std::uint64_t v) {
      return generation == "6.0" ? std::to_string(v)
                                 : R"({"value": )" + std::to_string(v) + R"(, "unit": "ns"})";
    };
    const std::string info = R"({"name": "w)" + std::to_string(p.pid) + R"(", "pid": )" +
                             std::to_string(p.pid) + R"(, "usage": {"gfx": )" + ns(p.gfx_ns) +
                             R"(, "enc": )" + ns(p.enc_ns) + "}}";
    if (out.size() > 1) out += ",";
    out += R"({"gpu": )" + std::to_string(p.gpu) + ", " +
           (generation == "6.0" ? R"("process_info": )" + info
                                : R"("process_list": [{"process_info": )" + info + "}]") +
           "}";
  }
  return out + "]";
}

const ProcessSample* find_process(const GpuSnapshot& s, int gpu, int pid) {
  for (const auto& d : s.devices)
    if (d.index == gpu)
      for (const auto& p : d.processes)
        if (p.pid == pid) return &p;
  return nullptr;
}

const Reading& engine(const ProcessSample& p, const std::string& name) {
  for (const auto& e : p.engines)
    if (e.name == name) return e.utilization_percent;
  throw std::runtime_error("no engine " + name);
}

class AmdSmiProcessUsage : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    // amd-smi >= 26 wraps static and metric in {"gpu_data": [...]}; process stays an array.
    const bool wrapped = GetParam() == "26";
    for (const char* f : {"static.json", "metric.json"}) {
      const auto text = FakeAmdCli::recorded(f);
      smi_.set_output(f, wrapped ? R"({"gpu_data": )" + text + "}" : text);
    }
    probe_ = make_amd_cli_probe(
        harness_.executors(),
        {.tool = AmdTool::amd_smi, .path = smi_.path(), .clock = [this] { return now_; }});
  }
  GpuSnapshot sample_at(std::int64_t t, const std::string& processes) {
    now_ = t;
    smi_.set_output("process.json", processes);
    auto r = harness_.sample(*probe_);
    EXPECT_FALSE(r.ec) << r.ec.message();
    EXPECT_EQ(r.snapshot.monotonic_ns, t);  // the sample time the deltas use
    return std::move(r.snapshot);
  }
  TempTree tree_;
  FakeAmdCli smi_{tree_, fakes::kFakeAmdSmi, "amd-smi"};
  ProbeHarness harness_;
  std::int64_t now_ = 0;
  std::shared_ptr<AmdProbe> probe_;
};

TEST_P(AmdSmiProcessUsage, PercentBetweenSamplesReseedAndForget) {
  const auto& gen = GetParam();
  // Sample 1: everything seeds. Pid 10 uses GPUs 0 and 1 (two counters).
  auto s1 = sample_at(
      100 * kSecond,
      process_json(gen, {{0, 10, 4'000'000'000, 0}, {1, 10, 0, 0}, {0, 11, 1'000'000'000, 0}}));
  ASSERT_EQ(s1.devices.size(), 4u);
  const auto* p = find_process(s1, 0, 10);
  ASSERT_NE(p, nullptr);
  EXPECT_FALSE(p->gpu_utilization_percent);
  EXPECT_EQ(engine(*p, "gfx").reason(), Absence::not_yet_seeded);
  EXPECT_EQ(engine(*p, "enc").reason(), Absence::not_yet_seeded);

  // Sample 2, 2 s later: pid 10 +1 s gfx / +0.5 s enc on GPU 0 and +2 s on GPU 1; pid 11 was
  // restarted (its counter went back); pid 12 is new.
  auto s2 = sample_at(102 * kSecond, process_json(gen, {{0, 10, 5'000'000'000, 500'000'000},
                                                        {1, 10, 2'000'000'000, 0},
                                                        {0, 11, 10'000'000, 0},
                                                        {0, 12, 9'000'000'000, 0}}));
  p = find_process(s2, 0, 10);
  ASSERT_NE(p, nullptr);
  EXPECT_DOUBLE_EQ(engine(*p, "gfx").value(), 50.0);
  EXPECT_DOUBLE_EQ(engine(*p, "enc").value(), 25.0);
  EXPECT_EQ(engine(*p, "gfx").source(), Source::amd_smi);
  EXPECT_DOUBLE_EQ(p->gpu_utilization_percent.value(), 50.0);
  p = find_process(s2, 1, 10);
  ASSERT_NE(p, nullptr);
  EXPECT_DOUBLE_EQ(p->gpu_utilization_percent.value(), 100.0);
  for (int pid : {11, 12}) {
    p = find_process(s2, 0, pid);
    ASSERT_NE(p, nullptr) << pid;
    EXPECT_FALSE(p->gpu_utilization_percent) << pid;
    EXPECT_EQ(engine(*p, "gfx").reason(), Absence::not_yet_seeded) << pid;
  }

  // Sample 3, 4 s later: pid 11 from its new base; pid 10 left GPU 1 (forgotten there).
  auto s3 = sample_at(106 * kSecond, process_json(gen, {{0, 10, 5'000'000'000, 500'000'000},
                                                        {0, 11, 1'010'000'000, 0}}));
  EXPECT_DOUBLE_EQ(find_process(s3, 0, 11)->gpu_utilization_percent.value(), 25.0);
  EXPECT_DOUBLE_EQ(find_process(s3, 0, 10)->gpu_utilization_percent.value(), 0.0);
  EXPECT_EQ(find_process(s3, 1, 10), nullptr);

  // Sample 4: pid 10 is back on GPU 1 with a higher counter: seeded afresh, no value made up
  // from a baseline two samples old.
  auto s4 = sample_at(108 * kSecond, process_json(gen, {{1, 10, 3'000'000'000, 0}}));
  p = find_process(s4, 1, 10);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(engine(*p, "gfx").reason(), Absence::not_yet_seeded);
}

TEST_P(AmdSmiProcessUsage, FailedProcessRunKeepsTheBaseline) {
  const auto& gen = GetParam();
  sample_at(100 * kSecond, process_json(gen, {{0, 10, 0, 0}}));
  auto bad = sample_at(102 * kSecond, "[{\"gpu\": 0, \"process_list\": [");
  ASSERT_EQ(bad.errors.size(), 1u);
  EXPECT_EQ(bad.errors[0].code, "tool_failed");
  EXPECT_EQ(bad.errors[0].message, "amd-smi process printed invalid JSON");
  EXPECT_TRUE(bad.devices[0].processes.empty());
  EXPECT_TRUE(bad.devices[0].metrics[Metric::utilization_percent].has_value());
  // 4 s after the last good run: 1 s busy is 25 %.
  auto good = sample_at(104 * kSecond, process_json(gen, {{0, 10, 1'000'000'000, 0}}));
  EXPECT_TRUE(good.errors.empty());
  EXPECT_DOUBLE_EQ(find_process(good, 0, 10)->gpu_utilization_percent.value(), 25.0);
}

// 6.0/6.1: bare numbers and process_info per element; 6.2: process_list with units;
// 26: the same process array beside gpu_data-wrapped static and metric.
INSTANTIATE_TEST_SUITE_P(AmdSmiGenerations, AmdSmiProcessUsage,
                         ::testing::Values("6.0", "6.2", "26"));

}  // namespace
}  // namespace gpustream
