// DcgmWriter (exposition/prometheus_dcgm.hpp): the dcgm-exporter-named families written in
// pieces. Pieces of any size join to render_prometheus_dcgm()'s text, which is each snapshot's
// own families joined family by family (a family where its first sample is met); a call passes
// what was asked for by one piece at most (one line, or a family's HELP and TYPE); over
// thousands of nodes the writer's own memory stays the same few KB while the text is tens of MB.
#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "exposition/dcgm_test_devices.hpp"
#include "exposition/prometheus_dcgm.hpp"

namespace gpustream::transport::test {
namespace {

constexpr double kWriterGiB = 1024.0 * 1024.0 * 1024.0;

DeviceSample h100(int index, const std::string& node) {
  DeviceSample d;
  d.id = "GPU-" + node + "-" + std::to_string(index);
  d.vendor = Vendor::nvidia;
  d.index = index;
  d.name = "NVIDIA H100 80GB HBM3";
  d.pci_bus_id = "0000:" + std::to_string(10 + index) + ":00.0";
  d.attributes["uuid"] = d.id;
  d.attributes["driver_version"] = "550.54.15";
  auto& m = d.metrics;
  m.set(Metric::utilization_percent, 87 + index, Source::nvml);
  m.set(Metric::memory_used_bytes, 10 * kWriterGiB, Source::nvml);
  m.set(Metric::memory_total_bytes, 80 * kWriterGiB, Source::nvml);
  m.set(Metric::temperature_celsius, 61, Source::nvml);
  m.set(Metric::power_watts, 312.5, Source::nvml);
  m.set(Metric::energy_joules, 123456.789, Source::nvml);
  d.energy_kind = EnergyKind::counter;
  m.set(Metric::clock_sm_mhz, 1980, Source::nvml);
  m.set(Metric::sm_activity_percent, 12.5, Source::nvml);
  d.throttle_reasons = {"sw_power_cap"};
  return d;
}

EventPtr xid_event(std::string device, std::uint64_t number) {
  GpuEvent e;
  e.probe = "nvidia";
  e.device_id = std::move(device);
  e.kind = EventKind::xid;
  e.data = number;
  return std::make_shared<const GpuEvent>(std::move(e));
}

const DcgmOptions kWriterOptions{"writer-host"};

struct DcgmCase {
  std::string name;
  std::vector<SnapshotPtr> latest;
  std::vector<EventPtr> events;
};

/// Snapshots whose families do not all come in the table's order, with pods, MIG, events,
/// absent values and vendors with fewer fields.
std::vector<DcgmCase> dcgm_cases() {
  std::vector<DcgmCase> out;
  {
    auto first = h100(0, "a");  // no SM clock, the table's first field: its family comes later
    first.metrics.set_absent(Metric::clock_sm_mhz, Absence::unsupported, Source::nvml);
    first.throttle_reasons_absent = Absence::unsupported;
    auto held = h100(1, "a");
    held.pods.push_back({"train-0", "ml", "trainer"});
    auto shared = h100(2, "a");
    shared.pods.push_back({"a", "ml", "c"});
    shared.pods.push_back({"b", "ml", "c"});
    out.push_back({"pods_and_order",
                   {snapshot_of({first, held, shared}, "node-a"), nullptr,
                    snapshot_of({h100(0, "b")}, "node-b"), snapshot_of({})},
                   {}});
  }
  {
    auto gpu = h100(3, "m");
    const DeviceSample mig = mig_1g_10gb_of(gpu);
    DeviceSample orphan = mig;  // a parent not in its snapshot: shown as itself
    orphan.id = "MIG-2222";
    orphan.parent = "GPU-elsewhere";
    out.push_back({"mig_and_xid",
                   {snapshot_of({mig, gpu, orphan})},
                   {xid_event(gpu.id, 48), xid_event("MIG-1111", 31), xid_event(gpu.id, 79)}});
  }
  {
    DeviceSample amd;
    amd.id = "0000:03:00.0";
    amd.vendor = Vendor::amd;
    amd.index = 1;
    amd.name = "AMD Instinct \"MI300X\"\n";
    amd.pci_bus_id = "0000:03:00.0";
    amd.metrics.set(Metric::utilization_percent, 55, Source::sysfs);
    amd.metrics.set(Metric::graphics_activity_percent, 50, Source::sysfs);
    amd.metrics.set_absent(Metric::temperature_celsius, Absence::no_permission, Source::sysfs);
    DeviceSample apple;
    apple.id = "apple-0";
    apple.vendor = Vendor::apple;
    apple.name = "Apple M3 Max";
    apple.metrics.set(Metric::memory_used_bytes, 8 * kWriterGiB, Source::sysfs);
    apple.metrics.set(Metric::power_watts, std::numeric_limits<double>::infinity(), Source::sysfs);
    out.push_back(
        {"vendors_and_absent",
         {snapshot_of({apple}), snapshot_of({amd}, "node-\u00e9"), snapshot_of({h100(0, "c")})},
         {}});
  }
  out.push_back({"empty", {}, {xid_event("GPU-x", 1)}});
  DeviceSample nothing;
  nothing.vendor = Vendor::intel;
  out.push_back({"no_value", {snapshot_of({nothing})}, {}});
  return out;
}

/// The whole text in calls of next(out, want), each on an empty `out`: the pieces.
std::vector<std::string> calls_of(const DcgmCase& f, std::size_t want) {
  DcgmWriter w(f.latest, f.events, kWriterOptions);
  std::vector<std::string> out;
  for (std::string piece; w.next(piece, want); piece.clear()) out.push_back(piece);
  std::string after;
  EXPECT_FALSE(w.next(after, want)) << "more after the end";
  EXPECT_TRUE(after.empty());
  return out;
}

/// The text as families by name, in the order they come; each family's HELP, TYPE and samples.
std::vector<std::pair<std::string, std::string>> families_in(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::string name;
    if (line.starts_with("# HELP ") || line.starts_with("# TYPE "))
      name = line.substr(7, line.find(' ', 7) - 7);
    else
      name = line.substr(0, line.find('{'));
    const auto it =
        std::find_if(out.begin(), out.end(), [&](const auto& f) { return f.first == name; });
    auto& body = it == out.end() ? out.emplace_back(name, std::string()).second : it->second;
    body += line + "\n";
  }
  return out;
}

/// The old whole-string rule, rebuilt from each snapshot's own text: every snapshot's samples
/// of a family, in snapshot order, under the family's first HELP and TYPE, the families in the
/// order their first sample was met.
std::string joined_per_snapshot(const DcgmCase& f) {
  std::vector<std::pair<std::string, std::string>> all;
  for (const auto& s : f.latest) {
    for (const auto& [name, body] :
         families_in(render_prometheus_dcgm({s}, f.events, kWriterOptions))) {
      const auto it =
          std::find_if(all.begin(), all.end(), [&](const auto& a) { return a.first == name; });
      if (it == all.end()) {
        all.emplace_back(name, body);
      } else {
        std::istringstream in(body);
        for (std::string line; std::getline(in, line);)
          if (!line.starts_with("#")) it->second += line + "\n";
      }
    }
  }
  std::string out;
  for (const auto& [name, body] : all) out += body;
  return out;
}

TEST(DcgmWriter, PiecesOfAnySizeJoinToTheWholeText) {
  for (const auto& f : dcgm_cases()) {
    const auto whole = render_prometheus_dcgm(f.latest, f.events, kWriterOptions);
    EXPECT_EQ(whole, joined_per_snapshot(f)) << f.name;
    for (const std::size_t want :
         {std::size_t{0}, std::size_t{1}, std::size_t{50}, std::size_t{333}, std::size_t{4096},
          std::numeric_limits<std::size_t>::max()}) {
      std::string joined;
      for (const auto& piece : calls_of(f, want)) joined += piece;
      EXPECT_EQ(joined, whole) << f.name << ", want " << want;
    }
  }
  // What the fixtures cover is there: pods on the one held GPU only, MIG labels, the last Xid.
  const auto all = dcgm_cases();
  const auto pods = render_prometheus_dcgm(all[0].latest, {}, kWriterOptions);
  EXPECT_NE(pods.find(",container=\"trainer\",namespace=\"ml\",pod=\"train-0\"} "),
            std::string::npos);
  EXPECT_EQ(pods.find("pod=\"a\""), std::string::npos);
  // The table's first field, SM clock, is not on the first GPU: its family comes after those
  // the first GPU has (SM activity is near the table's end).
  ASSERT_NE(pods.find("# HELP DCGM_FI_DEV_SM_CLOCK"), std::string::npos);
  EXPECT_GT(pods.find("# HELP DCGM_FI_DEV_SM_CLOCK"), pods.find("# HELP DCGM_FI_PROF_SM_ACTIVE"));
  const auto mig = render_prometheus_dcgm(all[1].latest, all[1].events, kWriterOptions);
  EXPECT_NE(mig.find("GPU_I_PROFILE=\"1g.10gb\",GPU_I_ID=\"9\"} 1024\n"), std::string::npos);
  EXPECT_NE(mig.find("DCGM_FI_DEV_XID_ERRORS{gpu=\"3\""), std::string::npos);
  EXPECT_NE(mig.find("\"} 79\n"), std::string::npos);
  EXPECT_EQ(render_prometheus_dcgm(all[3].latest, all[3].events, kWriterOptions), "");
  EXPECT_EQ(render_prometheus_dcgm(all[4].latest, {}, kWriterOptions), "");
}

TEST(DcgmWriter, ACallPassesWhatWasAskedByOnePieceAtMost) {
  for (const auto& f : dcgm_cases()) {
    for (const std::size_t want : {std::size_t{1}, std::size_t{64}, std::size_t{700}}) {
      for (const auto& call : calls_of(f, want)) {
        ASSERT_TRUE(call.ends_with('\n')) << f.name << ": a piece is whole lines";
        // The last piece: one sample line, or a family's HELP and TYPE lines.
        std::size_t last = call.rfind('\n', call.size() - 2);
        last = last == std::string::npos ? 0 : last + 1;
        if (call.compare(last, 7, "# TYPE ") == 0) {
          const auto help = call.rfind('\n', last - 2);
          last = help == std::string::npos ? 0 : help + 1;
        }
        EXPECT_LT(last, std::max<std::size_t>(want, 1)) << f.name << ", want " << want;
      }
    }
  }
}

/// A fleet of 2,000 8-GPU nodes: tens of MB of text, taken in the session's 64 KiB pieces; the
/// largest call is the piece size and one line, and what the writer holds is the same few KB
/// as for 10 nodes: no part of the text is kept.
TEST(DcgmWriter, ItsMemoryIsBoundedWhateverTheNumberOfNodes) {
  const auto fleet = [](int nodes) {
    std::vector<SnapshotPtr> latest;
    for (int n = 0; n < nodes; ++n) {
      const auto node = "node-" + std::to_string(100000 + n);
      std::vector<DeviceSample> devices;
      for (int i = 0; i < 8; ++i) devices.push_back(h100(i, node));
      devices[3].pods.push_back({"train-" + std::to_string(n), "ml", "trainer"});
      latest.push_back(snapshot_of(std::move(devices), node));
    }
    return latest;
  };
  constexpr std::size_t kWant = 64 * 1024;
  struct Run {
    std::size_t total = 0, largest = 0, held = 0, lines = 0;
  };
  const auto run = [&](int nodes) {
    const std::vector<EventPtr> events{xid_event("GPU-node-100001-2", 79)};
    DcgmWriter w(fleet(nodes), events, kWriterOptions);
    Run r;
    r.held = w.held_bytes();
    std::string buf;
    while (w.next(buf, kWant)) {
      r.total += buf.size();
      r.largest = std::max(r.largest, buf.size());
      r.lines += static_cast<std::size_t>(std::count(buf.begin(), buf.end(), '\n'));
      r.held = std::max(r.held, w.held_bytes());
      buf.clear();
    }
    return r;
  };
  const auto small = run(10);
  const auto big = run(2000);
  // 10 families (the 8 fields set, clock events, the one Xid): HELP and TYPE each, a line per
  // GPU in 9 of them, the one Xid.
  EXPECT_EQ(big.lines, 2 * 10 + 2000 * 8 * 9 + 1);
  EXPECT_GT(big.total, 25'000'000u) << "the text is big";
  EXPECT_LE(big.largest, kWant + 512) << "a call passes 64 KiB by one line at most";
  EXPECT_LT(big.held, 4096u) << "the writer holds no text";
  EXPECT_LE(big.held, small.held + 64) << "nor anything that grows with the nodes";
  std::printf(
      "2,000 nodes: %zu bytes of text, largest call %zu, writer holds %zu (10 nodes: %zu)\n",
      big.total, big.largest, big.held, small.held);
}

}  // namespace
}  // namespace gpustream::transport::test
