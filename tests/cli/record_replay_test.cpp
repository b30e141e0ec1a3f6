// The real binary: record's write errors and durability, gaps in a recording, replay of an
// interrupted recording, watch ending when its reader goes away.
#include <signal.h>

#include <algorithm>
#include <string>

#include <gtest/gtest.h>
#include <boost/json.hpp>

#include "cli_test_util.hpp"

namespace gpustream::cli {
namespace {

using test::CliChild;
using test::json_lines;
using test::run;
using test::slurp;
using test::TempDir;

const std::string kSim = " --interval 0.05 --simulate 1 --probes simulated";

// The CLI's own messages start with "gpustream: " (log lines start with a timestamp).
bool has_cli_message(const std::string& err) {
  return err.rfind("gpustream: ", 0) == 0 || err.find("\ngpustream: ") != std::string::npos;
}

std::string recording(const TempDir& t, int count) {
  const auto file = t.file("rec.jsonl");
  const auto r = run("record " + file + " --count " + std::to_string(count) + kSim);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return slurp(file);
}

TEST(CliRecord, AWriteErrorIsAnErrorNotASuccess) {
  const auto r = run("record /dev/full --count 3" + kSim);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("cannot write to '/dev/full': No space left on device"), std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("recorded"), std::string::npos) << r.err;
}

TEST(CliRecord, AFileThatCannotBeCreatedIsAnError) {
  const auto r = run("record /nonexistent-gpustream-dir/rec.jsonl --count 1" + kSim);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("No such file or directory"), std::string::npos) << r.err;
}

// SIGINT and SIGTERM end a recording like --count does: every line whole, the count reported.
TEST(CliRecord, ASignalEndsTheRecordingWithWholeLines) {
  for (const int sig : {SIGTERM, SIGINT}) {
    TempDir t;
    const auto file = t.file("rec.jsonl");
    CliChild child(
        {"record", file, "--interval", "0.05", "--simulate", "1", "--probes", "simulated"},
        t.file("err"));
    ASSERT_TRUE(child.started());
    // Two snapshots recorded, then the signal. The deadline only matters on failure.
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds{60};
    const auto lines_so_far = [&] {
      const auto text = slurp(file);
      return std::count(text.begin(), text.end(), '\n');
    };
    while (lines_so_far() < 2 && std::chrono::steady_clock::now() < end) ::poll(nullptr, 0, 20);
    child.signal(sig);
    ASSERT_EQ(child.wait(), 0) << slurp(t.file("err"));
    const auto content = slurp(file);
    ASSERT_FALSE(content.empty());
    EXPECT_EQ(content.back(), '\n');
    const auto lines = json_lines(content);  // throws on a cut line
    EXPECT_GE(lines.size(), 2u);
    EXPECT_NE(slurp(t.file("err")).find("recorded " + std::to_string(lines.size()) + " snapshots"),
              std::string::npos)
        << slurp(t.file("err"));
  }
}

TEST(CliReplay, ACutLastLineIsATruncatedTailNotAFailure) {
  TempDir t;
  const auto whole = recording(t, 3);
  const auto last_start = whole.rfind('\n', whole.size() - 2) + 1;
  // Cut inside the last line, as a killed `record` leaves it.
  t.write("cut.jsonl", whole.substr(0, last_start + (whole.size() - last_start) / 2));
  const auto r = run("replay --json " + t.file("cut.jsonl"));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json_lines(r.out), json_lines(whole.substr(0, last_start)));
  EXPECT_NE(r.err.find("cut.jsonl:3: truncated last line"), std::string::npos) << r.err;
}

TEST(CliReplay, ACorruptLineInTheMiddleIsStillAnError) {
  TempDir t;
  const auto whole = recording(t, 3);
  const auto first_end = whole.find('\n') + 1;
  const auto second_end = whole.find('\n', first_end) + 1;
  const auto middle = whole.substr(first_end, second_end - first_end);
  t.write("bad.jsonl", whole.substr(0, first_end) + middle.substr(0, middle.size() / 2) + "\n" +
                           whole.substr(second_end));
  const auto r = run("replay --json " + t.file("bad.jsonl"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(json_lines(r.out).size(), 2u);  // the others are still replayed
  EXPECT_NE(r.err.find("bad.jsonl:2: bad line"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("truncated"), std::string::npos) << r.err;
}

TEST(CliReplay, GapLinesAreReportedAndKept) {
  TempDir t;
  const auto whole = recording(t, 2);
  const auto first_end = whole.find('\n') + 1;
  const std::string gap =
      R"({"type":"gap","after_sequence":1,"missed":3,"reason":"lossless_bound_exceeded"})";
  t.write("gap.jsonl", whole.substr(0, first_end) + gap + "\n" + whole.substr(first_end));
  auto r = run("replay --json " + t.file("gap.jsonl"));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const auto lines = json_lines(r.out);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[1], boost::json::parse(gap));
  EXPECT_NE(
      r.err.find("gap.jsonl:2: missed 3 snapshots after sequence 1 (lossless_bound_exceeded)"),
      std::string::npos)
      << r.err;
  r = run("replay " + t.file("gap.jsonl"));  // the table: the gap on stderr
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("missed 3 snapshots"), std::string::npos) << r.err;

  t.write("badgap.jsonl", R"({"type":"gap","missed":-1,"reason":"x"})"
                          "\n");
  r = run("replay --json " + t.file("badgap.jsonl"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("badgap.jsonl:1: bad line"), std::string::npos) << r.err;
}

TEST(CliReplay, AWriteErrorIsAnError) {
  TempDir t;
  recording(t, 2);
  const int status = std::system((std::string(GPUSTREAM_CLI_PATH) + " replay --json " +
                                  t.file("rec.jsonl") + " >/dev/full 2>" + t.file("err"))
                                     .c_str());
  EXPECT_EQ(WEXITSTATUS(status), 1);
  EXPECT_NE(slurp(t.file("err")).find("No space left on device"), std::string::npos);
}

// `gpustream watch --json | head -n1`: once the reader is gone, watch ends with 0 and no
// message, without waiting for its next snapshot (an hour away here).
TEST(CliWatch, EndsCleanlyWhenTheReaderGoesAway) {
  TempDir t;
  CliChild child(
      {"watch", "--json", "--interval", "3600", "--simulate", "1", "--probes", "simulated"},
      t.file("err"));
  ASSERT_TRUE(child.started());
  const auto line = child.read_line();
  ASSERT_TRUE(line) << slurp(t.file("err"));
  EXPECT_EQ(boost::json::parse(*line).at("sequence").to_number<int>(), 1);
  child.close_stdout();
  EXPECT_EQ(child.wait(), 0);
  EXPECT_FALSE(has_cli_message(slurp(t.file("err")))) << slurp(t.file("err"));
}

// The same with a table written 20 times a second: the write fails with EPIPE.
TEST(CliWatch, EndsCleanlyOnABrokenPipe) {
  TempDir t;
  CliChild child({"watch", "--interval", "0.05", "--simulate", "1", "--probes", "simulated"},
                 t.file("err"));
  ASSERT_TRUE(child.started());
  ASSERT_TRUE(child.read_line()) << slurp(t.file("err"));
  child.close_stdout();
  EXPECT_EQ(child.wait(), 0);
  EXPECT_FALSE(has_cli_message(slurp(t.file("err")))) << slurp(t.file("err"));
}

TEST(CliWatch, AWriteErrorOtherThanABrokenPipeIsAnError) {
  TempDir t;
  const int status = std::system((std::string(GPUSTREAM_CLI_PATH) + " watch --json --count 2" +
                                  kSim + " >/dev/full 2>" + t.file("err"))
                                     .c_str());
  EXPECT_EQ(WEXITSTATUS(status), 1);
  EXPECT_NE(slurp(t.file("err")).find("cannot write to 'standard output': No space left on device"),
            std::string::npos)
      << slurp(t.file("err"));
}

}  // namespace
}  // namespace gpustream::cli
