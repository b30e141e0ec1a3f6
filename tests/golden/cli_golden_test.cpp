// Golden outputs of the gpustream binary: list --json, snapshot --json of simulated GPUs, replay
// of a recording as JSON lines and as the table.
//
// What is volatile is normalised, and only that (docs/testing.md "Golden outputs"):
//   - wall and monotonic times, sample durations: "time_unix_ns", "monotonic_ns",
//     "sample_duration_ns" become "<int>";
//   - the simulated GPUs' values, which follow the monotonic clock of the run: every number
//     inside a device's "metrics", "engines" and "processes" becomes "<int>" or "<double>" by
//     the kind the binary wrote (so "doubles stay doubles" is still checked), "pid" included;
//   - the path of the temporary recording in messages becomes "<FILE>".
// Keys, their order, strings (ids, names, sources, absence reasons) and the rest are compared
// as they are. The replay outputs need no normalisation: the recording is fixed.
#include <string>

#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "golden/golden.hpp"
#include "golden/golden_fixtures.hpp"
#include "gpustream/json.hpp"
#include "gpustream/transport/protocol.hpp"

#ifdef GPUSTREAM_CLI_PATH
#include "cli/cli_test_util.hpp"

namespace gpustream::golden {
namespace {

namespace json = boost::json;
using cli::test::run;
using cli::test::TempDir;

json::value kind_of(const json::value& v) {
  if (v.is_double()) return "<double>";
  if (v.is_int64() || v.is_uint64()) return "<int>";
  return v;
}

/// Every number under `v` replaced by its kind.
void numbers_to_kinds(json::value& v) {
  if (auto* o = v.if_object()) {
    for (auto& kv : *o) numbers_to_kinds(kv.value());
  } else if (auto* a = v.if_array()) {
    for (auto& x : *a) numbers_to_kinds(x);
  } else {
    v = kind_of(v);
  }
}

void normalise_snapshot(json::value& snap) {
  auto& o = snap.as_object();
  for (const char* k : {"time_unix_ns", "monotonic_ns", "sample_duration_ns"})
    if (o.contains(k)) o[k] = kind_of(o[k]);
  if (auto* devices = o.if_contains("devices")) {
    for (auto& d : devices->as_array()) {
      auto& dev = d.as_object();
      for (const char* k : {"metrics", "engines", "processes"})
        if (auto* x = dev.if_contains(k)) numbers_to_kinds(*x);
    }
  }
}

/// The document's text with the codec's rules (doubles stay doubles), one per line.
std::string text_of(const json::value& v) { return transport::to_compact_json(v) + "\n"; }

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (auto at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
  return s;
}

TEST(GoldenCli, ListJson) {
  const auto r = run("list --json --probes simulated --simulate 2 --seed 7");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_golden("cli/list.simulated.json", r.out);
}

TEST(GoldenCli, SnapshotJsonOfSimulatedGpus) {
  const auto r = run("snapshot --json --probes simulated --simulate 2 --seed 7");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto doc = parse_json(r.out);
  for (auto& s : doc.at("snapshots").as_array()) normalise_snapshot(s);
  expect_golden("cli/snapshot.simulated.json", text_of(doc));
}

/// A recording of the fixtures with a gap line, as `gpustream record` writes it: itself a golden
/// file (cli/recording.jsonl, the snapshot codec's lines), and the input of the replays.
std::string recording() {
  const auto sim = simulated_snapshots();
  std::string rec;
  rec += to_json_string(sim[0]) + "\n";
  rec += R"({"type":"gap","after_sequence":1,"missed":3,"reason":"lossless_bound_exceeded"})"
         "\n";
  rec += to_json_string(sim[1]) + "\n";
  rec += to_json_string(full_snapshot()) + "\n";
  rec += to_json_string(failed_snapshot()) + "\n";
  rec += to_json_string(extremes_snapshot()) + "\n";
  expect_golden("cli/recording.jsonl", rec);
  return golden_text("cli/recording.jsonl");
}

TEST(GoldenCli, ReplayJson) {
  TempDir t;
  t.write("rec.jsonl", recording());
  const auto r = run("replay --json " + t.file("rec.jsonl"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_golden("cli/replay.jsonl", r.out);
  expect_golden("cli/replay.stderr.txt", replace_all(r.err, t.file("rec.jsonl"), "<FILE>"));
}

TEST(GoldenCli, ReplayTable) {
  TempDir t;
  t.write("rec.jsonl", recording());
  const auto r = run("replay " + t.file("rec.jsonl"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_golden("cli/replay.table.txt", r.out);
}

}  // namespace
}  // namespace gpustream::golden

#endif  // GPUSTREAM_CLI_PATH
