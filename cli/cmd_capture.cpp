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
#include "gpustream/probes/amd_probe.hpp"
#include "gpustream/probes/apple_probe.hpp"
#include "gpustream/probes/capture.hpp"
#include "gpustream/probes/readers.hpp"

namespace gpustream::cli {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;
using namespace capture_detail;

constexpr const char* kVersion = "0.1.0";
constexpr int kFormat = 1;
constexpr const char* kScenarioEnv = "GPUSTREAM_FAKE_NVML_SCENARIO";

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string setting_or(const Config& c, const char* section, const char* key,
                       std::string fallback) {
  if (const auto* v = c.probe_settings.get(section, key))
    if (const auto* s = v->if_string()) return *s;
  return fallback;
}

std::string absolute(const std::string& p) {
  std::error_code ec;
  auto a = fs::absolute(p, ec);
  auto s = (ec ? fs::path(p) : a).lexically_normal().string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

json::object capture_nvml(CaptureBundle& b, const Config& config, std::vector<std::int64_t>& pids) {
  const auto library = setting_or(config, "nvidia", "library", "libnvidia-ml.so.1");
  const auto r = capture::record_nvml(library);
  json::object out{{"library", library},
                   {"loaded", r.loaded},
                   {"initialized", r.initialized},
                   {"devices", r.devices}};
  if (!r.driver_version.empty()) out["driver_version"] = r.driver_version;
  json::array notes;
  for (const auto& n : r.notes) notes.emplace_back(n);
  out["notes"] = std::move(notes);
  if (!r.loaded)
    b.finding("nvml", r.notes.empty() ? "NVML not loaded" : r.notes.front());
  else if (!r.initialized)
    b.finding("nvml", r.notes.empty() ? "NVML init failed" : r.notes.front());
  b.write("nvml/scenario.txt", r.scenario);
  out["scenario"] = "nvml/scenario.txt";
  pids.insert(pids.end(), r.pids.begin(), r.pids.end());
  return out;
}

/// The pids amd-smi's process list and nvidia-smi's compute apps name: their /proc files make
/// the replay's process names and host RSS the same.
void tool_pids(const std::vector<RecordedRun>& runs, std::vector<std::int64_t>& pids) {
  for (const auto& r : runs) {
    try {
      if (r.tool == "amd-smi" && !r.args.empty() && r.args.front() == "process") {
        for (const auto& [gpu, list] : amd_cli::parse_amd_smi_process(r.output))
          for (const auto& p : list) pids.push_back(p.process.pid);
      }
    } catch (const std::exception&) {
      // Not parseable: the replay shows the same parse error, with or without these files.
    }
    if (r.tool == "nvidia-smi" && !r.args.empty() &&
        r.args.front().rfind("--query-compute-apps", 0) == 0) {
      std::string_view text = r.output;
      while (!text.empty()) {  // "uuid, pid, memory, name": the second cell
        const auto nl = text.find('\n');
        const auto line = text.substr(0, nl);
        text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
        const auto c1 = line.find(',');
        if (c1 == std::string_view::npos) continue;
        const auto c2 = line.find(',', c1 + 1);
        if (auto pid = readers::parse_int(readers::trim(line.substr(c1 + 1, c2 - c1 - 1))))
          pids.push_back(*pid);
      }
    }
  }
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
  const auto interval = apple_probe_options(config).interval;

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
  const auto ids = setting_or(config, "amd", "amdgpu_ids", kDefaultAmdgpuIdsPath);
  if (!ids.empty()) m["amdgpu_ids"] = b.copy(ids, "share/amdgpu.ids");
  m["procfs"] = capture_procfs(b, procfs_root, config.watch_pids, o.max_processes);
  std::vector<std::int64_t> gpu_pids;
  m["nvml"] = capture_nvml(b, config, gpu_pids);
  std::vector<RecordedRun> runs;
  m["tools"] = capture_tools(b, config, interval, o.tool_timeout, o.max_file_bytes, runs);
  tool_pids(runs, gpu_pids);
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
  set("--amd-smi", sub("tools/amd-smi"));
  set("--rocm-smi", sub("tools/rocm-smi"));
  set("--nvidia-smi", sub("tools/nvidia-smi"));
  set("--macmon", sub("tools/macmon"));
  set("--amdgpu-ids", sub("share/amdgpu.ids"));
  set("--level-zero-library", sub("level-zero/not-captured/libze_loader.so.1"));
  set("--nvml-library", sub("nvml/libnvidia-ml.so.1"));
  if (!common.interval_seconds) {
    if (const auto* ms = manifest.as_object().if_contains("settings"))
      if (const auto* i = ms->as_object().if_contains("interval_ms"); i && i->is_int64())
        common.interval_seconds = static_cast<double>(i->as_int64()) / 1000.0;
  }
  // The fake NVML reads its scenario at every nvmlInit; no thread exists yet.
  // NOLINTNEXTLINE(concurrency-mt-unsafe)
  ::setenv(kScenarioEnv, sub("nvml/scenario.txt").c_str(), 1);
}

}  // namespace gpustream::cli
