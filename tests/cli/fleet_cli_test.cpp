// The fleet flags of the real gpustream binary: node names, encodings, what cannot run.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cli_test_util.hpp"

namespace {

using gpustream::cli::test::run;
using gpustream::cli::test::TempDir;

bool has(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

TEST(FleetCli, ABadNodeNameIsAUsageError) {
  for (const std::string& bad :
       std::vector<std::string>{"a.b", "'a*'", "'a b'", std::string(65, 'n')}) {
    const auto r = run("serve --listen off --nats nats://127.0.0.1:1 --node " + bad);
    EXPECT_EQ(r.exit_code, 2) << bad;
    EXPECT_TRUE(has(r.err, "--node:")) << r.err;
  }
}

TEST(FleetCli, BadNatsFlagsAreUsageErrors) {
  auto r = run("serve --listen off --nats nats://127.0.0.1:1 --nats-encoding xml");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(has(r.err, "--nats-encoding")) << r.err;
  r = run("serve --listen off --nats nats://127.0.0.1:1 --nats-kv-bucket a.b");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(has(r.err, "--nats-kv-bucket")) << r.err;
  // Without --nats, --listen off still has nothing to serve.
  r = run("serve --listen off");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(has(r.err, "nothing to serve")) << r.err;
}

TEST(FleetCli, FleetRefusesWhatCannotWork) {
  auto r = run("fleet --nats nats://127.0.0.1:1 --listen off");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(has(r.err, "nothing to serve")) << r.err;
  r = run("fleet --nats http://127.0.0.1:1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(has(r.err, "--nats: expected nats://HOST:PORT")) << r.err;
  r = run("fleet --nats nats://127.0.0.1:1 --stale 10 --gone 5");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(has(r.err, "--gone")) << r.err;
  r = run("fleet --nats nats://127.0.0.1:1 --max-bus-state-bytes 1000");  // under 1 MiB
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(has(r.err, "--max-bus-state-bytes")) << r.err;
  // Each publisher's budget (issue 27): a budget that lets nothing through is a usage error.
  for (const char* flag :
       {"--publisher-messages-per-second 0", "--publisher-bytes-per-second 10",
        "--publisher-cpu-ms-per-second 0", "--publisher-burst-seconds 0",
        "--publisher-queue-messages 0", "--publisher-queue-bytes 10", "--decode-queue-bytes 10"}) {
    r = run(std::string("fleet --nats nats://127.0.0.1:1 ") + flag);
    EXPECT_EQ(r.exit_code, 2) << flag;
    EXPECT_TRUE(has(r.err, std::string(flag).substr(0, std::string(flag).find(' ')))) << r.err;
  }
  // Nothing answers on port 1: a clear error and exit 1, not a hang.
  r = run("fleet --nats nats://127.0.0.1:1 --listen 127.0.0.1:0");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(has(r.err, "cannot connect")) << r.err;
}

// `gpustream fleet --config FILE`: the file's "fleet" object holds every fleet flag, checked like
// the flag (the error names the key's path), and a flag on the command line wins.
TEST(FleetCli, FleetReadsItsConfigSectionAndTheFlagWins) {
  TempDir t;
  const auto file = [&](const std::string& name, const std::string& text) {
    t.write(name, text);
    return (t.path() / name).string();
  };
  // The section's values are applied: "off" and no tcp leave nothing to serve.
  auto cfg = file("off.json", R"({"fleet": {"listen": "off", "nats": "nats://127.0.0.1:1",)"
                              R"( "stale_seconds": 2.5, "gone_seconds": 10, "max_nodes": 50,)"
                              R"( "kv_bucket": "off", "subject_prefix": "gpustream.zone-a",)"
                              R"( "max_connections": 8, "allow_hosts": ["a.example"],)"
                              R"( "publisher_messages_per_second": 50,)"
                              R"( "publisher_bytes_per_second": 1048576,)"
                              R"( "publisher_cpu_ms_per_second": 20, "publisher_burst_seconds": 1,)"
                              R"( "publisher_queue_messages": 8, "publisher_queue_bytes": 1048576,)"
                              R"( "decode_queue_bytes": 16777216}})");
  auto r = run("fleet --config " + cfg);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(has(r.err, "nothing to serve")) << r.err;
  // A flag given on the command line wins over the file: here it brings a listener back, and the
  // file's unreachable NATS server is what stops it (exit 1), not a usage error.
  r = run("fleet --config " + cfg + " --listen 127.0.0.1:0");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(has(r.err, "cannot connect")) << r.err;
  // The stale/gone order is checked across the file and the flags, naming both keys.
  r = run("fleet --config " + cfg + " --stale 20 --listen 127.0.0.1:0");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(has(r.err, "fleet.gone_seconds")) << r.err;

  struct Bad {
    const char* json;
    const char* names;
  };
  for (const auto& b : {
           Bad{R"({"fleet": {"stale_seconds": 0}})", "'fleet.stale_seconds'"},
           Bad{R"({"fleet": {"gone_seconds": 1e9}})", "'fleet.gone_seconds'"},
           Bad{R"({"fleet": {"max_nodes": 0}})", "'fleet.max_nodes'"},
           Bad{R"({"fleet": {"max_bus_state_bytes": 1024}})", "'fleet.max_bus_state_bytes'"},
           Bad{R"({"fleet": {"max_connections": 0}})", "'fleet.max_connections'"},
           Bad{R"({"fleet": {"publisher_cpu_ms_per_second": 0}})",
               "'fleet.publisher_cpu_ms_per_second'"},
           Bad{R"({"fleet": {"publisher_queue_messages": -1}})",
               "'fleet.publisher_queue_messages'"},
           Bad{R"({"fleet": {"max_message_bytes": 10}})", "'fleet.max_message_bytes'"},
           Bad{R"({"fleet": {"nats": "http://x:1"}})", "'fleet.nats': --nats: expected nats://"},
           Bad{R"({"fleet": {"kv_bucket": "a.b"}})", "'fleet.kv_bucket'"},
           Bad{R"({"fleet": {"subject_prefix": "a..b"}})", "'fleet.subject_prefix'"},
           Bad{R"({"fleet": {"subject_prefix": "gpustream.>"}})", "'fleet.subject_prefix'"},
           Bad{R"({"fleet": {"allow_hosts": [true]}})", "'fleet.allow_hosts': expected a string"},
           Bad{R"({"fleet": {"stale": 5}})", "'fleet.stale': unknown key (known: listen"},
           Bad{R"({"fleet": {"node": "n1"}})", "'fleet.node': unknown key"},  // an agent's key
           Bad{R"({"fleet": 5})", "fleet"},
           Bad{R"({"flet": {}})", "flet"},
       }) {
    r = run("fleet --config " + file("bad.json", b.json));
    EXPECT_EQ(r.exit_code, 2) << b.json;
    EXPECT_TRUE(has(r.err, b.names)) << b.json << ": " << r.err;
  }
  // The same checks on the command line.
  r = run("fleet --kv-bucket a.b");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(has(r.err, "--kv-bucket")) << r.err;
  r = run("fleet --config /nonexistent/fleet.json");
  EXPECT_EQ(r.exit_code, 2);
}

}  // namespace
