// Where `watch` and `record` write: a file descriptor written with write(2), so that every
// failure is seen, with its errno, at the line that caused it (an iostream would keep only a
// failbit, and only at the next flush).
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "gpustream/channel.hpp"

namespace gpustream::cli {

class Output {
 public:
  /// This process's stdout (not closed by the destructor).
  static Output standard_output();
  /// Called while `record FILE` waits for a reader of the FIFO FILE: waits a moment (about
  /// 100 ms, less when interrupted) and returns whether to go on waiting.
  using KeepWaiting = std::function<bool()>;

  /// `record FILE`: FILE created or truncated (mode 0666 minus the umask). On failure the
  /// Output is not open() and error() says why. The open never blocks: FILE is opened with
  /// O_NONBLOCK (then made blocking again), so a FIFO with no reader (ENXIO) is retried after
  /// each `keep_waiting()` that returns true; when it returns false (or is empty) the open
  /// fails with EINTR (or ENXIO).
  static Output create_file(const std::string& path, const KeepWaiting& keep_waiting = {});

  Output(Output&& o) noexcept;
  Output& operator=(Output&&) = delete;
  Output(const Output&) = delete;
  ~Output();

  bool open() const noexcept { return fd_ >= 0; }
  int fd() const noexcept { return fd_; }
  const std::string& name() const noexcept { return name_; }

  /// Writes all of `data` in as few write(2) calls as the kernel allows (one line is normally
  /// one call, so an interrupted recording is cut at most in its last line). Returns false on
  /// a failure, and after any earlier one (the first errno is kept in error()).
  bool write(std::string_view data);
  /// Pushes what was written to stable storage (fsync). Pipes, terminals and devices that
  /// cannot be synced are fine. Returns false on a failure.
  bool sync();
  /// sync() and close() for an owned descriptor. Returns false on a failure.
  bool finish();

  /// The errno of the first failure; 0 when none.
  int error() const noexcept { return error_; }
  /// The reader of this pipe or socket went away (EPIPE): the normal end of
  /// `gpustream watch | head`, not an error.
  bool broken_pipe() const noexcept;
  /// Without writing: true when this is a pipe or socket whose reader is gone (POLLERR/POLLHUP),
  /// so that a watch whose next snapshot is far away still ends promptly. Thread-safe.
  bool reader_gone() const noexcept;
  /// "cannot write to 'FILE': No space left on device".
  std::string describe_error() const;

 private:
  Output(int fd, std::string name, bool owned) : fd_(fd), name_(std::move(name)), owned_(owned) {}
  bool fail(int err);

  int fd_ = -1;
  std::string name_;
  bool owned_ = false;
  int error_ = 0;
};

/// The line `record` writes for a gap, the wire form of docs/protocol.md:
/// {"type":"gap","after_sequence":57,"missed":3,"reason":"dropped_slow_subscriber"} and '\n'.
std::string gap_line(const Gap& gap);

}  // namespace gpustream::cli
