// gpustream/library_session.hpp — the one owner of a vendor library's process-wide init/shutdown.
//
// NVML, Level Zero Sysman and the AMD SMI library each have an init and a shutdown call that
// count per process. A LibrarySession wraps such a pair: whoever is about to call the library
// takes a Guard from acquire(), and the session makes sure the library is initialized while any
// Guard is alive.
//
//  * persistent (default): the first acquire() initializes; the library stays initialized until
//    the LibrarySession is destroyed (and every Guard is gone).
//  * lazy: the library is initialized when the first Guard is taken and shut down when the last
//    one is released, so the device file is released between samples. Handles obtained from the
//    library do not survive that: re-resolve them (by UUID) inside every Guard.
//
// Invariant: use count > 0 ⇔ initialized; exactly one init() per 0→1 transition and one
// shutdown() per 1→0 transition. Overlapping Guards share one init. Taking or dropping a Guard
// while the count is already above zero is a lock-free atomic step; the mutex is held only
// around the 0→1 and 1→0 transitions, and never while init() or shutdown() run: other
// acquirers wait on a condition variable until the running init() or shutdown() finished.
// A failed init() is reported to everyone who waited for that attempt, and the next acquire()
// tries again.
//
// Thread safety: every member is thread-safe. acquire() blocks (it may run init()), so call it
// from the work pool, never from the io thread. Nothing to cancel: init() is the vendor's call.
// Guards may outlive the LibrarySession; the last one out shuts the library down.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include <boost/system/error_code.hpp>

namespace gpustream {

enum class LibrarySessionMode { persistent, lazy };

std::string_view to_string(LibrarySessionMode mode) noexcept;
/// "persistent" or "lazy" (case-sensitive); std::nullopt otherwise.
std::optional<LibrarySessionMode> parse_library_session_mode(std::string_view text) noexcept;

/// The environment variable that selects the mode: GPUSTREAM_LIBRARY_SESSION=lazy|persistent.
inline constexpr const char* kLibrarySessionEnv = "GPUSTREAM_LIBRARY_SESSION";

/// The mode named by GPUSTREAM_LIBRARY_SESSION; std::nullopt when unset or empty. An unknown
/// value is logged (once) as a warning and ignored.
std::optional<LibrarySessionMode> library_session_mode_from_env();

/// The mode to use: `configured` when set, else the environment, else persistent.
LibrarySessionMode resolve_library_session_mode(std::optional<LibrarySessionMode> configured);

/// Thrown by LibrarySession::acquire() when init() failed. what() is
/// "<library> init failed: <message from init>".
class LibrarySessionError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class LibrarySession {
 public:
  /// Initializes the library. Returns std::nullopt on success, or what went wrong in words.
  /// An exception thrown by it counts as a failure with its what().
  using InitFn = std::function<std::optional<std::string>()>;
  /// Shuts the library down. Exceptions are caught and logged.
  using ShutdownFn = std::function<void()>;

  /// Counters, for tests and stats.
  struct Stats {
    std::uint64_t inits = 0;         // successful init() calls
    std::uint64_t failed_inits = 0;  // init() calls that failed
    std::uint64_t shutdowns = 0;     // shutdown() calls
  };

  /// Keeps the library initialized while alive. Move-only; an empty Guard does nothing.
  class Guard {
   public:
    Guard() = default;
    Guard(Guard&& other) noexcept = default;
    Guard& operator=(Guard&& other) noexcept;
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;
    ~Guard() { release(); }

    explicit operator bool() const noexcept { return state_ != nullptr; }
    /// Drops the reference now (shuts the library down if this was the last one, in lazy mode).
    void release() noexcept;

   private:
    friend class LibrarySession;
    struct State;
    explicit Guard(std::shared_ptr<State> state) noexcept : state_(std::move(state)) {}
    std::shared_ptr<State> state_;
  };

  /// `name` is used in log lines and errors ("NVML"). The chosen mode is logged once, here.
  LibrarySession(std::string name, LibrarySessionMode mode, InitFn init, ShutdownFn shutdown);
  /// Releases the persistent reference; the library is shut down now, or by the last Guard.
  ~LibrarySession();
  LibrarySession(const LibrarySession&) = delete;
  LibrarySession& operator=(const LibrarySession&) = delete;

  /// Initializes the library if needed (or waits for an init in progress) and returns a Guard.
  /// Throws LibrarySessionError when init() failed.
  Guard acquire();
  /// Same, non-throwing: on failure returns an empty Guard, sets `ec` (errc::sample_failed) and,
  /// when given, `message` ("<library> init failed: ...").
  Guard acquire(boost::system::error_code& ec, std::string* message = nullptr);

  LibrarySessionMode mode() const noexcept;
  const std::string& name() const noexcept;
  /// True while the library is initialized.
  bool initialized() const noexcept;
  /// Current references (Guards, plus one held by a persistent session once initialized).
  int use_count() const noexcept;
  /// Threads currently blocked in acquire() waiting for an init or shutdown to finish.
  int waiters() const noexcept;
  Stats stats() const;

 private:
  std::shared_ptr<Guard::State> state_;
};

}  // namespace gpustream
