// gpustream replay FILE — reads a recording (JSON lines) and prints it as a table or JSON lines.
#include <fstream>
#include <iostream>
#include <thread>

#include "commands.hpp"
#include "format.hpp"
#include "gpustream/json.hpp"

namespace gpustream::cli {

int run_replay(const ReplayOptions& o) {
  std::ifstream in(o.file);
  if (!in) {
    std::cerr << "gpustream: cannot open '" << o.file << "'\n";
    return 1;
  }
  std::string line;
  long lineno = 0;
  long bad = 0;
  std::int64_t prev_ns = 0;
  if (!o.json) std::cout << table_header() << "\n";
  while (!g_interrupted.load() && std::getline(in, line)) {
    ++lineno;
    if (line.empty()) continue;
    GpuSnapshot s;
    try {
      s = snapshot_from_json_string(line);
    } catch (const JsonError& e) {
      if (bad++ == 0 || bad <= 5)
        std::cerr << "gpustream: " << o.file << ":" << lineno << ": skipped: " << e.what() << "\n";
      continue;
    }
    if (o.realtime && prev_ns != 0 && s.time_unix_ns > prev_ns) {
      const auto wait = std::chrono::nanoseconds(s.time_unix_ns - prev_ns);
      std::this_thread::sleep_for(std::min<std::chrono::nanoseconds>(wait, std::chrono::seconds{10}));
    }
    prev_ns = s.time_unix_ns;
    if (o.json)
      std::cout << to_json_string(s) << "\n";
    else
      std::cout << format_table({&s});
  }
  if (bad > 0) {
    std::cerr << "gpustream: " << bad << " malformed line(s) in " << o.file << "\n";
    return 1;
  }
  return 0;
}

}  // namespace gpustream::cli
