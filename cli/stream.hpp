// The loop of `watch` and `record`: snapshots (and gaps) from a queue into an Output, until a
// limit, a stop request, an output failure or the end of the channel.
#pragma once

#include <atomic>
#include <map>
#include <string>

#include "gpustream/channel.hpp"
#include "output.hpp"

namespace gpustream::cli {

/// What one snapshot adds to the output: a JSON line, or the whole table again.
class Printer {
 public:
  Printer(bool json, bool tty) : json_(json), tty_(tty) {}
  std::string render(const GpuSnapshot& s);

 private:
  bool json_;
  bool tty_;
  std::map<std::string, GpuSnapshot> latest_;  // for the table: newest per probe
};

/// "gpustream: missed N snapshots (REASON)" on stderr.
void print_gap(const Gap& gap);

struct StreamLimits {
  long count = 0;               // stop after this many snapshots; 0: no limit
  double duration_seconds = 0;  // stop after this long; 0: no limit
  bool write_gaps = false;      // record: each gap becomes a line (gap_line) of the output
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
