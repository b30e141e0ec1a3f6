#include "gpustream/library_session.hpp"

#include <atomic>
#include <cassert>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <utility>

#include "gpustream/errors.hpp"
#include "gpustream/log.hpp"

namespace gpustream {

std::string_view to_string(LibrarySessionMode mode) noexcept {
  return mode == LibrarySessionMode::lazy ? "lazy" : "persistent";
}

std::optional<LibrarySessionMode> parse_library_session_mode(std::string_view text) noexcept {
  if (text == "persistent") return LibrarySessionMode::persistent;
  if (text == "lazy") return LibrarySessionMode::lazy;
  return std::nullopt;
}

std::optional<LibrarySessionMode> library_session_mode_from_env() {
  const char* value = std::getenv(kLibrarySessionEnv);
  if (value == nullptr || *value == '\0') return std::nullopt;
  if (auto mode = parse_library_session_mode(value)) return mode;
  static LogOnce once;
  if (once.first(value)) {
    logger()->warn("{}={} is not a library session mode (lazy or persistent); ignoring it",
                   kLibrarySessionEnv, value);
  }
  return std::nullopt;
}

LibrarySessionMode resolve_library_session_mode(std::optional<LibrarySessionMode> configured) {
  if (configured) return *configured;
  if (auto from_env = library_session_mode_from_env()) return *from_env;
  return LibrarySessionMode::persistent;
}

// The shared state behind a session and its guards. `count` is the use count; it moves between
// 0 and 1 only under `mu`, and between higher values lock-free.
struct LibrarySession::Guard::State {
  enum class Phase { idle, initializing, ready, shutting_down };

  std::string name;
  LibrarySessionMode mode;
  InitFn init;
  ShutdownFn shutdown;

  std::atomic<int> count{0};
  std::atomic<int> waiting{0};
  std::atomic<bool> is_initialized{false};

  mutable std::mutex mu;
  std::condition_variable cv;
  Phase phase = Phase::idle;         // guarded by mu
  std::uint64_t attempt = 0;         // guarded by mu: id of the latest init attempt
  std::uint64_t failed_attempt = 0;  // guarded by mu: id of the latest failed attempt
  std::string failed_message;        // guarded by mu
  bool keeper_held = false;          // guarded by mu: persistent reference taken
  bool owner_gone = false;           // guarded by mu
  Stats stats;                       // guarded by mu

  /// Adds a reference if the count is already above zero (the library is initialized).
  bool try_add_reference() noexcept {
    int c = count.load(std::memory_order_acquire);
    while (c > 0) {
      if (count.compare_exchange_weak(c, c + 1, std::memory_order_acq_rel)) return true;
    }
    return false;
  }

  /// Drops a reference if that does not take the count to zero.
  bool try_drop_reference() noexcept {
    int c = count.load(std::memory_order_acquire);
    while (c > 1) {
      if (count.compare_exchange_weak(c, c - 1, std::memory_order_acq_rel)) return true;
    }
    return false;
  }

  std::optional<std::string> run_init() {
    try {
      return init();
    } catch (const std::exception& e) {
      return std::string(e.what());
    } catch (...) {
      return std::string("unknown exception");
    }
  }

  void run_shutdown() noexcept {
    try {
      shutdown();
    } catch (const std::exception& e) {
      logger()->warn("{} shutdown failed: {}", name, e.what());
    } catch (...) {
      logger()->warn("{} shutdown failed with an unknown exception", name);
    }
  }

  /// Takes a reference, initializing first if needed. On failure returns false and sets `error`.
  bool acquire(std::string& error) {
    if (try_add_reference()) return true;
    std::unique_lock lock(mu);
    std::uint64_t waited_for = 0;  // the init attempt this thread waited on, if any
    for (;;) {
      if (try_add_reference()) return true;
      if (phase == Phase::idle) {
        if (waited_for != 0 && failed_attempt == waited_for) {
          error = failed_message;
          return false;
        }
        return initialize(lock, error);
      }
      if (phase == Phase::initializing) waited_for = attempt;
      waiting.fetch_add(1, std::memory_order_relaxed);
      cv.wait(lock);
      waiting.fetch_sub(1, std::memory_order_relaxed);
    }
  }

  // Runs init() unlocked, as the one thread that moves the count from 0 to 1.
  bool initialize(std::unique_lock<std::mutex>& lock, std::string& error) {
    phase = Phase::initializing;
    const std::uint64_t my_attempt = ++attempt;
    lock.unlock();
    std::optional<std::string> failure = run_init();
    lock.lock();
    if (failure) {
      phase = Phase::idle;
      failed_attempt = my_attempt;
      failed_message = failure->empty() ? std::string("init failed") : std::move(*failure);
      ++stats.failed_inits;
      error = failed_message;
      cv.notify_all();
      return false;
    }
    ++stats.inits;
    int references = 1;
    if (mode == LibrarySessionMode::persistent && !owner_gone) {
      keeper_held = true;
      ++references;
    }
    is_initialized.store(true, std::memory_order_release);
    count.store(references, std::memory_order_release);
    phase = Phase::ready;
    cv.notify_all();
    return true;
  }

  void release() noexcept {
    if (try_drop_reference()) return;
    std::unique_lock lock(mu);
    int c = count.load(std::memory_order_acquire);
    for (;;) {
      assert(c > 0 && "LibrarySession reference released twice");
      if (c <= 0) return;
      if (c > 1) {
        if (count.compare_exchange_weak(c, c - 1, std::memory_order_acq_rel)) return;
        continue;
      }
      if (count.compare_exchange_weak(c, 0, std::memory_order_acq_rel)) break;
    }
    // This thread moved the count from 1 to 0: it shuts the library down, unlocked.
    phase = Phase::shutting_down;
    is_initialized.store(false, std::memory_order_release);
    lock.unlock();
    run_shutdown();
    lock.lock();
    ++stats.shutdowns;
    phase = Phase::idle;
    cv.notify_all();
  }

  void release_owner() noexcept {
    bool drop = false;
    {
      std::lock_guard lock(mu);
      owner_gone = true;
      drop = std::exchange(keeper_held, false);
    }
    if (drop) release();
  }
};

LibrarySession::Guard& LibrarySession::Guard::operator=(Guard&& other) noexcept {
  if (this != &other) {
    release();
    state_ = std::move(other.state_);
  }
  return *this;
}

void LibrarySession::Guard::release() noexcept {
  if (auto state = std::move(state_)) state->release();
}

LibrarySession::LibrarySession(std::string name, LibrarySessionMode mode, InitFn init,
                               ShutdownFn shutdown)
    : state_(std::make_shared<Guard::State>()) {
  state_->name = std::move(name);
  state_->mode = mode;
  state_->init = std::move(init);
  state_->shutdown = std::move(shutdown);
  logger()->info("{} library session: {} ({})", state_->name, to_string(mode),
                 mode == LibrarySessionMode::lazy
                     ? "initialized for each sample and shut down after it"
                     : "initialized once and kept");
}

LibrarySession::~LibrarySession() { state_->release_owner(); }

LibrarySession::Guard LibrarySession::acquire() {
  boost::system::error_code ec;
  std::string message;
  Guard guard = acquire(ec, &message);
  if (ec) throw LibrarySessionError(message);
  return guard;
}

LibrarySession::Guard LibrarySession::acquire(boost::system::error_code& ec, std::string* message) {
  ec.clear();
  std::string error;
  if (!state_->acquire(error)) {
    ec = errc::sample_failed;
    if (message != nullptr) *message = state_->name + " init failed: " + error;
    return Guard();
  }
  return Guard(state_);
}

LibrarySessionMode LibrarySession::mode() const noexcept { return state_->mode; }
const std::string& LibrarySession::name() const noexcept { return state_->name; }
bool LibrarySession::initialized() const noexcept {
  return state_->is_initialized.load(std::memory_order_acquire);
}
int LibrarySession::use_count() const noexcept {
  return state_->count.load(std::memory_order_acquire);
}
int LibrarySession::waiters() const noexcept {
  return state_->waiting.load(std::memory_order_relaxed);
}
LibrarySession::Stats LibrarySession::stats() const {
  std::lock_guard lock(state_->mu);
  return state_->stats;
}

}  // namespace gpustream
