// The loop of `watch` and `record`: snapshots (and gaps) from a queue into an Output, until a
// limit, a stop request, an output failure or the end of the channel.
#pragma once

#include <atomic>
#include <deque>
#include <map>
#include <mutex>
#include <string>

#include "gpustream/channel.hpp"
#include "output.hpp"

namespace gpustream::cli {

/// What one snapshot adds to the output: a JSON line, or the whole table again.
class Printer {
 public:
  /// `container`: when not empty, only the processes of that container are shown (a prefix of
  /// its id, or its Kubernetes pod UID), and only the devices they use (watch --container).
  Printer(bool json, bool tty, std::string container = {})
      : json_(json), tty_(tty), container_(std::move(container)) {}
  std::string render(const GpuSnapshot& s);
  /// A GPU event's line (event_line): the live table on a terminal shows the newest
  /// kEventLines under it from the next render on (its redraw clears whatever was printed
  /// between two). Thread-safe: events may come from another thread than render()'s.
  void note_event(std::string line);
  static constexpr std::size_t kEventLines = 5;

 private:
  std::string render_one(const GpuSnapshot& s);
  bool json_;
  bool tty_;
  std::string container_;
  std::map<std::string, GpuSnapshot> latest_;  // for the table: newest per probe
  std::mutex events_mu_;
  std::deque<std::string> events_;  // guarded by events_mu_: the newest event lines
};

/// Whether the process runs in the container `selector` names: a prefix (at least 4 characters)
/// of its container id, or its pod UID.
bool in_container(const ProcessSample& p, std::string_view selector);

/// `s` with only the processes of the container `selector` names, and only the devices that
/// have one of them.
GpuSnapshot only_container(const GpuSnapshot& s, std::string_view selector);

/// "gpustream: missed N snapshots (REASON)" on stderr.
void print_gap(const Gap& gap);

struct StreamLimits {
  long count = 0;                      // stop after this many snapshots; 0: no limit
  double duration_seconds = 0;         // stop after this long; 0: no limit
  bool write_gaps = false;             // record: each gap becomes a line (gap_line) of the output
  bool stop_when_reader_gone = false;  // watch: end as soon as nobody reads the pipe
};

struct StreamResult {
  enum class End { limit, stopped, output_failed, reader_gone, channel_gone };
  End end = End::limit;
  long snapshots = 0;
  long gaps = 0;
};

/// Takes items from `queue` and writes them to `out` until a limit is reached, `stop` is set,
/// a write fails (out.error() says why), the reader is gone (with stop_when_reader_gone), or
/// the queue is closed and drained. Each gap is reported on stderr (and written, with
/// write_gaps).
StreamResult stream_queue(SnapshotQueue& queue, Output& out, Printer& printer,
                          const StreamLimits& limits, const std::atomic<bool>& stop);

}  // namespace gpustream::cli
