// The real binary: record's write errors and durability, gaps in a recording, replay of an
// interrupted recording, watch ending when its reader goes away; a record into a FIFO nobody
// reads and a --realtime replay in a long gap both end at SIGINT; a recording's line is read
// within its byte bound.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>

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

// Polls until `pred` holds; the deadline only matters when a test fails.
template <typename Pred>
bool eventually(Pred pred, std::chrono::seconds deadline = std::chrono::seconds{60}) {
  const auto end = std::chrono::steady_clock::now() + deadline;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > end) return false;
    ::poll(nullptr, 0, 20);
  }
  return true;
}

// `record FIFO` with nobody reading it waits for a reader (said once on stderr) — and SIGINT
// or SIGTERM ends that wait at once, with 128 + the signal and a message (before, open(2)
// blocked and was restarted after each signal: only SIGKILL ended it).
TEST(CliRecord, ASignalEndsTheWaitForAReaderOfAFifo) {
  for (const int sig : {SIGINT, SIGTERM}) {
    TempDir t;
    const auto fifo = t.file("fifo");
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    CliChild child({"record", fifo, "--count", "1", "--interval", "0.05", "--simulate", "1",
                    "--probes", "simulated"},
                   t.file("err"));
    ASSERT_TRUE(child.started());
    ASSERT_TRUE(eventually([&] {
      return slurp(t.file("err")).find("waiting for a reader of the FIFO") != std::string::npos;
    })) << slurp(t.file("err"));
    child.signal(sig);
    const auto code = child.wait();
    ASSERT_TRUE(code) << "still waiting after the signal";
    EXPECT_EQ(*code, 128 + sig);
    const auto err = slurp(t.file("err"));
    EXPECT_NE(err.find("interrupted while waiting for a reader of the FIFO '" + fifo +
                       "'; nothing was recorded"),
              std::string::npos)
        << err;
    EXPECT_EQ(err.find("recorded 0"), std::string::npos) << err;
  }
}

// The reader comes: the recording goes on as into a file, with blocking writes.
TEST(CliRecord, AFifoIsRecordedIntoOnceItHasAReader) {
  TempDir t;
  const auto fifo = t.file("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  CliChild child({"record", fifo, "--count", "3", "--interval", "0.05", "--simulate", "1",
                  "--probes", "simulated"},
                 t.file("err"));
  ASSERT_TRUE(child.started());
  ASSERT_TRUE(eventually([&] {
    return slurp(t.file("err")).find("waiting for a reader") != std::string::npos;
  })) << slurp(t.file("err"));
  const int fd = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  std::string content;
  bool eof = false;
  ASSERT_TRUE(eventually([&] {
    char buf[65536];
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) content.append(buf, static_cast<std::size_t>(n));
    eof = n == 0 && std::count(content.begin(), content.end(), '\n') >= 3;
    return eof;
  })) << content;
  ::close(fd);
  EXPECT_EQ(child.wait(), 0) << slurp(t.file("err"));
  EXPECT_EQ(json_lines(content).size(), 3u);
  EXPECT_NE(slurp(t.file("err")).find("recorded 3 snapshots"), std::string::npos)
      << slurp(t.file("err"));
}

// A recording with a gap of ten minutes: `replay --realtime` waits (at most 10 s) between the
// two snapshots, and SIGINT ends that wait at once, not after it.
TEST(CliReplay, RealtimeAnswersASignalDuringALongGap) {
  TempDir t;
  const auto whole = recording(t, 2);
  auto lines = json_lines(whole);
  ASSERT_EQ(lines.size(), 2u);
  const auto first = lines[0].at("time_unix_ns").to_number<std::int64_t>();
  lines[1].as_object()["time_unix_ns"] = first + 600'000'000'000;  // ten minutes later
  t.write("gap.jsonl",
          boost::json::serialize(lines[0]) + "\n" + boost::json::serialize(lines[1]) + "\n");
  CliChild child({"replay", "--json", "--realtime", t.file("gap.jsonl")}, t.file("err"));
  ASSERT_TRUE(child.started());
  ASSERT_TRUE(child.read_line()) << slurp(t.file("err"));  // the first snapshot: now it waits
  child.signal(SIGINT);
  // The old sleep took the whole 10 s; the bound is half of it, far above a signal's delivery.
  const auto code = child.wait(std::chrono::seconds{5});
  ASSERT_TRUE(code) << "the replay slept through SIGINT";
  EXPECT_EQ(*code, 0);
  EXPECT_FALSE(child.read_line(std::chrono::seconds{1}));  // the second one was not printed
}

// `replay FIFO`: the open does not block; it waits for a writer (said once), answers SIGINT
// with 130, and replays what a writer sends.
TEST(CliReplay, AFifoWaitsForItsWriterInterruptibly) {
  TempDir t;
  const auto whole = recording(t, 2);
  const auto fifo = t.file("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  {
    CliChild child({"replay", "--json", fifo}, t.file("err"));
    ASSERT_TRUE(child.started());
    ASSERT_TRUE(eventually([&] {
      return slurp(t.file("err")).find("waiting for a writer of the FIFO") != std::string::npos;
    })) << slurp(t.file("err"));
    child.signal(SIGINT);
    const auto code = child.wait();
    ASSERT_TRUE(code) << "still waiting after SIGINT";
    EXPECT_EQ(*code, 130);
    EXPECT_NE(slurp(t.file("err")).find("interrupted while waiting for a writer"),
              std::string::npos)
        << slurp(t.file("err"));
  }
  CliChild child({"replay", "--json", fifo}, t.file("err2"));
  ASSERT_TRUE(child.started());
  ASSERT_TRUE(eventually([&] {
    return slurp(t.file("err2")).find("waiting for a writer") != std::string::npos;
  })) << slurp(t.file("err2"));
  const int fd = ::open(fifo.c_str(), O_WRONLY | O_CLOEXEC);  // the replay is its reader
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, whole.data(), whole.size()), static_cast<ssize_t>(whole.size()));
  ::close(fd);
  std::string out;
  while (const auto line = child.read_line()) out += *line + "\n";
  EXPECT_EQ(child.wait(), 0) << slurp(t.file("err2"));
  EXPECT_EQ(json_lines(out), json_lines(whole));
}

// A recording line is read within 16 MiB: /dev/zero (one endless line) and a file whose line
// is 16 MiB + 1 byte are refused after that many bytes, with the line number; a line of exactly
// 16 MiB is read (and is a bad line here, not JSON).
TEST(CliReplay, ALineIsReadWithinItsByteBound) {
  constexpr std::size_t kBound = 16 * 1024 * 1024;
  auto r = run("replay /dev/zero");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("/dev/zero:1: a line longer than 16777216 bytes: not a gpustream "
                       "recording; replay stopped there"),
            std::string::npos)
      << r.err;

  TempDir t;
  const auto whole = recording(t, 1);
  t.write("long.jsonl", whole + std::string(kBound + 1, 'x') + "\n" + whole);
  r = run("replay --json " + t.file("long.jsonl"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(json_lines(r.out).size(), 1u);  // the line before it; nothing after
  EXPECT_NE(r.err.find("long.jsonl:2: a line longer than 16777216 bytes"), std::string::npos)
      << r.err;

  t.write("exact.jsonl", whole + std::string(kBound, 'x') + "\n" + whole);
  r = run("replay --json " + t.file("exact.jsonl"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(json_lines(r.out).size(), 2u);  // a bad line: the others are replayed
  EXPECT_NE(r.err.find("exact.jsonl:2: bad line"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("longer than"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace gpustream::cli
