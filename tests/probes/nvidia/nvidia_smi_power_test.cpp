// nvidia-smi power as the driver means it: power.draw.instant / power.draw.average where the
// driver has them (R535+), else power.draw labelled by compute_cap, else power.draw unlabelled;
// parsed from the real captures (../shared/fixtures/captures/turn3/nvidia) and asked of the fake
// nvidia-smi playing drivers of several ages (gpus.csv: the fields a driver knows).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "gpustream/probes/nvidia_formats.hpp"
#include "gpustream/probes/nvidia_probe.hpp"
#include "nvidia/smi_backend.hpp"
#include "nvidia_fakes.hpp"
#include "probe_harness.hpp"

namespace gpustream {
namespace {

namespace fs = std::filesystem;
using nvidia::smi_devices_from_csv;
using nvidia_detail::SmiFieldList;
using test::FakeSmi;
using test::ProbeHarness;
using test::TempTree;

Reading smi(double v) { return Reading::of(v, Source::nvidia_smi); }
Reading smi_power_absent(Absence why) { return Reading::missing(why, Source::nvidia_smi); }

// ---- the real captures ------------------------------------------------------------------

/// One `--query-gpu=... --format=csv` section of a capture: its header line and its rows.
struct Section {
  std::string file;
  std::string header;
  std::vector<std::string> rows;
};

std::vector<Section> capture_sections() {
  std::vector<Section> out;
  const auto dir = fs::path(GPUSTREAM_SHARED_FIXTURES) / "captures" / "turn3" / "nvidia";
  if (!fs::exists(dir)) return out;
  for (const auto& entry : fs::directory_iterator(dir)) {
    std::ifstream in(entry.path());
    std::vector<std::string> lines;
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    for (std::size_t i = 0; i + 2 < lines.size(); ++i) {
      const auto& l = lines[i];
      if (!l.starts_with("# $ nvidia-smi --query-gpu=") || !l.ends_with("--format=csv")) continue;
      Section s{entry.path().filename().string(), lines[i + 2], {}};
      for (std::size_t k = i + 3; k < lines.size() && !lines[k].empty() && lines[k][0] != '#'; ++k)
        s.rows.push_back(lines[k]);
      out.push_back(std::move(s));
    }
  }
  return out;
}

/// The cells of `columns` from a header-and-row CSV, as a new header-and-rows CSV.
std::string select_columns(const Section& s, const std::vector<std::string>& columns) {
  const auto split = [](const std::string& line) {
    std::vector<std::string> cells;
    std::stringstream ss(line);
    for (std::string c; std::getline(ss, c, ',');) {
      const auto b = c.find_first_not_of(' '), e = c.find_last_not_of(' ');
      cells.push_back(b == std::string::npos ? "" : c.substr(b, e - b + 1));
    }
    return cells;
  };
  const auto header = split(s.header);
  std::vector<std::size_t> at;
  std::string out;
  for (const auto& want : columns)
    for (std::size_t i = 0; i < header.size(); ++i)
      if (header[i] == want || header[i].starts_with(want + " [")) {
        at.push_back(i);
        out += (out.empty() ? "" : ", ") + header[i];
      }
  out += "\n";
  for (const auto& row : s.rows) {
    const auto cells = split(row);
    std::string line;
    for (auto i : at) line += (line.empty() ? "" : ", ") + (i < cells.size() ? cells[i] : "");
    out += line + "\n";
  }
  return out;
}

double cell_watts(const std::string& cell) { return *nvidia::parse_smi_value(cell).value; }

TEST(SmiPowerCaptures, InstantAndAverageFromDriversThatHaveThem) {
  const auto sections = capture_sections();
  if (sections.empty()) GTEST_SKIP() << "no captures under " << GPUSTREAM_SHARED_FIXTURES;
  int rows = 0;
  for (const auto& s : sections) {
    const auto cols = smi_devices_from_csv(
        select_columns(s, {"power.draw.instant", "power.draw.average", "compute_cap"}), {});
    const auto table = nvidia::parse_smi_csv(
        select_columns(s, {"power.draw.instant", "power.draw.average", "compute_cap"}), {});
    ASSERT_EQ(table.rows.size(), s.rows.size()) << s.file;
    for (std::size_t r = 0; r < s.rows.size(); ++r, ++rows) {
      const auto& d = cols[r];
      const auto instant = cell_watts(table.rows[r][0]);
      EXPECT_EQ(d.metrics[Metric::power_watts], smi(instant)) << s.file;
      EXPECT_EQ(d.power_kind, PowerKind::instant) << s.file;
      const auto average = nvidia::parse_smi_value(table.rows[r][1]);
      if (table.rows[r][2] == "7.5") {  // Turing: the driver has no average ("[N/A]")
        EXPECT_FALSE(average.value) << s.file;
        EXPECT_EQ(d.metrics[Metric::power_average_watts], smi_power_absent(Absence::unsupported))
            << s.file;
      } else {
        EXPECT_EQ(d.metrics[Metric::power_average_watts], smi(*average.value)) << s.file;
      }
    }
  }
  EXPECT_GE(rows, 14);  // seven captures, two runs each
}

TEST(SmiPowerCaptures, PowerDrawIsLabelledByComputeCapability) {
  // What a driver before R535 would print of the same boards: power.draw and compute_cap only.
  // The captures show what power.draw is on each: the average on Ada and Hopper (8.9, 9.0), the
  // instantaneous figure on Turing (7.5).
  const auto sections = capture_sections();
  if (sections.empty()) GTEST_SKIP() << "no captures under " << GPUSTREAM_SHARED_FIXTURES;
  int averaged = 0, instant = 0;
  for (const auto& s : sections) {
    const auto devices = smi_devices_from_csv(select_columns(s, {"power.draw", "compute_cap"}), {});
    const auto truth = nvidia::parse_smi_csv(
        select_columns(s,
                       {"power.draw", "power.draw.average", "power.draw.instant", "compute_cap"}),
        {});
    ASSERT_EQ(devices.size(), truth.rows.size()) << s.file;
    for (std::size_t r = 0; r < devices.size(); ++r) {
      const auto& d = devices[r];
      const auto draw = cell_watts(truth.rows[r][0]);
      EXPECT_EQ(d.metrics[Metric::power_watts], smi(draw)) << s.file;
      if (truth.rows[r][3] == "7.5") {
        ++instant;
        EXPECT_EQ(d.power_kind, PowerKind::instant) << s.file;
        EXPECT_EQ(draw, cell_watts(truth.rows[r][2])) << s.file;  // = power.draw.instant
        EXPECT_EQ(d.metrics[Metric::power_average_watts], smi_power_absent(Absence::unsupported));
      } else {
        ++averaged;
        EXPECT_EQ(d.power_kind, PowerKind::average) << s.file;
        EXPECT_EQ(draw, cell_watts(truth.rows[r][1])) << s.file;  // = power.draw.average
        EXPECT_EQ(d.metrics[Metric::power_average_watts], smi(draw)) << s.file;
      }
    }
  }
  EXPECT_GE(averaged, 10);
  EXPECT_GE(instant, 4);
}

TEST(SmiPower, PlaceholdersAreAbsentNeverZero) {
  const std::string_view asked[] = {"index", "power.draw.instant", "power.draw.average"};
  std::vector<SampleError> errors;
  const auto d = smi_devices_from_csv(
      "0, [N/A], [Not Supported]\n1, [Insufficient Permissions], 12.5\n2, [Unknown Error], -3\n",
      asked, &errors);
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0].metrics[Metric::power_watts], smi_power_absent(Absence::unsupported));
  EXPECT_EQ(d[0].metrics[Metric::power_average_watts], smi_power_absent(Absence::unsupported));
  EXPECT_FALSE(d[0].power_kind);
  EXPECT_EQ(d[1].metrics[Metric::power_watts], smi_power_absent(Absence::no_permission));
  EXPECT_EQ(d[1].metrics[Metric::power_average_watts], smi(12.5));
  EXPECT_FALSE(d[1].power_kind);
  EXPECT_EQ(d[2].metrics[Metric::power_watts], smi_power_absent(Absence::tool_failed));
  EXPECT_EQ(d[2].metrics[Metric::power_average_watts], smi_power_absent(Absence::tool_failed));
  EXPECT_EQ(errors.size(), 2u);  // "[Unknown Error]" and a negative power: parse_error each
}

TEST(SmiPower, ComputeCapabilityLabels) {
  const std::string_view asked[] = {"index", "power.draw", "compute_cap"};
  const auto d = smi_devices_from_csv(
      "0, 250, 8.0\n1, 250, 8.6\n2, 250, 7.0\n3, 250, 10.0\n4, 250, [N/A]\n5, 250, 8\n", asked);
  ASSERT_EQ(d.size(), 6u);
  EXPECT_EQ(d[0].power_kind, PowerKind::instant);  // GA100 (A100, A30)
  EXPECT_EQ(d[1].power_kind, PowerKind::average);  // GA10x
  EXPECT_EQ(d[2].power_kind, PowerKind::instant);  // Volta
  EXPECT_EQ(d[3].power_kind, PowerKind::average);  // Blackwell
  EXPECT_FALSE(d[4].power_kind);                   // not known: not guessed
  EXPECT_FALSE(d[5].power_kind);
  EXPECT_EQ(d[4].metrics[Metric::power_average_watts], smi_power_absent(Absence::unsupported));
}

TEST(SmiPower, FieldListsShrinkOnlyByWhatWasRejected) {
  using nvidia_detail::smi_next_field_list;
  EXPECT_EQ(smi_next_field_list(SmiFieldList::power_fields, "power.draw.instant"),
            SmiFieldList::power_draw);
  EXPECT_EQ(smi_next_field_list(SmiFieldList::power_fields, "power.draw.average"),
            SmiFieldList::power_draw);
  EXPECT_EQ(smi_next_field_list(SmiFieldList::power_fields, "clocks.sm"), SmiFieldList::basic);
  EXPECT_EQ(smi_next_field_list(SmiFieldList::power_draw, "compute_cap"),
            SmiFieldList::power_draw_no_cap);
  EXPECT_EQ(smi_next_field_list(SmiFieldList::power_draw, ""), SmiFieldList::basic);
  EXPECT_EQ(smi_next_field_list(SmiFieldList::power_draw_no_cap, "fan.speed"), SmiFieldList::basic);
  EXPECT_EQ(smi_next_field_list(SmiFieldList::basic, "power.draw"), std::nullopt);
}

// ---- the probe against drivers of several ages ---------------------------------------------

/// A driver's table for the fake nvidia-smi: every field of every list the probe asks, with the
/// values of `cells`, minus the fields the driver does not know.
std::string driver_table(std::map<std::string, std::string> cells,
                         const std::vector<std::string>& unknown) {
  std::map<std::string, std::string> all = {
      {"index", "0"},
      {"uuid", "GPU-0"},
      {"name", "NVIDIA Test"},
      {"pci.bus_id", "00000000:18:00.0"},
      {"memory.total", "81559"},
      {"memory.used", "1"},
      {"utilization.gpu", "3"},
      {"utilization.memory", "1"},
      {"temperature.gpu", "40"},
      {"power.draw", "100.00"},
      {"power.draw.instant", "101.00"},
      {"power.draw.average", "100.00"},
      {"compute_cap", "9.0"},
      {"power.limit", "700.00"},
      {"clocks.gr", "345"},
      {"clocks.sm", "345"},
      {"clocks.mem", "2619"},
      {"fan.speed", "[N/A]"},
      {"clocks_throttle_reasons.active", "0x0000000000000001"}};
  for (auto& [k, v] : cells) all[k] = v;
  for (const auto& u : unknown) all.erase(u);
  std::string header, row;
  for (const auto& [k, v] : all) {
    header += (header.empty() ? "" : ", ") + k;
    row += (row.empty() ? "" : ", ") + v;
  }
  return header + "\n" + row + "\n";
}

class SmiPowerProbeTest : public ::testing::Test {
 protected:
  DeviceSample sample_driver(const std::string& table) {
    smi_.file("gpus.csv", table);
    smi_.file("query-compute-apps.csv", "");
    NvidiaProbeOptions o;
    o.nvml_library = "/nonexistent/libnvidia-ml.so.1";
    o.nvidia_smi = smi_.tool();
    o.use = NvidiaProbeOptions::Use::nvidia_smi_only;
    o.paths.procfs_root = proc_.path();
    p_ = make_nvidia_probe(harness_.executors(), o);
    EXPECT_TRUE(harness_.detect(*p_).available);
    return sample_again();
  }
  DeviceSample sample_again() {
    auto r = harness_.sample(*p_);
    EXPECT_FALSE(r.ec) << r.ec.message();
    EXPECT_TRUE(r.snapshot.errors.empty());
    EXPECT_EQ(r.snapshot.devices.size(), 1u);
    return r.snapshot.devices.empty() ? DeviceSample{} : r.snapshot.devices[0];
  }
  /// The --query-gpu runs so far, as their field lists.
  std::vector<std::string> gpu_queries() const {
    std::vector<std::string> out;
    for (const auto& c : smi_.calls())
      if (c.starts_with("--query-gpu=")) out.push_back(c.substr(12, c.find(' ') - 12));
    return out;
  }

  FakeSmi smi_;
  TempTree proc_;
  ProbeHarness harness_;
  std::shared_ptr<NvidiaProbe> p_;
};

TEST_F(SmiPowerProbeTest, CurrentDriverOnHopperGivesInstantAndAverage) {
  const auto d = sample_driver(
      driver_table({{"power.draw.instant", "625.68"}, {"power.draw.average", "631.95"}}, {}));
  EXPECT_EQ(d.metrics[Metric::power_watts], smi(625.68));
  EXPECT_EQ(d.power_kind, PowerKind::instant);
  EXPECT_EQ(d.metrics[Metric::power_average_watts], smi(631.95));
  const auto q = gpu_queries();
  ASSERT_EQ(q.size(), 2u);  // detection, one sample: nothing rejected
  EXPECT_NE(q[1].find("power.draw.instant,power.draw.average"), std::string::npos) << q[1];
  EXPECT_EQ(q[1].find("power.draw,"), std::string::npos) << q[1];
}

TEST_F(SmiPowerProbeTest, CurrentDriverOnVoltaHasNoAverage) {
  const auto d = sample_driver(driver_table(
      {{"power.draw.instant", "41.50"}, {"power.draw.average", "[N/A]"}, {"compute_cap", "7.0"}},
      {}));
  EXPECT_EQ(d.metrics[Metric::power_watts], smi(41.5));
  EXPECT_EQ(d.power_kind, PowerKind::instant);
  EXPECT_EQ(d.metrics[Metric::power_average_watts], smi_power_absent(Absence::unsupported));
}

TEST_F(SmiPowerProbeTest, DriverBeforeR535OnAdaLabelsPowerDrawAverage) {
  const auto d = sample_driver(driver_table({{"power.draw", "144.97"}, {"compute_cap", "8.9"}},
                                            {"power.draw.instant", "power.draw.average"}));
  EXPECT_EQ(d.metrics[Metric::power_watts], smi(144.97));
  EXPECT_EQ(d.power_kind, PowerKind::average);
  EXPECT_EQ(d.metrics[Metric::power_average_watts], smi(144.97));
  // Rejected once, at detection; every later run asks power.draw and compute_cap at once.
  sample_again();
  const auto q = gpu_queries();
  ASSERT_EQ(q.size(), 4u);
  EXPECT_NE(q[0].find("power.draw.instant"), std::string::npos);
  for (std::size_t i = 1; i < q.size(); ++i) {
    EXPECT_NE(q[i].find("power.draw,compute_cap"), std::string::npos) << q[i];
    EXPECT_EQ(q[i].find("power.draw."), std::string::npos) << q[i];
  }
}

TEST_F(SmiPowerProbeTest, DriverBeforeR535OnVoltaAndGa100LabelsPowerDrawInstant) {
  for (const char* cap : {"7.0", "8.0"}) {
    const auto d = sample_driver(driver_table({{"power.draw", "250.00"}, {"compute_cap", cap}},
                                              {"power.draw.instant", "power.draw.average"}));
    EXPECT_EQ(d.metrics[Metric::power_watts], smi(250.0)) << cap;
    EXPECT_EQ(d.power_kind, PowerKind::instant) << cap;
    EXPECT_EQ(d.metrics[Metric::power_average_watts], smi_power_absent(Absence::unsupported))
        << cap;
  }
}

TEST_F(SmiPowerProbeTest, DriverWithoutComputeCapLeavesTheKindUnset) {
  const auto d = sample_driver(driver_table(
      {{"power.draw", "77.00"}}, {"power.draw.instant", "power.draw.average", "compute_cap"}));
  EXPECT_EQ(d.metrics[Metric::power_watts], smi(77.0));
  EXPECT_FALSE(d.power_kind);  // not guessed
  EXPECT_EQ(d.metrics[Metric::power_average_watts], smi_power_absent(Absence::unsupported));
  EXPECT_EQ(d.metrics[Metric::clock_sm_mhz], smi(345));  // the other fields are still asked
  const auto q = gpu_queries();
  ASSERT_EQ(q.size(), 4u);  // instant rejected, compute_cap rejected, then detection and sample
  EXPECT_EQ(q[2], q[3]);
  EXPECT_NE(q[3].find("power.draw,power.limit"), std::string::npos) << q[3];
}

TEST_F(SmiPowerProbeTest, AnyOtherRejectedFieldGivesTheBasicList) {
  const auto d = sample_driver(
      driver_table({{"power.draw", "26.50"}},
                   {"power.draw.instant", "power.draw.average", "clocks_throttle_reasons.active"}));
  EXPECT_EQ(d.metrics[Metric::power_watts], smi(26.5));
  EXPECT_FALSE(d.power_kind);
  const auto q = gpu_queries();
  ASSERT_EQ(q.size(), 4u);  // instant, then throttle reasons rejected; basic list after
  EXPECT_EQ(q[2],
            "index,uuid,name,pci.bus_id,memory.total,memory.used,utilization.gpu,"
            "temperature.gpu,power.draw");
}

}  // namespace
}  // namespace gpustream
