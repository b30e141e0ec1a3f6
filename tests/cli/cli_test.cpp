// Runs the real gpustream binary: exit codes, JSON documents, record/replay.
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <boost/json.hpp>

#include "cli_test_util.hpp"
#include "gpustream/probes/registry.hpp"

namespace fs = std::filesystem;

namespace {

using gpustream::cli::test::json_lines;
using gpustream::cli::test::run;
using gpustream::cli::test::TempDir;

// A /proc with a known meminfo, so the host figures can be checked exactly.
TempDir make_proc() {
  TempDir t;
  t.write(
      "proc/meminfo",
      "MemTotal:       16384000 kB\nMemFree:         1000000 kB\n"
      "MemAvailable:    8192000 kB\nSwapTotal:       2048000 kB\nSwapFree:        1024000 kB\n");
  t.write("proc/self/status", "Name:\tgpustream\nVmRSS:\t   12345 kB\n");
  return t;
}

TEST(Cli, UnknownFlagIsAUsageErrorWithExitCode2) {
  const auto r = run("watch --no-such-flag");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--no-such-flag"), std::string::npos) << r.err;
}

TEST(Cli, MissingSubcommandIsAUsageError) { EXPECT_EQ(run("").exit_code, 2); }

TEST(Cli, UnknownProbeNameIsAUsageError) {
  const auto r = run("list --probes host,cuda");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown probe 'cuda'"), std::string::npos) << r.err;
}

TEST(Cli, BadConfigFileNamesTheKey) {
  TempDir t;
  t.write("bad.json", R"({"probes": ["host"], "intervall_seconds": 2})");
  const auto r = run("list --config " + (t.path() / "bad.json").string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("intervall_seconds"), std::string::npos) << r.err;
}

TEST(Cli, ConfigFileThatIsNotJsonIsAUsageError) {
  TempDir t;
  t.write("bad.json", "{probes: host");
  const auto r = run("snapshot --config " + (t.path() / "bad.json").string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("bad.json:1:2: not valid JSON: syntax error at 'p'"), std::string::npos)
      << r.err;
}

// --log-format json: the CLI's own lines are JSON objects too (here the config file's error,
// with its line and column), one per line, nothing else on stderr.
TEST(Cli, LogFormatJsonMakesTheErrorLineAJsonObject) {
  TempDir t;
  t.write("bad.json", "{\n  \"simulate\": 1\n  \"seed\": 2\n}\n");
  const auto path = (t.path() / "bad.json").string();
  const auto r = run("list --log-format json --config " + path);
  EXPECT_EQ(r.exit_code, 2);
  ASSERT_FALSE(r.err.empty());
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "one line: " << r.err;
  boost::system::error_code ec;
  const auto v = boost::json::parse(r.err, ec);
  ASSERT_FALSE(ec) << r.err;
  EXPECT_EQ(v.at("level").as_string(), "error");
  EXPECT_EQ(v.at("logger").as_string(), "gpustream");
  EXPECT_EQ(v.at("message").as_string(), path + ":3:3: not valid JSON: syntax error at '\"'")
      << r.err;
  // The global flag, before the command; a command's own std::cerr line (here serve's and
  // fleet's usage error) is a JSON object too.
  for (const char* command : {"serve", "fleet"}) {
    const auto r2 = run(std::string("--log-format json ") + command + " --listen off");
    EXPECT_EQ(r2.exit_code, 2) << r2.err;
    EXPECT_EQ(r2.err.find('\n'), r2.err.size() - 1) << "one line: " << r2.err;
    const auto v2 = boost::json::parse(r2.err, ec);
    ASSERT_FALSE(ec) << r2.err;
    EXPECT_EQ(std::string(v2.at("message").as_string()).find("nothing to serve"), 0u) << r2.err;
  }
  const auto bad = run("list --log-format xml");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--log-format"), std::string::npos) << bad.err;
}

TEST(Cli, SnapshotJsonHasOneSnapshotPerProbe) {
  const auto proc = make_proc();
  const auto r = run("snapshot --json --simulate 2 --probes host,simulated --procfs-root " +
                     (proc.path() / "proc").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto doc = boost::json::parse(r.out).as_object();
  EXPECT_EQ(doc.at("schema").as_string(), "gpustream/1");
  const auto& snaps = doc.at("snapshots").as_array();
  ASSERT_EQ(snaps.size(), 2u) << r.out;
  bool saw_host = false, saw_sim = false;
  for (const auto& s : snaps) {
    const auto& o = s.as_object();
    if (o.at("probe").as_string() == "host") {
      saw_host = true;
      const auto& host = o.at("host").as_object();
      EXPECT_EQ(host.at("memory_total_bytes").to_number<std::uint64_t>(), 16384000ull * 1024);
      EXPECT_EQ(host.at("memory_available_bytes").to_number<std::uint64_t>(), 8192000ull * 1024);
    } else if (o.at("probe").as_string() == "simulated") {
      saw_sim = true;
      EXPECT_EQ(o.at("devices").as_array().size(), 2u);
    }
  }
  EXPECT_TRUE(saw_host);
  EXPECT_TRUE(saw_sim);
}

TEST(Cli, SimulateIfNoGpuAddsTwoSimulatedGpusAndSaysSo) {
  const auto proc = make_proc();
  const auto r =
      run("snapshot --json --simulate-if-no-gpu --probes nvidia,host"
          " --nvml-library /nonexistent-gpustream/libnvidia-ml.so.1"
          " --nvidia-smi /nonexistent-gpustream/nvidia-smi --procfs-root " +
          (proc.path() / "proc").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("no GPU found on this machine: adding 2 simulated GPUs"), std::string::npos)
      << r.err;
  const auto doc = boost::json::parse(r.out).as_object();
  std::size_t simulated_devices = 0;
  for (const auto& s : doc.at("snapshots").as_array())
    if (s.as_object().at("probe").as_string() == "simulated")
      simulated_devices = s.as_object().at("devices").as_array().size();
  EXPECT_EQ(simulated_devices, 2u) << r.out;
}

TEST(Cli, ServeRefusesANatsUrlItCannotUse) {
  const auto r = run("serve --simulate 1 --listen 127.0.0.1:0 --nats http://127.0.0.1:4222");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--nats: expected nats://HOST:PORT"), std::string::npos) << r.err;
}

TEST(Cli, ServeReadsItsConfigSectionAndTheFlagWins) {
  TempDir t;
  t.write("off.json", R"({"serve": {"listen": "off"}})");
  const auto cfg = (t.path() / "off.json").string();
  auto r = run("serve --config " + cfg);  // the config's "off" was applied: nothing to serve
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("nothing to serve"), std::string::npos) << r.err;
  r = run("serve --config " + cfg + " --listen nonsense");  // the flag replaced it
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("bad listen address 'nonsense'"), std::string::npos) << r.err;

  t.write("bad.json", R"({"serve": {"max_connections": 0}})");
  r = run("serve --config " + (t.path() / "bad.json").string());  // checked like the flag
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("serve.max_connections"), std::string::npos) << r.err;

  t.write("typo.json", R"({"serve": {"listne": "127.0.0.1:0"}})");
  r = run("serve --config " + (t.path() / "typo.json").string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("'serve.listne': unknown key"), std::string::npos) << r.err;
}

// The serve section's values reach the flags whatever their JSON type: lists, fractional seconds.
TEST(Cli, ServeConfigTakesListsAndFractionalSeconds) {
  TempDir t;
  t.write("ok.json", R"({"serve": {"listen": "off", "idle_timeout_seconds": 2.5,)"
                     R"( "allow_origins": ["http://a.example", "http://b.example"]}})");
  auto r = run("serve --config " + (t.path() / "ok.json").string());
  EXPECT_EQ(r.exit_code, 2);  // every value accepted; then "off" leaves nothing to serve
  EXPECT_NE(r.err.find("nothing to serve"), std::string::npos) << r.err;

  t.write("bool.json", R"({"serve": {"allow_origins": [true]}})");
  r = run("serve --config " + (t.path() / "bool.json").string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("'serve.allow_origins': expected a string or a number"), std::string::npos)
      << r.err;
}

TEST(Cli, AMisspeltProbeSettingIsAUsageError) {
  TempDir t;
  t.write("typo.json", R"({"probes": ["simulated"], "amd": {"sourc": "sysfs"}})");
  auto r = run("snapshot --config " + (t.path() / "typo.json").string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(
      r.err.find(
          "amd.sourc: unknown setting (known: source, library, amd_smi, rocm_smi, amdgpu_ids, "
          "process_freshness_ms, process_fd_count_ms, process_sweep_ms)"),
      std::string::npos)
      << r.err;
  r = run("list --amd-source sometimes");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown amd source 'sometimes'"), std::string::npos) << r.err;
}

// The probe flags, the --probes list and the config sections all come from the registry rows.
TEST(Cli, ProbeFlagsAndSectionsComeFromTheRegistry) {
  auto r = run("snapshot --help");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const auto& row : gpustream::probe_rows())
    for (const auto& f : row.flags)
      EXPECT_NE(r.out.find(std::string(f.flag)), std::string::npos) << f.flag;
  EXPECT_NE(r.out.find(gpustream::known_probe_list()), std::string::npos) << r.out;

  TempDir t;
  t.write("section.json", R"({"probes": ["simulated"], "nvdia": {"library": "x"}})");
  r = run("snapshot --config " + (t.path() / "section.json").string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("'nvdia': unknown key"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("nvidia, amd, intel, apple, host, simulated, serve"), std::string::npos)
      << r.err;
}

TEST(Cli, ListSaysWhyAProbeIsUnavailable) {
  const auto r = run("list --json --probes host --procfs-root /nonexistent-gpustream-root");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto doc = boost::json::parse(r.out).as_object();
  const auto& p = doc.at("probes").as_array().at(0).as_object();
  EXPECT_EQ(p.at("probe").as_string(), "host");
  EXPECT_FALSE(p.at("available").as_bool());
  EXPECT_NE(std::string(p.at("reason").as_string()).find("/nonexistent-gpustream-root"),
            std::string::npos);
}

TEST(Cli, ListShowsSimulatedDevices) {
  const auto r = run("list --simulate 3 --probes simulated");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("simulated  available, 3 devices"), std::string::npos) << r.out;
}

TEST(Cli, WatchJsonStopsAfterCount) {
  const auto r = run("watch --json --count 3 --interval 0.05 --simulate 1 --probes simulated");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto lines = json_lines(r.out);
  ASSERT_EQ(lines.size(), 3u);
  std::uint64_t prev = 0;
  for (const auto& l : lines) {
    const auto seq = l.at("sequence").to_number<std::uint64_t>();
    EXPECT_GT(seq, prev);
    prev = seq;
  }
}

TEST(Cli, RecordThenReplayGivesTheSameSnapshots) {
  TempDir t;
  const auto file = (t.path() / "rec.jsonl").string();
  const auto rec =
      run("record " + file + " --count 4 --interval 0.05 --simulate 2 --probes simulated");
  ASSERT_EQ(rec.exit_code, 0) << rec.err;
  std::ifstream in(file);
  std::stringstream ss;
  ss << in.rdbuf();
  const auto recorded = json_lines(ss.str());
  ASSERT_EQ(recorded.size(), 4u);

  const auto rep = run("replay --json " + file);
  ASSERT_EQ(rep.exit_code, 0) << rep.err;
  const auto replayed = json_lines(rep.out);
  ASSERT_EQ(replayed.size(), recorded.size());
  for (std::size_t i = 0; i < recorded.size(); ++i) EXPECT_EQ(replayed[i], recorded[i]) << i;
}

TEST(Cli, ReplayReportsMalformedLinesWithTheirNumber) {
  TempDir t;
  t.write("bad.jsonl", "{\"schema\":\"gpustream/1\"\nnot json\n");
  const auto r = run("replay --json " + (t.path() / "bad.jsonl").string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("bad.jsonl:1"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("bad.jsonl:2"), std::string::npos) << r.err;
}

}  // namespace
