#include <signal.h>

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "gpustream/subprocess.hpp"
#include "platform_test_util.hpp"

namespace gpustream {
namespace {

using namespace std::chrono_literals;
using Kind = LineChildEvent::Kind;
using test::fake_tool;
using test::is_gone;
using test::run_until;

struct Line {
  std::string text;
  bool partial;
};

// A LineChild with everything it reports recorded.
struct Recorder {
  boost::asio::io_context io;
  std::vector<Line> lines;
  std::vector<LineChildEvent> events;
  std::unique_ptr<LineChild> child;

  explicit Recorder(LineChildOptions options) {
    child = std::make_unique<LineChild>(
        io.get_executor(), std::move(options),
        [this](std::string_view line, bool partial) {
          lines.push_back({std::string(line), partial});
        },
        [this](const LineChildEvent& e) { events.push_back(e); });
  }

  int count(Kind kind) const {
    int n = 0;
    for (const auto& e : events) n += e.kind == kind ? 1 : 0;
    return n;
  }
  std::vector<LineChildEvent> of(Kind kind) const {
    std::vector<LineChildEvent> result;
    for (const auto& e : events) {
      if (e.kind == kind) result.push_back(e);
    }
    return result;
  }
  bool wait_for(Kind kind, int n = 1) {
    return run_until(io, [&] { return count(kind) >= n; });
  }
};

LineChildOptions options(std::vector<std::string> args) {
  LineChildOptions o;
  o.argv = fake_tool(std::move(args));
  o.restart_initial = 10ms;
  o.restart_max = 40ms;
  o.stop_grace = 5s;
  return o;
}

TEST(LineChild, DeliversEachLineThenStops) {
  Recorder r(options({"lines", "5", "5", "hang"}));
  r.child->start();
  ASSERT_TRUE(r.wait_for(Kind::started));
  EXPECT_TRUE(r.child->running());
  const auto pid = r.child->pid();
  ASSERT_TRUE(pid);
  EXPECT_EQ(r.events.front().pid, *pid);
  ASSERT_TRUE(run_until(r.io, [&] { return r.lines.size() == 5; }));
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(r.lines[i].text, "line " + std::to_string(i + 1));
    EXPECT_FALSE(r.lines[i].partial);
  }
  r.child->stop();
  ASSERT_TRUE(r.wait_for(Kind::stopped));
  EXPECT_EQ(r.of(Kind::stopped).front().signal, SIGTERM);
  EXPECT_FALSE(r.child->running());
  EXPECT_FALSE(r.child->pid());
  EXPECT_TRUE(is_gone(*pid));
  EXPECT_EQ(r.count(Kind::exited), 0);  // a stop is not reported as a crash
}

TEST(LineChild, PartialLastLineIsDeliveredFlagged) {
  auto o = options({"print", "first", "partial", "{\"cut\": "});
  o.restart = false;
  Recorder r(o);
  r.child->start();
  ASSERT_TRUE(r.wait_for(Kind::exited));
  ASSERT_EQ(r.lines.size(), 2u);
  EXPECT_EQ(r.lines[0].text, "first");
  EXPECT_FALSE(r.lines[0].partial);
  EXPECT_EQ(r.lines[1].text, "{\"cut\": ");
  EXPECT_TRUE(r.lines[1].partial);
  const auto exited = r.of(Kind::exited).front();
  EXPECT_EQ(exited.exit_code, 0);
  EXPECT_EQ(exited.restart_in, std::nullopt);
  EXPECT_TRUE(is_gone(exited.pid));
}

TEST(LineChild, LineSplitAcrossWritesIsJoined) {
  auto o = options({"partial", "{\"a\":", "sleep", "30", "print", "1}", "print", "x\r"});
  o.restart = false;
  Recorder r(o);
  r.child->start();
  ASSERT_TRUE(r.wait_for(Kind::exited));
  ASSERT_EQ(r.lines.size(), 2u);
  EXPECT_EQ(r.lines[0].text, "{\"a\":1}");
  EXPECT_FALSE(r.lines[0].partial);
  EXPECT_EQ(r.lines[1].text, "x");  // a trailing '\r' is dropped
}

TEST(LineChild, OverlongLineIsReportedOnceAndSkipped) {
  auto o = options({"print", "before", "long", "100", "long", "200000", "print", "after"});
  o.max_line_bytes = 100;
  o.restart = false;
  Recorder r(o);
  r.child->start();
  ASSERT_TRUE(r.wait_for(Kind::exited));
  ASSERT_EQ(r.lines.size(), 3u);
  EXPECT_EQ(r.lines[0].text, "before");
  EXPECT_EQ(r.lines[1].text, std::string(100, 'y'));  // exactly at the limit is fine
  EXPECT_EQ(r.lines[2].text, "after");
  ASSERT_EQ(r.count(Kind::line_too_long), 1);
  const auto message = r.of(Kind::line_too_long).front().message;
  EXPECT_NE(message.find("longer than 100 bytes"), std::string::npos) << message;
  EXPECT_NE(message.find("yyyy"), std::string::npos) << message;
}

TEST(LineChild, OverlongLineWithoutNewlineAtEofIsNotDeliveredAsPartial) {
  auto o = options({"print", "ok", "partial", std::string(300, 'z')});
  o.max_line_bytes = 100;
  o.restart = false;
  Recorder r(o);
  r.child->start();
  ASSERT_TRUE(r.wait_for(Kind::exited));
  ASSERT_EQ(r.lines.size(), 1u);
  EXPECT_EQ(r.lines[0].text, "ok");
  EXPECT_EQ(r.count(Kind::line_too_long), 1);
}

TEST(LineChild, GarbageIsSplitWithoutLoss) {
  auto o = options({"garbage", "20000"});
  o.restart = false;
  Recorder r(o);
  r.child->start();
  ASSERT_TRUE(r.wait_for(Kind::exited));
  std::size_t bytes = 0;
  std::size_t complete = 0;
  bool has_nul = false;
  for (const auto& line : r.lines) {
    bytes += line.text.size();
    complete += line.partial ? 0 : 1;
    has_nul = has_nul || line.text.find('\0') != std::string::npos;
  }
  // Every byte arrives: in a line, as a '\n', or as a dropped '\r' before one.
  EXPECT_LE(bytes + complete, 20000u);
  EXPECT_GE(bytes + 2 * complete, 20000u);
  EXPECT_GT(complete, 10u);
  EXPECT_TRUE(has_nul);
}

TEST(LineChild, RestartsWithExponentialBackoffAfterCrashes) {
  Recorder r(options({"print", "hello", "stderr", "segfault ahead", "crash"}));
  r.child->start();
  ASSERT_TRUE(r.wait_for(Kind::exited, 5));
  const auto exits = r.of(Kind::exited);
  const std::vector<std::chrono::milliseconds> expected{10ms, 20ms, 40ms, 40ms, 40ms};
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(exits[i].signal, SIGSEGV);
    EXPECT_EQ(exits[i].exit_code, std::nullopt);
    EXPECT_EQ(exits[i].restart_in, expected[i]) << "exit #" << i;
    EXPECT_EQ(exits[i].stderr_tail, "segfault ahead\n");
    EXPECT_TRUE(is_gone(exits[i].pid));
  }
  EXPECT_NE(exits[0].message.find("killed by signal 11 (SIGSEGV): segfault ahead"),
            std::string::npos)
      << exits[0].message;
  EXPECT_NE(exits[0].message.find("restarting in 10 ms"), std::string::npos);
  EXPECT_GE(r.count(Kind::started), 5);
  EXPECT_GE(r.child->restarts(), 4u);
  // Each run printed its line before crashing.
  EXPECT_GE(r.lines.size(), 5u);
  for (const auto& line : r.lines) EXPECT_EQ(line.text, "hello");
  r.child->stop();
  ASSERT_TRUE(r.wait_for(Kind::stopped));
  EXPECT_EQ(r.events.back().kind, Kind::stopped);
}

TEST(LineChild, SpawnFailureIsReportedAndRetried) {
  LineChildOptions o;
  o.argv = {"/nonexistent/macmon", "pipe"};
  o.restart_initial = 10ms;
  o.restart_max = 15ms;
  Recorder r(o);
  r.child->start();
  ASSERT_TRUE(r.wait_for(Kind::spawn_failed, 3));
  const auto failures = r.of(Kind::spawn_failed);
  EXPECT_EQ(failures[0].restart_in, 10ms);
  EXPECT_EQ(failures[1].restart_in, 15ms);
  EXPECT_EQ(failures[2].restart_in, 15ms);
  EXPECT_NE(failures[0].message.find("cannot start macmon: No such file"), std::string::npos)
      << failures[0].message;
  EXPECT_EQ(r.count(Kind::started), 0);
  r.child->stop();
  ASSERT_TRUE(r.wait_for(Kind::stopped));
  const auto n = r.events.size();
  r.io.run_for(50ms);  // no restart after stop (a would-be retry is due within 15 ms)
  EXPECT_EQ(r.events.size(), n);
}

TEST(LineChild, StopEscalatesToSigkill) {
  test::TempDir dir;
  auto o = options({"ignore-term", "pid-file", dir.file("pid"), "hang"});
  o.stop_grace = 100ms;
  Recorder r(o);
  r.child->start();
  ASSERT_TRUE(run_until(r.io, [&] { return test::read_pid_file(dir.file("pid")).has_value(); }));
  r.child->stop();
  r.child->stop();  // idempotent
  ASSERT_TRUE(r.wait_for(Kind::stopped));
  EXPECT_EQ(r.count(Kind::stopped), 1);
  const auto stopped = r.of(Kind::stopped).front();
  EXPECT_EQ(stopped.signal, SIGKILL);
  EXPECT_TRUE(is_gone(*test::read_pid_file(dir.file("pid"))));
}

TEST(LineChild, ExitWithCodeKeepsStderrTailAndMayNotRestart) {
  auto o = options({"stderr", "macmon: this machine is not an Apple Silicon Mac", "exit", "1"});
  o.restart = false;
  Recorder r(o);
  r.child->start();
  ASSERT_TRUE(r.wait_for(Kind::exited));
  const auto e = r.of(Kind::exited).front();
  EXPECT_EQ(e.exit_code, 1);
  EXPECT_EQ(e.stderr_tail, "macmon: this machine is not an Apple Silicon Mac\n");
  EXPECT_NE(e.message.find("exited with code 1: macmon: this machine is not"), std::string::npos)
      << e.message;
  EXPECT_FALSE(r.child->running());
  r.child->start();  // may be started again by hand
  ASSERT_TRUE(r.wait_for(Kind::exited, 2));
}

TEST(LineChild, StopWhileWaitingToRestart) {
  auto o = options({"exit", "7"});
  o.restart_initial = 10s;  // the restart would come long after the test
  Recorder r(o);
  r.child->start();
  ASSERT_TRUE(r.wait_for(Kind::exited));
  EXPECT_EQ(r.of(Kind::exited).front().restart_in, 10s);
  r.child->stop();
  EXPECT_EQ(r.count(Kind::stopped), 0);  // reported from a handler, not from inside stop()
  ASSERT_TRUE(r.wait_for(Kind::stopped));
}

TEST(LineChild, CallbackMayDestroyTheLineChild) {
  test::TempDir dir;
  Recorder r(options({"pid-file", dir.file("pid"), "lines", "1000", "0", "hang"}));
  int lines_after = 0;
  bool destroyed = false;
  r.child = std::make_unique<LineChild>(
      r.io.get_executor(), options({"pid-file", dir.file("pid"), "lines", "1000", "0", "hang"}),
      [&, tag = std::string(100, 'c')](std::string_view, bool) {
        if (destroyed) ++lines_after;
        r.child.reset();                // from inside the callback...
        destroyed = tag.size() == 100;  // ...and its captures are still alive afterwards
      },
      [&](const LineChildEvent& e) {
        if (destroyed) ++lines_after;
        (void)e;
      });
  r.child->start();
  ASSERT_TRUE(run_until(r.io, [&] { return destroyed; }));
  const auto pid = test::read_pid_file(dir.file("pid"));
  ASSERT_TRUE(pid);
  // The child is stopped in the background; nothing is reported any more.
  ASSERT_TRUE(run_until(r.io, [&] { return is_gone(*pid); }));
  EXPECT_EQ(lines_after, 0);
}

TEST(LineChild, DestroyingTheIoContextKillsAndReapsTheChild) {
  test::TempDir dir;
  std::optional<int> pid;
  {
    Recorder r(options({"ignore-term", "pid-file", dir.file("pid"), "hang"}));
    r.child->start();
    ASSERT_TRUE(run_until(r.io, [&] { return test::read_pid_file(dir.file("pid")).has_value(); }));
    pid = test::read_pid_file(dir.file("pid"));
    r.child.reset();  // SIGTERM is ignored; the SIGKILL timer is pending when io goes away
  }
  ASSERT_TRUE(pid);
  EXPECT_TRUE(is_gone(*pid));
}

}  // namespace
}  // namespace gpustream
