// The library's log lines in Python: gpustream.set_log_level(), log_level() and
// set_log_handler(handler), which sends each line to handler(level, message) instead of stderr
// (gpustream.log_to_logging() in __init__.py builds such a handler over Python's logging).
//
// The SDK calls its log callback from any thread (its io thread, its work pool, a caller), maybe
// while a Python thread that holds the GIL waits for that very thread. So the callback never
// takes the GIL: it queues the line (bounded: kMaxLines lines and kMaxBytes bytes; beyond them new
// lines are dropped and counted), and a thread of the module delivers the queue to the handler
// with the GIL held, as a subscription does. The atexit hook (_stop_all) and
// set_log_handler(None) stop that thread and give the lines back to stderr.

#include <condition_variable>
#include <deque>
#include <thread>
#include <utility>

#include "common.hpp"
#include "gpustream/logging.hpp"

namespace gpustream::python {

namespace {

constexpr std::size_t kMaxLines = 1024;
constexpr std::size_t kMaxBytes = std::size_t{1} << 20;  // 1 MiB of message text

class LogPump {
 public:
  static LogPump& instance() {
    // Never destroyed: its thread is stopped at exit (the atexit hook), before finalization.
    // NOLINTNEXTLINE(cppcoreguidelines-avoid-non-const-global-variables)
    static auto* pump = new LogPump();
    return *pump;
  }

  /// GIL held. Replaces the handler (the previous one's lines are delivered first).
  void start(py::object handler) {
    stop();
    handler_ = std::move(handler);
    {
      std::lock_guard lock(mu_);
      stopping_ = false;
    }
    thread_ = std::thread([this] { run(); });
    set_log_callback([this](LogLevel level, std::string_view message) { push(level, message); });
  }

  /// GIL held. Lines go to stderr again; the queued ones are delivered before it returns.
  void stop() {
    if (thread_.joinable() && thread_.get_id() == std::this_thread::get_id())
      throw std::runtime_error("set_log_handler: cannot be called from the log handler itself");
    set_log_callback({});
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) {
      py::gil_scoped_release release;
      thread_.join();
    }
    handler_ = py::none();
  }

 private:
  struct Line {
    LogLevel level;
    std::string message;
  };

  void push(LogLevel level, std::string_view message) {
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
      if (lines_.size() >= kMaxLines || bytes_ + message.size() > kMaxBytes) {
        ++dropped_;
        return;
      }
      bytes_ += message.size();
      lines_.push_back({level, std::string(message)});
    }
    cv_.notify_one();
  }

  void run() {
    // As a subscription's thread (delivery.cpp): one thread state for the thread's life, the
    // GIL taken back by plain calls, never in a destructor.
    const PyGILState_STATE gil_state = PyGILState_Ensure();
    PyThreadState* const state = PyEval_SaveThread();
    for (;;) {
      std::deque<Line> batch;
      std::uint64_t dropped = 0;
      bool last = false;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return stopping_ || !lines_.empty() || dropped_ > 0; });
        batch.swap(lines_);
        bytes_ = 0;
        dropped = std::exchange(dropped_, 0);
        last = stopping_;
      }
      PyEval_RestoreThread(state);
      for (auto& line : batch) deliver(line.level, line.message);
      if (dropped > 0)
        deliver(LogLevel::warn, std::to_string(dropped) +
                                    " log line(s) dropped: the Python log handler fell behind");
      PyEval_SaveThread();
      if (last) break;
    }
    PyEval_RestoreThread(state);
    PyGILState_Release(gil_state);
  }

  /// GIL held.
  void deliver(LogLevel level, const std::string& message) {
    py::object handler = handler_;
    if (handler.is_none()) return;
    try {
      handler(name_of(to_string(level)), py::str(message));
    } catch (py::error_already_set& e) {
      e.discard_as_unraisable("gpustream log handler");
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Line> lines_;
  std::size_t bytes_ = 0;
  std::uint64_t dropped_ = 0;
  bool stopping_ = false;
  std::thread thread_;
  py::object handler_ = py::none();  // touched with the GIL held only
};

LogLevel level_arg(const py::object& o) {
  const auto name = str_arg(o, "level");
  if (auto l = log_level_from_string(name)) return *l;
  throw py::value_error(
      "level must be 'trace', 'debug', 'info', 'warn', 'error', 'critical' or "
      "'off' (got '" +
      name + "')");
}

}  // namespace

void stop_log_handler() { LogPump::instance().stop(); }

void bind_logging(py::module_& m) {
  m.def(
      "set_log_level", [](const py::object& level) { set_log_level(level_arg(level)); },
      py::arg("level"),
      "set_log_level(level)\n--\n\nThe least severe of the library's log lines that are "
      "written: 'trace', 'debug', 'info', 'warn' (the default: warnings and errors go to "
      "stderr), 'error', 'critical' or 'off' (none). Process-wide.");
  m.def(
      "log_level", [] { return std::string(to_string(log_level())); },
      "log_level()\n--\n\nThe level set by set_log_level() ('warn' by default).");
  m.def(
      "set_log_handler",
      [](const py::object& handler) {
        if (handler.is_none()) {
          LogPump::instance().stop();
          return;
        }
        if (!PyCallable_Check(handler.ptr()))
          throw py::type_error("handler must be None or callable, not " + describe_arg(handler));
        LogPump::instance().start(handler);
      },
      py::arg("handler"),
      "set_log_handler(handler)\n--\n\nSends each of the library's log lines to "
      "handler(level, message) instead of stderr (None: stderr again). The handler runs on a "
      "thread of the module with the GIL held; lines wait in a queue of at most 1024 lines and "
      "1 MiB, beyond which they are dropped and counted. An exception it raises is reported "
      "through sys.unraisablehook. See also log_to_logging().");
}

}  // namespace gpustream::python
