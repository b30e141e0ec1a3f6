// Children inherit only stdin, stdout and stderr: never a socket or a file of this process that
// lacks FD_CLOEXEC (a server's listening socket held by a hung vendor tool keeps the port busy
// and the clients connected). Run for the configured spawn method and for the fork fallback
// (GPUSTREAM_SUBPROCESS_SPAWN=fork), which systems without closefrom-style spawn actions use.
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "gpustream/subprocess.hpp"
#include "platform_test_util.hpp"

namespace gpustream {
namespace {

using boost::system::error_code;
using test::fake_tool;
using test::is_gone;

// Descriptors of the test process without FD_CLOEXEC: a TCP socket, both ends of a pipe, and
// a high-numbered copy (beyond what a "close the first few" loop would reach).
class InheritableDescriptors {
 public:
  InheritableDescriptors() {
    fds_.push_back(::socket(AF_INET, SOCK_STREAM, 0));
    int p[2];
    if (::pipe(p) == 0) fds_.insert(fds_.end(), {p[0], p[1]});
    fds_.push_back(::dup2(fds_.front(), 900));
  }
  ~InheritableDescriptors() {
    for (int fd : fds_)
      if (fd >= 0) ::close(fd);
  }
  bool ok() const {
    for (int fd : fds_)
      if (fd < 0 || (::fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0) return false;
    return fds_.size() == 4;
  }

 private:
  std::vector<int> fds_;
};

class SubprocessFds : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override { env_.emplace("GPUSTREAM_SUBPROCESS_SPAWN", GetParam()); }
  std::optional<test::ScopedEnv> env_;
};

RunOptions opts(std::vector<std::string> args) {
  RunOptions o;
  o.argv = std::move(args);
  o.timeout = std::chrono::seconds{30};
  return o;
}

TEST_P(SubprocessFds, TheChildHasOnlyStdinStdoutAndStderr) {
  InheritableDescriptors fds;
  ASSERT_TRUE(fds.ok());
  error_code ec;
  const auto r = run(opts(fake_tool({"fds"})), ec);
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(r.output, "0 1 2\n");
}

TEST_P(SubprocessFds, ALineChildHasOnlyStdinStdoutAndStderr) {
  InheritableDescriptors fds;
  ASSERT_TRUE(fds.ok());
  boost::asio::io_context io;
  std::vector<std::string> lines;
  LineChildOptions o;
  o.argv = fake_tool({"fds"});
  o.restart = false;
  LineChild child(io.get_executor(), o,
                  [&](std::string_view line, bool) { lines.emplace_back(line); });
  child.start();
  ASSERT_TRUE(test::run_until(io, [&] { return !lines.empty(); }));
  EXPECT_EQ(lines.front(), "0 1 2");
  child.stop();
}

// The rest of what spawning promises holds on both paths.
TEST_P(SubprocessFds, ProgramsAreFoundInPathAndAMissingOneIsAnError) {
  error_code ec;
  auto r = run(opts({"sh", "-c", "echo found"}), ec);
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(r.output, "found\n");
  EXPECT_TRUE(is_gone(r.pid));

  r = run(opts({"/nonexistent-gpustream/tool"}), ec);
  EXPECT_TRUE(ec == boost::system::errc::no_such_file_or_directory) << ec.message();
  r = run(opts({"no-such-gpustream-tool-anywhere"}), ec);
  EXPECT_TRUE(ec == boost::system::errc::no_such_file_or_directory) << ec.message();
}

TEST_P(SubprocessFds, EnvironmentExitCodesAndSignalsReachTheCaller) {
  error_code ec;
  auto o = opts(fake_tool({"env", "GPUSTREAM_FD_TEST", "stderr", "oops", "exit", "3"}));
  o.env["GPUSTREAM_FD_TEST"] = "set";
  auto r = run(o, ec);
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(r.output, "set\n");
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.stderr_tail, "oops\n");
  r = run(opts(fake_tool({"crash"})), ec);
  EXPECT_EQ(r.signal, SIGSEGV);
}

// A signal this process ignores is not ignored by the child, and a blocked one is unblocked.
TEST_P(SubprocessFds, TheChildHasDefaultSignalDispositionsAndAnEmptyMask) {
  struct sigaction ignore {
  }, old_usr1{};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  ::sigaction(SIGUSR1, &ignore, &old_usr1);
  sigset_t usr2, old_mask;
  sigemptyset(&usr2);
  sigaddset(&usr2, SIGUSR2);
  ::pthread_sigmask(SIG_BLOCK, &usr2, &old_mask);
  error_code ec;
  const auto r1 = run(opts({"sh", "-c", "kill -USR1 $$; echo survived"}), ec);
  const auto r2 = run(opts({"sh", "-c", "kill -USR2 $$; echo survived"}), ec);
  ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  ::sigaction(SIGUSR1, &old_usr1, nullptr);
  EXPECT_EQ(r1.signal, SIGUSR1) << r1.describe();
  EXPECT_EQ(r2.signal, SIGUSR2) << r2.describe();
}

INSTANTIATE_TEST_SUITE_P(Methods, SubprocessFds, ::testing::Values("configured", "fork"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace gpustream
