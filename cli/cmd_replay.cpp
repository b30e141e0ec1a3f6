// gpustream replay FILE — reads a recording (JSON lines: snapshots and gaps, see docs/cli.md)
// and prints it as a table or JSON lines.
//
// A recording whose writer was interrupted (power loss, SIGKILL) may end in a cut line: every
// whole line is replayed and the cut one is reported as a truncated tail, a warning. A bad line
// anywhere else is an error (exit code 1) after the rest was replayed. A line longer than
// kMaxLineBytes ends the replay (exit code 1) once that many bytes were read: the file is not a
// recording (`replay /dev/zero`), and nothing after such a line can be trusted to be one.
//
// Every string of a recording is printed through terminal_safe (the table does it; so do the
// messages here): a recording is input from anywhere.
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <system_error>

#include <boost/json.hpp>

#include "commands.hpp"
#include "format.hpp"
#include "gpustream/json.hpp"
#include "gpustream/terminal_text.hpp"
#include "options.hpp"
#include "output.hpp"

namespace gpustream::cli {

namespace {

/// A line longer than this ends the replay (a snapshot of many devices is well under 1 MiB):
/// the reader holds at most this many bytes of a line, and reads at most one byte more.
constexpr std::size_t kMaxLineBytes = 16 * 1024 * 1024;
/// The longest wait between two snapshots of `--realtime` (a longer gap is shortened to it).
constexpr std::chrono::seconds kMaxRealtimeWait{10};

// Reads lines of at most kMaxLineBytes; says whether each ended with '\n'.
class LineReader {
 public:
  explicit LineReader(std::FILE* f) : f_(f) {}
  /// False at the end of the file. `too_long`: the line has more than kMaxLineBytes bytes;
  /// `line` holds its first kMaxLineBytes and the reader stopped there (the rest is not read).
  bool next(std::string& line, bool& terminated, bool& too_long) {
    line.clear();
    terminated = false;
    too_long = false;
    int c;
    bool any = false;
    while ((c = getc_unlocked(f_)) != EOF) {  // one thread reads: no locking per byte
      any = true;
      if (c == '\n') {
        terminated = true;
        return true;
      }
      if (line.size() == kMaxLineBytes) {
        too_long = true;
        return true;
      }
      line.push_back(static_cast<char>(c));
    }
    return any;
  }
  bool failed() const { return std::ferror(f_) != 0; }

 private:
  std::FILE* f_;
};

// A gap line of a recording, or nullopt when `v` is not one.
std::optional<Gap> gap_from_json(const boost::json::value& v) {
  const auto* o = v.if_object();
  if (!o) return std::nullopt;
  const auto* type = o->if_contains("type");
  if (!type || !type->is_string() || type->get_string() != "gap") return std::nullopt;
  const auto u64 = [&](std::string_view key) -> std::uint64_t {
    const auto* x = o->if_contains(key);
    if (x && x->is_uint64()) return x->get_uint64();
    if (x && x->is_int64() && x->get_int64() >= 0)
      return static_cast<std::uint64_t>(x->get_int64());
    throw JsonError("gap: '" + std::string(key) + "' must be an unsigned integer");
  };
  Gap g;
  g.after_sequence = u64("after_sequence");
  g.missed = u64("missed");
  const auto* reason = o->if_contains("reason");
  if (!reason || !reason->is_string()) throw JsonError("gap: 'reason' must be a string");
  g.reason = std::string(reason->get_string());
  return g;
}

// Opens the recording without ever blocking in open(2): a FIFO is opened with O_NONBLOCK and
// then waited on (poll, 100 ms at a time) until a writer has written or gone, or SIGINT/SIGTERM
// came (then errno is EINTR). Null on failure, with errno set.
std::FILE* open_recording(const std::string& path) {
  int fd;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return nullptr;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode)) {
    bool said = false;
    for (;;) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 100) > 0) break;  // data, or a writer came and went (POLLHUP)
      if (wait_interrupted_for(std::chrono::milliseconds{0})) {
        ::close(fd);
        errno = EINTR;
        return nullptr;
      }
      if (!said) {
        std::cerr << "gpustream: waiting for a writer of the FIFO '" << terminal_safe(path)
                  << "' (Ctrl-C to give up)\n";
        said = true;
      }
    }
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);  // plain blocking reads from here
  std::FILE* f = ::fdopen(fd, "rb");
  if (f == nullptr) {
    const int err = errno;
    ::close(fd);
    errno = err;
  }
  return f;
}

}  // namespace

int run_replay(const ReplayOptions& o) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> in(open_recording(o.file), &std::fclose);
  if (!in && errno == EINTR && g_interrupted.load()) {
    std::cerr << "gpustream: interrupted while waiting for a writer of the FIFO '"
              << terminal_safe(o.file) << "'\n";
    return 128 + (g_interrupt_signal.load() != 0 ? g_interrupt_signal.load() : SIGINT);
  }
  if (!in) {
    std::cerr << "gpustream: cannot open '" << terminal_safe(o.file)
              << "': " << std::generic_category().message(errno) << "\n";
    return kExitFailure;
  }
  Output out = Output::standard_output();
  LineReader reader(in.get());
  std::string line;
  bool terminated = false;
  bool too_long = false;
  long lineno = 0;
  long bad = 0;
  std::int64_t prev_ns = 0;
  if (!o.json) out.write(table_header() + "\n");
  while (!g_interrupted.load() && out.error() == 0 && reader.next(line, terminated, too_long)) {
    ++lineno;
    const auto where = terminal_safe(o.file) + ":" + std::to_string(lineno);
    if (too_long) {
      std::cerr << "gpustream: " << where << ": a line longer than " << kMaxLineBytes
                << " bytes: not a gpustream recording; replay stopped there\n";
      return kExitFailure;
    }
    if (line.empty()) continue;
    GpuSnapshot s;
    try {
      const auto v = parse_json(line);
      if (const auto gap = gap_from_json(v)) {
        std::cerr << "gpustream: " << where << ": missed " << gap->missed
                  << " snapshots after sequence " << gap->after_sequence << " ("
                  << terminal_safe(gap->reason) << ")\n";
        if (o.json) out.write(gap_line(*gap));
        continue;
      }
      s = snapshot_from_json(v);
    } catch (const JsonError& e) {
      if (!terminated) {
        // The last line, cut where the writer stopped: what came before is whole.
        std::cerr << "gpustream: warning: " << where << ": truncated last line (" << line.size()
                  << " bytes without an end of line) ignored; the recording was interrupted\n";
        break;
      }
      if (++bad <= 5)
        std::cerr << "gpustream: " << where << ": bad line: " << terminal_safe(e.what()) << "\n";
      continue;
    }
    if (o.realtime && prev_ns != 0 && s.time_unix_ns > prev_ns) {
      // Woken at once by SIGINT/SIGTERM, however long the gap.
      const auto wait =
          std::chrono::ceil<std::chrono::milliseconds>(std::min<std::chrono::nanoseconds>(
              std::chrono::nanoseconds(s.time_unix_ns - prev_ns), kMaxRealtimeWait));
      if (wait_interrupted_for(wait)) break;
    }
    prev_ns = s.time_unix_ns;
    out.write(o.json ? to_json_string(s) + "\n" : format_table({&s}));
  }
  if (out.error() != 0 && !out.broken_pipe()) {
    std::cerr << "gpustream: " << out.describe_error() << "\n";
    return kExitFailure;
  }
  if (reader.failed()) {
    std::cerr << "gpustream: cannot read '" << terminal_safe(o.file)
              << "': " << std::generic_category().message(errno) << "\n";
    return kExitFailure;
  }
  if (bad > 0) {
    std::cerr << "gpustream: " << bad << " bad line(s) in " << terminal_safe(o.file) << "\n";
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace gpustream::cli

namespace gpustream::cli {

Command replay_command() {
  return {"replay", "Print a recording made by `gpustream record`",
          [](CLI::App& sub, CommandContext&) -> CommandRun {
            auto o = std::make_shared<ReplayOptions>();
            sub.add_option("file", o->file, "Recording (JSON lines)")
                ->required()
                ->check(CLI::ExistingFile);
            sub.add_flag("--json", o->json, "JSON lines instead of a table");
            sub.add_flag("--realtime", o->realtime, "Pace the output like the recording");
            return [o] { return run_replay(*o); };
          }};
}

}  // namespace gpustream::cli
