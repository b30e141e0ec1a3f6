// The real binary: a recording and a server whose device names, error messages, process names,
// probe names, gap reasons and event devices carry ESC[2J, BEL, a CR-forged line and the C1
// CSI (U+009B) — `replay` and `watch --connect` print them escaped, and no control byte reaches
// the terminal (stdout or stderr).
#include <atomic>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include "cli_test_util.hpp"
#include "gpustream/channel.hpp"
#include "gpustream/json.hpp"
#include "gpustream/transport/server.hpp"

namespace gpustream::cli {
namespace {

using test::run;
using test::TempDir;

const std::string kAttack =
    "\x1b[2J\x07\rFORGED LINE\u009b"
    "2J\x1b]0;title\x07";

// The bytes a terminal would act on: C0 controls but LF, DEL, and C1 (raw or as UTF-8).
std::string control_bytes_in(const std::string& s) {
  std::string found;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    const bool c1_utf8 = c == 0xC2 && i + 1 < s.size() &&
                         static_cast<unsigned char>(s[i + 1]) >= 0x80 &&
                         static_cast<unsigned char>(s[i + 1]) <= 0x9F;
    const bool c1_raw =
        c >= 0x80 && c <= 0x9F && (i == 0 || static_cast<unsigned char>(s[i - 1]) < 0xC0);
    if ((c < 0x20 && c != '\n') || c == 0x7F || c1_utf8 || c1_raw)
      found += "[" + std::to_string(c) + " at " + std::to_string(i) + "]";
  }
  return found;
}

GpuSnapshot hostile_snapshot() {
  GpuSnapshot s;
  s.probe = "simulated";
  s.time_unix_ns = 1'790'000'000'000'000'000;
  DeviceSample d;
  d.id = "GPU-" + kAttack;
  d.vendor = Vendor::simulated;
  d.name = "Dev" + kAttack;
  d.metrics.set(Metric::utilization_percent, 42.0, Source::simulated);
  s.devices.push_back(d);
  HostSample h;
  h.processes.push_back({4242, "proc" + kAttack, 1 << 20});
  s.host = h;
  s.errors.push_back({"tool_failed", "message" + kAttack, "GPU-" + kAttack});
  return s;
}

TEST(CliTerminalOutput, ReplayPrintsAHostileRecordingEscaped) {
  TempDir t;
  const auto line = to_json_string(hostile_snapshot());
  // The JSON line carries the controls escaped (\u001b); parsed, they are raw again.
  ASSERT_EQ(line.find('\x1b'), std::string::npos) << line;
  const std::string gap =
      R"({"type":"gap","after_sequence":1,"missed":2,"reason":"lost\u001b[2J\r\u009bFORGED"})";
  t.write("evil.jsonl", line + "\n" + gap + "\n" + line + "\n");
  const auto r = run("replay " + t.file("evil.jsonl"));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(control_bytes_in(r.out), "") << r.out;
  EXPECT_EQ(control_bytes_in(r.err), "") << r.err;
  // Shown, escaped: the operator sees what the recording holds.
  EXPECT_NE(r.out.find("Dev\\x1b[2J\\x07\\x0dFORGE~"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("message\\x1b[2J\\x07\\x0dFORGED LINE\\u009b2J\\x1b]0;title\\x07"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("proc\\x1b[2J"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("(lost\\x1b[2J\\x0d\\u009bFORGED)"), std::string::npos) << r.err;
  // The forged line is not a line: the header, then the device, host and error lines twice.
  std::size_t lines = 0;
  for (std::size_t at = 0; at < r.out.size(); ++lines) {
    const auto nl = r.out.find('\n', at);
    const auto text = r.out.substr(at, nl - at);
    EXPECT_TRUE(text.rfind("PROBE ", 0) == 0 || text.rfind("simulated  ", 0) == 0) << text;
    at = nl + 1;
  }
  EXPECT_EQ(lines, 1u + 2u * 3u);

  // --json: the JSON writer escapes the C0 controls (\u001b), the lines read back the same.
  const auto j = run("replay --json " + t.file("evil.jsonl"));
  EXPECT_EQ(j.exit_code, 0) << j.err;
  EXPECT_EQ(j.out.find('\x1b'), std::string::npos);
  EXPECT_EQ(j.out.find('\x07'), std::string::npos);
  EXPECT_EQ(j.out.find('\r'), std::string::npos);
  const auto back = test::json_lines(j.out);
  ASSERT_EQ(back.size(), 3u);
  EXPECT_EQ(snapshot_from_json(back[0]).devices.at(0).name, "Dev" + kAttack);
}

// `watch --connect` to a server (a fleet's, or any) whose snapshots and events carry the same
// strings: the table on stdout and the event lines on stderr are escaped.
TEST(CliTerminalOutput, WatchConnectPrintsAHostileServerEscaped) {
  boost::asio::io_context io;
  SnapshotChannel channel(io.get_executor());
  transport::ServerOptions o;
  o.http = boost::asio::ip::tcp::endpoint(boost::asio::ip::address_v4::loopback(), 0);
  o.tcp = boost::asio::ip::tcp::endpoint(boost::asio::ip::address_v4::loopback(), 0);
  transport::Server server(io.get_executor(), channel, o);
  server.start();
  const auto tcp_port = server.tcp_endpoint()->port();
  const auto http_port = server.http_endpoint()->port();
  // A snapshot and an event every 50 ms until the watches are done, on the server's thread.
  std::atomic<bool> done{false};
  boost::asio::steady_timer timer(io);
  std::function<void()> tick = [&] {
    if (done.load()) return;
    channel.publish(hostile_snapshot());
    GpuEvent e;
    e.probe = "simulated";
    e.device_id = "GPU-" + kAttack;
    e.kind = EventKind::xid;
    e.data = 79;
    channel.events().publish(e);
    timer.expires_after(std::chrono::milliseconds(50));
    timer.async_wait([&](const boost::system::error_code& ec) {
      if (!ec) tick();
    });
  };
  boost::asio::post(io, tick);
  std::thread server_thread([&] { io.run(); });

  for (const std::string& url : {"tcp://127.0.0.1:" + std::to_string(tcp_port),
                                 "ws://127.0.0.1:" + std::to_string(http_port) + "/ws"}) {
    const auto r = run("watch --count 3 --duration 60 --connect " + url);
    EXPECT_EQ(r.exit_code, 0) << url << "\n" << r.err;
    EXPECT_EQ(control_bytes_in(r.out), "") << url << "\n" << r.out;
    EXPECT_EQ(control_bytes_in(r.err), "") << url << "\n" << r.err;
    EXPECT_NE(r.out.find("Dev\\x1b[2J\\x07\\x0dFORGE~"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("message\\x1b[2J\\x07\\x0dFORGED LINE\\u009b2J"), std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("proc\\x1b[2J"), std::string::npos) << r.out;
    for (std::size_t at = 0; at < r.out.size();) {  // no forged line: each is the table's
      const auto nl = r.out.find('\n', at);
      const auto text = r.out.substr(at, nl - at);
      EXPECT_TRUE(text.empty() || text.rfind("PROBE ", 0) == 0 || text.rfind("simulated  ", 0) == 0)
          << text;
      at = nl + 1;
    }
  }
  // The events reach stderr (a watch of 3 snapshots 50 ms apart sees at least one of them).
  const auto r =
      run("watch --count 5 --duration 60 --connect tcp://127.0.0.1:" + std::to_string(tcp_port));
  EXPECT_EQ(control_bytes_in(r.err), "") << r.err;
  EXPECT_NE(r.err.find("event "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("GPU-\\x1b[2J\\x07\\x0dFORGED LINE\\u009b2J"), std::string::npos) << r.err;

  done.store(true);
  boost::asio::post(io, [&] { server.stop([&] { io.stop(); }); });
  server_thread.join();
}

}  // namespace
}  // namespace gpustream::cli
