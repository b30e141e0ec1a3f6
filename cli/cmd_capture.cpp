// gpustream capture DIR, and snapshot --replay-capture DIR (capture.hpp).
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <iostream>

#include <boost/json.hpp>

#include "capture.hpp"
#include "capture_internal.hpp"
#include "gpustream/probes/capture.hpp"
#include "gpustream/probes/readers.hpp"

namespace gpustream::cli {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;
using namespace capture_detail;

constexpr const char* kVersion = "0.1.0";
constexpr int kFormat = 1;

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string absolute(const std::string& p) {
  std::error_code ec;
  auto a = fs::absolute(p, ec);
  auto s = (ec ? fs::path(p) : a).lexically_normal().string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

/// A probe's own recording (capture::Recording): its files, its findings, its entry.
json::object capture_recording(CaptureBundle& b, const capture::Recording& recording,
                               std::vector<std::int64_t>& pids) {
  auto r = recording.record();
  for (const auto& f : r.findings) b.finding(recording.key, f);
  for (const auto& [rel, content] : r.files) b.write(rel, content);
  pids.insert(pids.end(), r.pids.begin(), r.pids.end());
  return std::move(r.manifest);
}

}  // namespace

int run_capture(const Config& config, const CaptureOptions& o) {
  const fs::path dir = absolute(o.dir);
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_empty(dir, ec)) {
    std::cerr << "gpustream: capture: " << dir.string()
              << " exists and is not empty (give a new folder)\n";
    return kExitUsage;
  }
  fs::create_directories(dir, ec);
  if (ec) {
    std::cerr << "gpustream: capture: cannot create " << dir.string() << ": " << ec.message()
              << "\n";
    return kExitFailure;
  }
  CaptureBundle b(dir, o.max_file_bytes, o.max_total_bytes);
  const auto sysfs_root = absolute(config.paths.sysfs_root);
  const auto procfs_root = absolute(config.paths.procfs_root);
  const auto sources = capture::sources(config);

  json::object m;
  m["gpustream"] = kVersion;
  m["format"] = kFormat;
  m["time"] = utc_now();
  m["settings"] = json::object{{"sysfs_root", sysfs_root},
                               {"procfs_root", procfs_root},
                               {"interval_ms", config.interval.count()}};
  m["limits"] = json::object{{"max_file_bytes", o.max_file_bytes},
                             {"max_total_bytes", o.max_total_bytes},
                             {"tool_timeout_ms", o.tool_timeout.count()},
                             {"max_processes", o.max_processes}};
  m["sysfs"] = capture_sysfs(b, sysfs_root);
  for (const auto& f : sources.files)
    if (!f.path.empty()) m[f.key] = b.copy(f.path, f.rel);
  m["procfs"] = capture_procfs(b, procfs_root, config.watch_pids, o.max_processes);
  std::vector<std::int64_t> gpu_pids;
  for (const auto& r : sources.recordings) m[r.key] = capture_recording(b, r, gpu_pids);
  std::vector<RecordedRun> runs;
  m["tools"] = capture_tools(b, config, o.tool_timeout, o.max_file_bytes, runs);
  for (const auto& r : runs) gpu_pids.insert(gpu_pids.end(), r.pids.begin(), r.pids.end());
  for (auto pid : gpu_pids) capture_process_files(b, procfs_root, pid);
  ::mkdir((dir / "dev").c_str(), 0755);  // the replay's devfs root: nothing of /dev is needed

  // Totals and findings last: the manifest itself is not counted against the cap.
  m["totals"] = json::object{
      {"bytes", b.bytes()}, {"files", b.files()}, {"links", b.links()}, {"refused", b.refused()}};
  m["findings"] = b.findings();
  const auto text = json::serialize(m);
  {
    std::FILE* f = std::fopen((dir / "manifest.json").c_str(), "w");
    if (!f || std::fwrite(text.data(), 1, text.size(), f) != text.size()) {
      if (f) std::fclose(f);
      std::cerr << "gpustream: capture: cannot write " << (dir / "manifest.json").string() << "\n";
      return kExitFailure;
    }
    std::fputc('\n', f);
    std::fclose(f);
  }
  std::cout << "captured " << b.files() << " files, " << b.links() << " links, " << b.bytes()
            << " bytes into " << dir.string() << " (" << b.findings().size()
            << " findings: see manifest.json)\n";
  return kExitOk;
}

void prepare_replay_capture(CommonOptions& common, const std::string& dir_arg) {
  const fs::path dir = absolute(dir_arg);
  const auto manifest_path = dir / "manifest.json";
  auto text = readers::read_file(manifest_path.string(), std::size_t{1} << 20);
  if (!text)
    throw ConfigError("--replay-capture: " + manifest_path.string() +
                      " cannot be read: not a capture made by `gpustream capture`");
  json::value manifest;
  try {
    manifest = json::parse(*text);
  } catch (const std::exception& e) {
    throw ConfigError("--replay-capture: " + manifest_path.string() + ": " + e.what());
  }
  const auto sub = [&](const char* rel) { return (dir / rel).string(); };
  if (!common.sysfs_root) common.sysfs_root = sub("sys");
  if (!common.procfs_root) common.procfs_root = sub("proc");
  if (!common.devfs_root) common.devfs_root = sub("dev");
  const auto set = [&](const char* flag, const std::string& value) {
    auto& v = common.probe_paths[flag];
    if (v.empty()) v = value;
  };
  const auto sources = capture::sources(Config{});
  for (const auto& f : sources.replay_flags) set(f.flag.c_str(), sub(f.rel.c_str()));
  if (!common.interval_seconds) {
    if (const auto* ms = manifest.as_object().if_contains("settings"))
      if (const auto* i = ms->as_object().if_contains("interval_ms"); i && i->is_int64())
        common.interval_seconds = static_cast<double>(i->as_int64()) / 1000.0;
  }
  // The fake libraries read their scenarios when loaded; no thread exists yet.
  for (const auto& e : sources.replay_env)
    ::setenv(e.name.c_str(), sub(e.rel.c_str()).c_str(), 1);  // NOLINT(concurrency-mt-unsafe)
}

}  // namespace gpustream::cli
