// `gpustream watch` shows GPU events, with local probes and with --connect: the real binary over
// the fake NVML (tests/fakes/nvml), an Xid fired through the fake's event_trigger file. Each
// event is one line on stderr: time, device, kind and Xid, sequence and probe.
#include <signal.h>
#include <stdlib.h>

#include <filesystem>
#include <optional>
#include <regex>
#include <string>

#include <gtest/gtest.h>
#include <boost/json.hpp>

#include "cli_test_util.hpp"
#include "gpustream_fake_nvml_paths.hpp"

namespace gpustream::cli {
namespace {

using test::CliChild;
using test::slurp;
using test::TempDir;

constexpr const char* kGpu = "GPU-aaaaaaaa-1111-2222-3333-444444444444";

/// A scenario with one GPU whose events fire when `trigger` appears, set in the environment the
/// children inherit for as long as it lives.
class Scenario {
 public:
  explicit Scenario(const TempDir& t) : trigger_(t.file("trigger")), tmp_(t.file("trigger.tmp")) {
    t.write("scenario.txt", "devices=1\nevent_trigger=" + trigger_ + "\ndevice.0.uuid=" + kGpu +
                                "\ndevice.0.name=NVIDIA A100-SXM4-40GB\n");
    ::setenv(fakes::kFakeNvmlScenarioEnv, t.file("scenario.txt").c_str(), 1);
  }
  ~Scenario() { ::unsetenv(fakes::kFakeNvmlScenarioEnv); }
  Scenario(const Scenario&) = delete;
  Scenario& operator=(const Scenario&) = delete;

  /// Fires one Xid on GPU 0 in whichever process has the fake NVML waiting for events (the
  /// file is written under another name, then renamed: the fake never reads half of it).
  void fire_xid(int xid) const {
    std::ofstream(tmp_) << "device=0\ntype=xid\ndata=" << xid << "\n";
    std::filesystem::rename(tmp_, trigger_);
  }

 private:
  std::string trigger_, tmp_;
};

/// Reads `watch`'s stdout (one JSON line per snapshot, which paces the wait) until its stderr
/// has a line containing `needle`: that line; nullopt when `max_lines` snapshots came first.
std::optional<std::string> await_stderr_line(CliChild& watch, const std::string& err_file,
                                             const std::string& needle, int max_lines = 600) {
  for (int i = 0; i < max_lines; ++i) {
    std::stringstream err(slurp(err_file));
    for (std::string line; std::getline(err, line);)
      if (line.find(needle) != std::string::npos) return line;
    if (!watch.read_line()) return std::nullopt;  // watch ended
  }
  return std::nullopt;
}

// "gpustream: event 2026-11-26T09:00:00.123Z GPU-... xid 79 (#1, nvidia)"
void expect_event_line(const std::string& line, int xid) {
  const std::regex shape("gpustream: event \\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{3}Z " +
                         std::string(kGpu) + " xid " + std::to_string(xid) +
                         " \\(#\\d+, nvidia\\)");
  EXPECT_TRUE(std::regex_match(line, shape)) << line;
}

TEST(CliWatchEvents, LocalProbesPrintEachEventOnALine) {
  TempDir t;
  Scenario scenario(t);
  CliChild watch({"watch", "--json", "--probes", "nvidia", "--nvml-library", fakes::kFakeNvml,
                  "--interval", "0.05"},
                 t.file("err"));
  ASSERT_TRUE(watch.started());
  const auto first = watch.read_line();
  ASSERT_TRUE(first) << slurp(t.file("err"));
  EXPECT_EQ(boost::json::parse(*first).at("devices").at(0).at("id").as_string(), kGpu);
  scenario.fire_xid(79);
  const auto line = await_stderr_line(watch, t.file("err"), " xid ");
  ASSERT_TRUE(line) << slurp(t.file("err"));
  expect_event_line(*line, 79);
  watch.signal(SIGINT);
  EXPECT_EQ(watch.wait(), 0);
}

TEST(CliWatchEvents, ConnectPrintsTheServersEvents) {
  TempDir t;
  Scenario scenario(t);
  CliChild serve({"serve", "--probes", "nvidia", "--nvml-library", fakes::kFakeNvml, "--interval",
                  "0.05", "--listen", "127.0.0.1:0"},
                 t.file("serve.err"));
  ASSERT_TRUE(serve.started());
  const auto listening = serve.read_line();
  ASSERT_TRUE(listening) << slurp(t.file("serve.err"));
  const std::string prefix = "listening http ";
  ASSERT_EQ(listening->rfind(prefix, 0), 0u) << *listening;
  const auto addr = listening->substr(prefix.size());

  CliChild watch({"watch", "--json", "--connect", "ws://" + addr + "/ws"}, t.file("err"));
  ASSERT_TRUE(watch.started());
  ASSERT_TRUE(watch.read_line()) << slurp(t.file("err"));  // connected: snapshots come
  scenario.fire_xid(48);
  const auto line = await_stderr_line(watch, t.file("err"), " xid ");
  ASSERT_TRUE(line) << slurp(t.file("err")) << slurp(t.file("serve.err"));
  expect_event_line(*line, 48);
  EXPECT_NE(line->find("(#1, nvidia)"), std::string::npos) << *line;  // the server's sequence
  watch.signal(SIGINT);
  EXPECT_EQ(watch.wait(), 0);
  serve.signal(SIGTERM);
  EXPECT_EQ(serve.wait(), 0);
}

}  // namespace
}  // namespace gpustream::cli
