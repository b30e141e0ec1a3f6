#include <signal.h>

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <optional>
#include <string>
#include <thread>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_future.hpp>

#include "gpustream/errors.hpp"
#include "gpustream/subprocess.hpp"
#include "platform_test_util.hpp"

namespace gpustream {
namespace {

using namespace std::chrono_literals;
using boost::system::error_code;
using test::fake_tool;
using test::is_gone;
using test::run_until;

struct Outcome {
  error_code ec;
  RunResult result;
};

// Runs one async_run on a fresh io_context and waits for its completion.
Outcome run_async(RunOptions options) {
  boost::asio::io_context io;
  std::optional<Outcome> out;
  async_run(io.get_executor(), std::move(options), [&](error_code ec, RunResult r) {
    out = Outcome{ec, std::move(r)};
  });
  EXPECT_TRUE(run_until(io, [&] { return out.has_value(); }));
  return out.value_or(Outcome{});
}

RunOptions run_opts(std::vector<std::string> args, std::chrono::milliseconds timeout = 10s) {
  RunOptions o;
  o.argv = fake_tool(std::move(args));
  o.timeout = timeout;
  return o;
}

TEST(Subprocess, CapturesStdoutAndStderrOfASuccessfulRun) {
  auto [ec, r] = run_async(run_opts({"print", "hello", "stderr", "a warning", "print", "world"}));
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.signal, std::nullopt);
  EXPECT_EQ(r.output, "hello\nworld\n");
  EXPECT_EQ(r.stderr_tail, "a warning\n");
  EXPECT_TRUE(r.success());
  EXPECT_FALSE(r.timed_out);
  EXPECT_FALSE(r.truncated);
  EXPECT_TRUE(is_gone(r.pid));
}

TEST(Subprocess, NonZeroExitIsAResultNotAnError) {
  auto [ec, r] = run_async(
      run_opts({"print", "partial data", "stderr", "amd-smi: no GPU found", "exit", "3"}));
  EXPECT_FALSE(ec);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_FALSE(r.success());
  EXPECT_EQ(r.output, "partial data\n");
  EXPECT_EQ(r.describe(), "exited with code 3: amd-smi: no GPU found");
  EXPECT_TRUE(is_gone(r.pid));
}

TEST(Subprocess, CrashIsReportedWithTheSignal) {
  auto [ec, r] = run_async(run_opts({"print", "before", "crash"}));
  EXPECT_FALSE(ec);
  EXPECT_EQ(r.exit_code, std::nullopt);
  EXPECT_EQ(r.signal, SIGSEGV);
  EXPECT_EQ(r.output, "before\n");
  EXPECT_FALSE(r.success());
  EXPECT_EQ(r.describe(), "killed by signal 11 (SIGSEGV)");
  EXPECT_TRUE(is_gone(r.pid));
}

TEST(Subprocess, TimeoutKillsAndReapsTheChild) {
  auto [ec, r] = run_async(run_opts({"pid", "hang"}, 200ms));
  EXPECT_EQ(ec, make_error_code(errc::timeout));
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.signal, SIGKILL);
  EXPECT_EQ(r.output, std::to_string(r.pid) + "\n");  // the pid reported is the child's
  EXPECT_TRUE(is_gone(r.pid)) << "the child must be killed and reaped, not left a zombie";
  EXPECT_EQ(r.describe(), "timed out and was killed");
}

TEST(Subprocess, TimeoutKillsWhatTheChildLeftHoldingThePipes) {
  // The child exits at once, but a grandchild keeps stdout open: only the timeout ends the run,
  // and it kills the whole process group.
  auto [ec, r] = run_async(run_opts({"spawn-hang", "print", "done"}, 300ms));
  EXPECT_EQ(ec, make_error_code(errc::timeout));
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.output, "done\n");
  EXPECT_TRUE(is_gone(r.pid));
  // The grandchild was in the child's process group, which no longer exists.
  const auto end = std::chrono::steady_clock::now() + 10s;
  while (::kill(-r.pid, 0) == 0 && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(1ms);  // the grandchild is reaped by init, not by us
  }
  EXPECT_NE(::kill(-r.pid, 0), 0) << "process group " << r.pid << " still has members";
}

TEST(Subprocess, HugeOutputIsCappedAndDrained) {
  RunOptions o = run_opts({"bytes", "5000000", "print", "end"});
  o.max_output_bytes = 1000;
  auto [ec, r] = run_async(o);
  EXPECT_FALSE(ec);
  EXPECT_EQ(r.exit_code, 0);  // drained to the end: the child was never blocked or killed
  EXPECT_TRUE(r.truncated);
  EXPECT_EQ(r.output.size(), 1000u);
  EXPECT_EQ(r.output.substr(0, 64), std::string(63, 'x') + "\n");
  EXPECT_EQ(r.describe(), "exited with code 0 (output truncated)");
}

TEST(Subprocess, OutputExactlyAtTheCapIsNotTruncated) {
  RunOptions o = run_opts({"bytes", "640"});
  o.max_output_bytes = 640;
  auto [ec, r] = run_async(o);
  EXPECT_FALSE(ec);
  EXPECT_EQ(r.output.size(), 640u);
  EXPECT_FALSE(r.truncated);
}

TEST(Subprocess, KeepsOnlyTheTailOfStderr) {
  RunOptions o = run_opts({"stderr-bytes", "64000", "stderr", "the real error", "exit", "1"});
  o.stderr_tail_bytes = 256;
  auto [ec, r] = run_async(o);
  EXPECT_FALSE(ec);
  EXPECT_EQ(r.stderr_tail.size(), 256u);
  EXPECT_EQ(r.stderr_tail.substr(r.stderr_tail.size() - 15), "the real error\n");
  EXPECT_EQ(r.describe(), "exited with code 1: the real error");
}

TEST(Subprocess, GarbageBytesArrivePreserved) {
  auto [ec, r] = run_async(run_opts({"garbage", "4096"}));
  EXPECT_FALSE(ec);
  EXPECT_EQ(r.exit_code, 0);
  ASSERT_EQ(r.output.size(), 4096u);
  EXPECT_NE(r.output.find('\0'), std::string::npos);  // NUL bytes survive
}

TEST(Subprocess, PartialLastLineIsKept) {
  auto [ec, r] = run_async(run_opts({"print", "one", "partial", "{\"truncated\":"}));
  EXPECT_FALSE(ec);
  EXPECT_EQ(r.output, "one\n{\"truncated\":");
}

TEST(Subprocess, EnvironmentOverrides) {
  RunOptions o = run_opts({"env", "GPUSTREAM_TEST_VALUE", "env", "PATH"});
  o.env["GPUSTREAM_TEST_VALUE"] = "42";
  auto [ec, r] = run_async(o);
  EXPECT_FALSE(ec);
  const auto nl = r.output.find('\n');
  ASSERT_NE(nl, std::string::npos);
  EXPECT_EQ(r.output.substr(0, nl), "42");
  EXPECT_NE(r.output.substr(nl + 1), "(unset)\n");  // the rest of the environment is inherited
}

TEST(Subprocess, MissingProgramIsAnError) {
  RunOptions o;
  o.argv = {"/nonexistent/amd-smi", "--json"};
  auto [ec, r] = run_async(o);
  EXPECT_EQ(ec, boost::system::errc::no_such_file_or_directory) << ec.message();
  EXPECT_EQ(r.pid, -1);

  RunOptions by_name;
  by_name.argv = {"gpustream-no-such-tool-anywhere"};
  EXPECT_EQ(run_async(by_name).ec, boost::system::errc::no_such_file_or_directory);
}

TEST(Subprocess, EmptyArgvIsAnError) {
  auto [ec, r] = run_async(RunOptions{});
  EXPECT_EQ(ec, boost::system::errc::invalid_argument);
}

TEST(Subprocess, ProgramFoundInPath) {
  RunOptions o;
  o.argv = {"sh", "-c", "echo via-path; exit 4"};
  auto [ec, r] = run_async(o);
  EXPECT_FALSE(ec);
  EXPECT_EQ(r.output, "via-path\n");
  EXPECT_EQ(r.exit_code, 4);
}

TEST(Subprocess, CancellationKillsAndReaps) {
  test::TempDir dir;
  const auto pid_file = dir.file("pid");
  boost::asio::io_context io;
  boost::asio::cancellation_signal cancel;
  std::optional<Outcome> out;
  async_run(io.get_executor(), run_opts({"pid-file", pid_file, "hang"}),
            boost::asio::bind_cancellation_slot(cancel.slot(), [&](error_code ec, RunResult r) {
              out = Outcome{ec, r};
            }));
  ASSERT_TRUE(run_until(io, [&] { return test::read_pid_file(pid_file).has_value(); }));
  cancel.emit(boost::asio::cancellation_type::terminal);
  ASSERT_TRUE(run_until(io, [&] { return out.has_value(); }));
  EXPECT_EQ(out->ec, boost::asio::error::operation_aborted);
  EXPECT_FALSE(out->result.timed_out);
  EXPECT_EQ(out->result.signal, SIGKILL);
  EXPECT_EQ(out->result.pid, test::read_pid_file(pid_file));
  EXPECT_TRUE(is_gone(out->result.pid));
}

TEST(Subprocess, CancellationBeforeTheChildStartedSpawnsNothing) {
  boost::asio::io_context io;
  boost::asio::cancellation_signal cancel;
  std::optional<Outcome> out;
  async_run(io.get_executor(), run_opts({"hang"}),
            boost::asio::bind_cancellation_slot(cancel.slot(), [&](error_code ec, RunResult r) {
              out = Outcome{ec, r};
            }));
  cancel.emit(boost::asio::cancellation_type::terminal);  // before io ran anything
  ASSERT_TRUE(run_until(io, [&] { return out.has_value(); }));
  EXPECT_EQ(out->ec, boost::asio::error::operation_aborted);
  EXPECT_EQ(out->result.pid, -1);
}

TEST(Subprocess, HandlerRunsOnItsAssociatedExecutor) {
  boost::asio::thread_pool pool(2);
  auto strand = boost::asio::make_strand(pool.get_executor());
  boost::asio::io_context io;
  std::promise<bool> on_strand;
  async_run(io.get_executor(), run_opts({"print", "x"}),
            boost::asio::bind_executor(strand, [&](error_code, RunResult) {
              on_strand.set_value(strand.running_in_this_thread());
            }));
  auto f = on_strand.get_future();
  ASSERT_TRUE(run_until(io, [&] { return f.wait_for(0s) == std::future_status::ready; }));
  EXPECT_TRUE(f.get());
  pool.join();
}

TEST(Subprocess, WorksWithFuturesOnAMultiThreadedPool) {
  boost::asio::thread_pool pool(2);
  std::vector<std::future<RunResult>> runs;
  for (int i = 0; i < 8; ++i) {
    runs.push_back(
        async_run(pool.get_executor(), run_opts({"lines", "3", "1"}), boost::asio::use_future));
  }
  for (auto& f : runs) {
    ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
    const RunResult r = f.get();
    EXPECT_EQ(r.output, "line 1\nline 2\nline 3\n");
    EXPECT_TRUE(is_gone(r.pid));
  }
  pool.join();
}

TEST(Subprocess, UseFutureReportsTimeoutAsException) {
  boost::asio::thread_pool pool(1);
  auto f = async_run(pool.get_executor(), run_opts({"hang"}, 100ms), boost::asio::use_future);
  ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
  try {
    f.get();
    FAIL() << "expected a timeout";
  } catch (const boost::system::system_error& e) {
    EXPECT_EQ(e.code(), make_error_code(errc::timeout));
  }
  pool.join();
}

TEST(Subprocess, DestroyingTheIoContextKillsAndReapsTheChild) {
  test::TempDir dir;
  const auto pid_file = dir.file("pid");
  bool called = false;
  {
    boost::asio::io_context io;
    async_run(io.get_executor(), run_opts({"pid-file", pid_file, "hang"}),
              [&](error_code, RunResult) { called = true; });
    ASSERT_TRUE(run_until(io, [&] { return test::read_pid_file(pid_file).has_value(); }));
  }  // the pending run is destroyed with the io_context
  EXPECT_FALSE(called);
  const auto pid = test::read_pid_file(pid_file);
  ASSERT_TRUE(pid);
  EXPECT_TRUE(is_gone(*pid));
}

TEST(Subprocess, SyncRun) {
  RunOptions o = run_opts({"print", "sync", "exit", "2"});
  error_code ec;
  RunResult r = run(o, ec);
  EXPECT_FALSE(ec);
  EXPECT_EQ(r.output, "sync\n");
  EXPECT_EQ(r.exit_code, 2);

  RunOptions bad;
  bad.argv = {"/nonexistent/tool"};
  EXPECT_THROW(run(bad), boost::system::system_error);
  EXPECT_EQ(run(run_opts({"hang"}, 100ms), ec).timed_out, true);
  EXPECT_EQ(ec, make_error_code(errc::timeout));
}

// Without pidfd_open (old kernels, seccomp), exits are found by polling waitid().
TEST(Subprocess, PollingFallbackFindsExitsAndReaps) {
  test::ScopedEnv env("GPUSTREAM_SUBPROCESS_WAIT", "poll");
  auto crashed = run_async(run_opts({"print", "x", "crash"}));
  EXPECT_FALSE(crashed.ec);
  EXPECT_EQ(crashed.result.signal, SIGSEGV);
  EXPECT_EQ(crashed.result.output, "x\n");
  EXPECT_TRUE(is_gone(crashed.result.pid));

  auto exited = run_async(run_opts({"exit", "5"}));
  EXPECT_EQ(exited.result.exit_code, 5);
  EXPECT_TRUE(is_gone(exited.result.pid));

  auto hung = run_async(run_opts({"hang"}, 100ms));
  EXPECT_EQ(hung.ec, make_error_code(errc::timeout));
  EXPECT_EQ(hung.result.signal, SIGKILL);
  EXPECT_TRUE(is_gone(hung.result.pid));
}

TEST(Subprocess, SignalNames) {
  EXPECT_EQ(signal_name(SIGSEGV), "SIGSEGV");
  EXPECT_EQ(signal_name(SIGKILL), "SIGKILL");
  EXPECT_EQ(signal_name(SIGTERM), "SIGTERM");
  EXPECT_EQ(signal_name(64), "signal 64");
}

}  // namespace
}  // namespace gpustream
