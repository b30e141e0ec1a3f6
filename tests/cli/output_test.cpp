// In-process: the Output that watch and record write to, and their loop (stream_queue) —
// write errors, a reader that went away, gaps written into a recording.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstring>
#include <optional>

#include <gtest/gtest.h>
#include <boost/asio/io_context.hpp>
#include <boost/json.hpp>

#include "cli_test_util.hpp"
#include "output.hpp"
#include "stream.hpp"

namespace gpustream::cli {
namespace {

using test::json_lines;
using test::slurp;
using test::TempDir;

GpuSnapshot snapshot(std::string probe) {
  GpuSnapshot s;
  s.probe = std::move(probe);
  DeviceSample d;
  d.id = "gpu0";
  d.metrics.set(Metric::utilization_percent, 42.0, Source::simulated);
  s.devices.push_back(std::move(d));
  return s;
}

class IgnoreSigpipe {  // as the gpustream binary does: EPIPE instead of death
 public:
  IgnoreSigpipe() { old_ = std::signal(SIGPIPE, SIG_IGN); }
  ~IgnoreSigpipe() { std::signal(SIGPIPE, old_); }

 private:
  void (*old_)(int);
};

TEST(CliOutput, AFullDeviceIsAWriteErrorWithItsReason) {
  Output out = Output::create_file("/dev/full");
  ASSERT_TRUE(out.open()) << std::strerror(out.error());
  EXPECT_FALSE(out.write("{}\n"));
  EXPECT_EQ(out.error(), ENOSPC);
  EXPECT_FALSE(out.broken_pipe());
  EXPECT_FALSE(out.write("{}\n"));  // sticky: nothing is written after a failure
  EXPECT_FALSE(out.finish());
  EXPECT_EQ(out.describe_error(),
            "cannot write to '/dev/full': " + std::string(std::strerror(ENOSPC)));
}

TEST(CliOutput, DevicesThatCannotBeSyncedAreFine) {
  Output out = Output::create_file("/dev/null");
  ASSERT_TRUE(out.open());
  EXPECT_TRUE(out.write("x\n"));
  EXPECT_TRUE(out.finish());
  EXPECT_EQ(out.error(), 0);
}

TEST(CliOutput, AFileIsWrittenAndSynced) {
  TempDir t;
  Output out = Output::create_file(t.file("rec.jsonl"));
  ASSERT_TRUE(out.open());
  EXPECT_TRUE(out.write("a\n"));
  EXPECT_TRUE(out.write("b\n"));
  EXPECT_TRUE(out.finish());
  EXPECT_EQ(slurp(t.file("rec.jsonl")), "a\nb\n");
}

TEST(CliOutput, ACreateFailureSaysWhy) {
  Output out = Output::create_file("/nonexistent-gpustream-dir/rec.jsonl");
  EXPECT_FALSE(out.open());
  EXPECT_EQ(out.error(), ENOENT);
}

TEST(CliOutput, APipeWhoseReaderLeftIsSeenWithoutWritingAndIsABrokenPipe) {
  IgnoreSigpipe ignore;
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const int saved = ::dup(STDOUT_FILENO);
  ASSERT_GE(saved, 0);
  ASSERT_EQ(::dup2(fds[1], STDOUT_FILENO), STDOUT_FILENO);
  ::close(fds[1]);
  {
    Output out = Output::standard_output();
    EXPECT_FALSE(out.reader_gone());
    EXPECT_TRUE(out.write("first\n"));
    ::close(fds[0]);  // the reader leaves
    EXPECT_TRUE(out.reader_gone());
    EXPECT_FALSE(out.write("second\n"));
    EXPECT_TRUE(out.broken_pipe());
  }
  ::dup2(saved, STDOUT_FILENO);
  ::close(saved);
}

// A recording keeps its gaps: the lost snapshots are a line of the file, in order.
TEST(CliStream, GapsAreWrittenIntoTheRecordingInOrder) {
  TempDir t;
  boost::asio::io_context io;
  std::shared_ptr<SnapshotQueue> queue;
  {
    SnapshotChannel channel(io.get_executor());
    SubscribeOptions so;
    so.policy = Backpressure::lossless;
    so.capacity = 1;
    queue = channel.subscribe_queue(so);
    for (int i = 0; i < 4; ++i) channel.publish(snapshot("sim"));  // 1 kept, 2..4 lost
  }  // the channel is gone: the loop ends once the queue is drained
  Output out = Output::create_file(t.file("rec.jsonl"));
  ASSERT_TRUE(out.open());
  Printer printer(true, false);
  StreamLimits limits;
  limits.write_gaps = true;
  const std::atomic<bool> stop{false};
  const auto r = stream_queue(*queue, out, printer, limits, stop);
  EXPECT_EQ(r.end, StreamResult::End::channel_gone);
  EXPECT_EQ(r.snapshots, 1);
  EXPECT_EQ(r.gaps, 1);
  ASSERT_TRUE(out.finish());
  const auto lines = json_lines(slurp(t.file("rec.jsonl")));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].at("sequence").to_number<std::uint64_t>(), 1u);
  EXPECT_EQ(lines[1], boost::json::parse(R"({"type":"gap","after_sequence":1,"missed":3,)"
                                         R"("reason":"lossless_bound_exceeded"})"));
}

TEST(CliStream, AWriteErrorEndsTheLoop) {
  boost::asio::io_context io;
  SnapshotChannel channel(io.get_executor());
  auto queue = channel.subscribe_queue({});
  for (int i = 0; i < 3; ++i) channel.publish(snapshot("sim"));
  Output out = Output::create_file("/dev/full");
  Printer printer(true, false);
  const std::atomic<bool> stop{false};
  const auto r = stream_queue(*queue, out, printer, {}, stop);
  EXPECT_EQ(r.end, StreamResult::End::output_failed);
  EXPECT_EQ(r.snapshots, 0);
  EXPECT_EQ(out.error(), ENOSPC);
  EXPECT_EQ(queue->size(), 2u);  // it stopped at the first failure
}

TEST(CliStream, GapLineIsTheWireForm) {
  EXPECT_EQ(gap_line(Gap{57, 3, "dropped_slow_subscriber"}),
            R"({"type":"gap","after_sequence":57,"missed":3,"reason":"dropped_slow_subscriber"})"
            "\n");
  // A reason from a server is any bytes: the line stays valid JSON (UTF-8 repaired, controls
  // escaped), so that `replay` reads it back.
  const auto line = gap_line(Gap{1, 2, "bad\xff\x1b[2J"});
  EXPECT_EQ(line,
            "{\"type\":\"gap\",\"after_sequence\":1,\"missed\":2,\"reason\":\"bad\xef\xbf\xbd"
            "\\u001b[2J\"}\n");
  EXPECT_EQ(boost::json::parse(line).at("reason").as_string(), "bad\xef\xbf\xbd\x1b[2J");
}

}  // namespace
}  // namespace gpustream::cli
