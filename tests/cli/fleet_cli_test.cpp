// The fleet flags of the real gpustream binary: node names, encodings, what cannot run.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cli_test_util.hpp"

namespace {

using gpustream::cli::test::run;

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
  // Nothing answers on port 1: a clear error and exit 1, not a hang.
  r = run("fleet --nats nats://127.0.0.1:1 --listen 127.0.0.1:0");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(has(r.err, "cannot connect")) << r.err;
}

}  // namespace
