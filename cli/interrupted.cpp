// The signal flags (commands.hpp): set by main.cpp's SIGINT/SIGTERM handler, read by every
// command's loop and by SignalStop (server_front.cpp). Here, not in main.cpp, so that the test
// suite runs SignalStop in-process.
#include <atomic>

#include "commands.hpp"

namespace gpustream::cli {

// A signal handler can reach nothing but a global.
// NOLINTNEXTLINE(cppcoreguidelines-avoid-non-const-global-variables)
std::atomic<bool> g_interrupted{false};
// NOLINTNEXTLINE(cppcoreguidelines-avoid-non-const-global-variables)
std::atomic<int> g_interrupt_signal{0};

}  // namespace gpustream::cli
