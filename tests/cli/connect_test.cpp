// The real binary: `watch --connect` never shows a credential of its URL, and `serve` and
// `watch` read a token file the same way.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <string>

#include <gtest/gtest.h>

#include "cli_test_util.hpp"

namespace gpustream::cli {
namespace {

using test::CliChild;
using test::run;
using test::slurp;
using test::TempDir;

// A loopback port nobody listens on (bound, then released).
int unused_port() {
  const int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  EXPECT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&a), len), 0);
  EXPECT_EQ(::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len), 0);
  ::close(s);
  return ntohs(a.sin_port);
}

TEST(CliConnect, TheTokenInTheUrlIsNeverPrinted) {
  const auto url = "ws://127.0.0.1:" + std::to_string(unused_port()) + "/ws?token=SECRET4711";
  const auto r = run("watch --json --duration 1 --log-level info --connect '" + url + "'");
  EXPECT_EQ(r.exit_code, 1);  // nothing was delivered
  EXPECT_EQ(r.err.find("SECRET4711"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("SECRET4711"), std::string::npos) << r.out;
  // The URL itself is still shown, so the user knows what failed.
  EXPECT_NE(r.err.find("/ws?token=***"), std::string::npos) << r.err;
}

TEST(CliConnect, ABadUrlIsShownWithoutItsCredentials) {
  for (const std::string url :
       {"tcp://127.0.0.1:9?token=SECRET4711", "ws://alice:SECRET4711@127.0.0.1:9/ws",
        "wss://alice:SECRET4711@127.0.0.1:9/ws", "tls://127.0.0.1:9?token=SECRET4711"}) {
    const auto r = run("watch --connect '" + url + "'");
    EXPECT_EQ(r.exit_code, 2) << url;
    EXPECT_NE(r.err.find("invalid server URL"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("SECRET4711"), std::string::npos) << r.err;
  }
}

// A token file written on Windows (CRLF) or by `echo`: serve and watch agree on the token.
TEST(CliConnect, ServeAndWatchReadTheTokenFileTheSameWay) {
  TempDir t;
  t.write("token", "s3cret-token\r\n");
  ::chmod(t.file("token").c_str(), 0600);
  CliChild serve({"serve", "--simulate", "1", "--probes", "simulated", "--interval", "0.05",
                  "--listen", "127.0.0.1:0", "--token", t.file("token")},
                 t.file("serve.err"));
  ASSERT_TRUE(serve.started());
  const auto listening = serve.read_line();
  ASSERT_TRUE(listening) << slurp(t.file("serve.err"));
  const std::string prefix = "listening http ";
  ASSERT_EQ(listening->rfind(prefix, 0), 0u) << *listening;
  const auto addr = listening->substr(prefix.size());

  auto r =
      run("watch --json --count 1 --connect ws://" + addr + "/ws --token-file " + t.file("token"));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(test::json_lines(r.out).size(), 1u);

  t.write("wrong", "not-the-token\n");
  ::chmod(t.file("wrong").c_str(), 0600);
  r = run("watch --json --duration 1 --connect ws://" + addr + "/ws --token-file " +
          t.file("wrong"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("401 Unauthorized"), std::string::npos) << r.err;

  serve.signal(SIGTERM);
  EXPECT_EQ(serve.wait(), 0);
}

TEST(CliConnect, ABlankTokenFileIsTheSameErrorForServeAndWatch) {
  TempDir t;
  t.write("token", " \r\n");
  const auto s = run("serve --simulate 1 --listen 127.0.0.1:0 --token " + t.file("token"));
  const auto w = run("watch --connect ws://127.0.0.1:9/ws --token-file " + t.file("token"));
  for (const auto& r : {s, w}) {
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("the token file '" + t.file("token") + "' is empty"), std::string::npos)
        << r.err;
  }
}

}  // namespace
}  // namespace gpustream::cli
