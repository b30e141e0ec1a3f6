// The real gpustream binary's --help of every command and the words and exit codes of its
// usage errors, byte for byte against tests/cli/golden/ (recorded before the CLI became
// tables). GPUSTREAM_UPDATE_GOLDEN=1 rewrites the files instead (then review the diff).
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cli_test_util.hpp"

namespace {

using gpustream::cli::test::run;
using gpustream::cli::test::slurp;
using gpustream::cli::test::TempDir;

std::string golden_path(const std::string& name) {
  return std::string(GPUSTREAM_SOURCE_DIR) + "/tests/cli/golden/" + name;
}

/// Compares `actual` with the golden file `name` (or rewrites it under GPUSTREAM_UPDATE_GOLDEN).
void expect_golden(const std::string& name, const std::string& actual) {
  const auto path = golden_path(name);
  if (std::getenv("GPUSTREAM_UPDATE_GOLDEN")) {
    std::ofstream(path, std::ios::binary) << actual;
    return;
  }
  EXPECT_EQ(slurp(path), actual) << "differs from " << path;
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (auto i = s.find(from); i != std::string::npos; i = s.find(from, i + to.size()))
    s.replace(i, from.size(), to);
  return s;
}

TEST(HelpGolden, EveryCommandsHelpIsUnchanged) {
  for (const std::string command : {"", "list", "snapshot", "capture", "watch", "record", "serve",
                                    "doctor", "fleet", "replay"}) {
    const auto r = run(command + " --help");
    EXPECT_EQ(r.exit_code, 0) << command;
    EXPECT_EQ(r.err, "") << command;
    expect_golden("help_" + (command.empty() ? std::string("main") : command) + ".txt",
                  replace_all(r.out, GPUSTREAM_CLI_PATH, "gpustream"));  // the usage line
  }
}

struct UsageCase {
  std::string name;
  std::string args;    // CONFIG stands for the config file's path
  std::string config;  // the config file's text; empty: none
};

// Bad flags and bad config files of every kind the server-option table, the serve and fleet
// flag rows and the command table make: their stderr and exit code stay as they were.
TEST(HelpGolden, UsageErrorsAreUnchanged) {
  const std::vector<UsageCase> cases = {
      {"no_command", "", ""},
      {"unknown_command", "bogus", ""},
      {"serve_unknown_flag", "serve --bogus", ""},
      {"serve_max_connections_0", "serve --max-connections 0", ""},
      {"serve_max_connections_text", "serve --max-connections abc", ""},
      {"serve_max_connections_high", "serve --max-connections 100001", ""},
      {"serve_tcp_idle_0", "serve --tcp-idle-timeout 0", ""},
      {"serve_max_message_10", "serve --max-message-bytes 10", ""},
      {"serve_send_queue_0", "serve --send-queue 0", ""},
      {"serve_max_subscribes_0", "serve --max-subscribes 0", ""},
      {"serve_metrics_processes_neg", "serve --metrics-processes -1", ""},
      {"serve_metrics_compat_bad", "serve --metrics-compat dcgmx", ""},
      {"serve_listen_bad", "serve --listen bogus", ""},
      {"serve_tcp_bad", "serve --tcp 1.2.3", ""},
      {"serve_token_missing", "serve --token /nonexistent/token", ""},
      {"serve_nothing", "serve --listen off", ""},
      {"serve_nats_bad", "serve --nats http://x", ""},
      {"serve_encoding_bad", "serve --nats-encoding foo", ""},
      {"serve_bucket_bad", "serve --nats-kv-bucket 'b@d'", ""},
      {"serve_kv_ttl_low", "serve --nats-kv-ttl 0.5", ""},
      {"serve_full_every_0", "serve --nats-full-every 0", ""},
      {"fleet_gone_before_stale", "fleet --stale 10 --gone 5", ""},
      {"fleet_nats_bad", "fleet --nats bad", ""},
      {"fleet_prefix_bad", "fleet --subject-prefix a..b", ""},
      {"fleet_bucket_bad", "fleet --kv-bucket 'x y'", ""},
      {"fleet_nothing", "fleet --listen off", ""},
      {"fleet_stale_0", "fleet --stale 0", ""},
      {"fleet_max_nodes_0", "fleet --max-nodes 0", ""},
      {"fleet_bus_bytes_low", "fleet --max-bus-state-bytes 5", ""},
      {"fleet_kv_storage_bad", "fleet --kv-storage disk", ""},
      {"fleet_kv_create_bad", "fleet --kv-create yes", ""},
      {"fleet_kv_replicas_0", "fleet --kv-replicas 0", ""},
      {"fleet_max_connections_0", "fleet --max-connections 0", ""},
      {"serve_cfg_max_connections_0", "serve --config CONFIG",
       R"({"serve":{"max_connections":0}})"},
      {"serve_cfg_unknown_key", "serve --config CONFIG", R"({"serve":{"bogus":1}})"},
      {"serve_cfg_listen_off", "serve --config CONFIG", R"({"serve":{"listen":"off"}})"},
      {"serve_cfg_text_for_number", "serve --config CONFIG",
       R"({"serve":{"max_connections":"abc"}})"},
      {"serve_cfg_bool", "serve --config CONFIG", R"({"serve":{"max_connections":true}})"},
      {"serve_cfg_idle_low", "serve --config CONFIG", R"({"serve":{"idle_timeout_seconds":0.01}})"},
      {"serve_cfg_encoding_bad", "serve --config CONFIG", R"({"serve":{"nats_encoding":"x"}})"},
      {"serve_cfg_full_every_0", "serve --config CONFIG", R"({"serve":{"nats_full_every":0}})"},
      {"serve_cfg_fleet_key", "serve --config CONFIG", R"({"serve":{"stale_seconds":3}})"},
      {"serve_cfg_list_of_objects", "serve --config CONFIG",
       R"({"serve":{"allow_origins":[1, {"a":1}]}})"},
      {"fleet_cfg_gone_before_stale", "fleet --config CONFIG",
       R"({"fleet":{"stale_seconds":10,"gone_seconds":5}})"},
      {"fleet_cfg_unknown_key", "fleet --config CONFIG", R"({"fleet":{"bogus":1}})"},
      {"fleet_cfg_text_for_number", "fleet --config CONFIG",
       R"({"fleet":{"max_connections":"abc"}})"},
      {"fleet_cfg_serve_key", "fleet --config CONFIG", R"({"fleet":{"nats_encoding":"json"}})"},
      {"fleet_cfg_prefix_bad", "fleet --config CONFIG", R"({"fleet":{"subject_prefix":"a..b"}})"},
      {"fleet_cfg_listen_off", "fleet --config CONFIG", R"({"fleet":{"listen":"off"}})"},
      {"fleet_cfg_bus_bytes_low", "fleet --config CONFIG",
       R"({"fleet":{"max_bus_state_bytes":1}})"},
      {"fleet_cfg_metrics_compat_bad", "fleet --config CONFIG",
       R"({"fleet":{"metrics_compat":"DCGM"}})"},
      {"probes_unknown", "snapshot --simulate 1 --probes 'simulated, bogus'", ""},
      {"probes_blank_items", "snapshot --simulate 1 --probes ' bogus , ,'", ""},
      {"watch_container_short", "watch --container abc", ""},
      {"snapshot_timeout_0", "snapshot --timeout 0", ""},
      {"capture_no_dir", "capture", ""},
      {"replay_missing", "replay /nonexistent/recording", ""},
      {"log_level_bad", "list --log-level bogus", ""},
  };
  std::string all;
  for (const auto& c : cases) {
    TempDir dir;
    std::string args = c.args;
    if (!c.config.empty()) {
      dir.write("config.json", c.config);
      args = replace_all(args, "CONFIG", dir.file("config.json"));
    }
    const auto r = run(args);
    const auto said = replace_all(r.err + r.out, dir.path().string(), "DIR");
    all += "== " + c.name + ": gpustream " + c.args + "\nexit " + std::to_string(r.exit_code) +
           "\n" + replace_all(said, GPUSTREAM_CLI_PATH, "gpustream");
  }
  expect_golden("usage_errors.txt", all);
}

}  // namespace
