// `gpustream doctor`: runs each probe's checks (its registry row's `doctor` column) in registry
// order; what the checks share is in toolkit/doctor_checks.hpp.
#include "gpustream/probes/doctor.hpp"

#include <algorithm>
#include <cstdlib>
#include <stdexcept>

#include <boost/json.hpp>

#include "gpustream/probes/registry.hpp"
#include "toolkit/doctor_checks.hpp"

namespace gpustream::doctor {
namespace {

constexpr std::string_view kSchema = "gpustream-doctor/1";

/// The variables the doctor reads from the environment besides every row's environment column
/// (the container checks').
constexpr std::string_view kEnvNames[] = {"container", "KUBERNETES_SERVICE_HOST"};

Status worst(const Report& r, const std::string& probe) {
  Status w = Status::ok;
  for (const auto& f : r.findings)
    if (f.probe == probe && static_cast<int>(f.status) > static_cast<int>(w)) w = f.status;
  return w;
}

}  // namespace

Options options_from_config(const Config& config) {
  Options o;
  o.paths = config.paths;
  o.probes = config.probes;
  o.simulate = config.simulate;
  o.probe_settings = config.probe_settings;
  // A bad setting of a probe it examines is an error, as the probe's factory makes it.
  for (const auto& row : probe_rows())
    if (row.read_settings && (o.probes.empty() || std::find(o.probes.begin(), o.probes.end(),
                                                            row.name) != o.probes.end()))
      row.read_settings(config);
  return o;
}

std::map<std::string, std::string> environment_snapshot() {
  std::map<std::string, std::string> out;
  const auto take = [&](std::string_view name) {
    // NOLINTNEXTLINE(concurrency-mt-unsafe): called first thing in main, one thread.
    if (const char* v = std::getenv(std::string(name).c_str())) out[std::string(name)] = v;
  };
  for (auto name : kEnvNames) take(name);
  for (const auto& row : probe_rows())
    for (const auto& e : row.environment) take(e.name);
  return out;
}

Report run(const Options& options) {
  Report report;
  std::vector<std::string> wanted = options.probes;
  if (wanted.empty()) {
    for (auto n : known_probe_names()) wanted.emplace_back(n);
  } else if (options.simulate > 0 &&
             std::find(wanted.begin(), wanted.end(), kSimulatedProbe) == wanted.end()) {
    wanted.emplace_back(kSimulatedProbe);
  }
  detail::Context c{options, machine::read_identity(options.paths.procfs_root),
                    machine::drm_nodes(options.paths.sysfs_root), report.findings, report.pending};
  for (const auto& row : probe_rows()) {  // registry order
    const auto name = row.name;
    if (std::find(wanted.begin(), wanted.end(), name) == wanted.end()) continue;
    report.probes.emplace_back(name);
    const auto before = report.findings.size();
    try {
      if (row.doctor) row.doctor(c);
    } catch (const std::exception& e) {  // a check never takes the others down
      c.add(name, "doctor", Status::warn, std::string("this check failed: ") + e.what());
    }
    if (report.findings.size() == before)
      c.add(name, "doctor", Status::info, "no check for this probe");
  }
  return report;
}

std::string to_json(const Report& report) {
  boost::json::array probes;
  for (const auto& p : report.probes)
    probes.push_back({{"probe", p}, {"status", to_string(worst(report, p))}});
  boost::json::array findings;
  for (const auto& f : report.findings)
    findings.push_back({{"probe", f.probe},
                        {"check", f.check},
                        {"status", to_string(f.status)},
                        {"detail", f.detail},
                        {"fix", f.fix}});
  boost::json::object doc{{"schema", kSchema},
                          {"fully_readable", report.fully_readable()},
                          {"blockers", report.count(Status::blocker)},
                          {"warnings", report.count(Status::warn)},
                          {"probes", std::move(probes)},
                          {"findings", std::move(findings)}};
  if (report.gpus_readable) {
    doc["gpus_readable"] = *report.gpus_readable;
    doc["gpus_expected"] = report.gpus_expected;
    doc["enough_gpus"] = report.enough_gpus();
  }
  return boost::json::serialize(doc);
}

std::string to_text(const Report& report) {
  std::string out;
  for (const auto& p : report.probes) {
    out += p + ": " + std::string(to_string(worst(report, p))) + "\n";
    for (const auto& f : report.findings) {
      if (f.probe != p) continue;
      std::string tag = "[" + std::string(to_string(f.status)) + "]";
      tag.resize(std::max<std::size_t>(tag.size(), 10), ' ');
      out += "  " + tag + f.check + ": " + f.detail + "\n";
      if (!f.fix.empty()) out += "            fix: " + f.fix + "\n";
    }
  }
  out += "\n";
  const bool none = report.gpus_readable && *report.gpus_readable == 0;
  out += !report.fully_readable()
             ? std::to_string(report.count(Status::blocker)) +
                   " blocker(s): some GPU, or part of what gpustream reads of it, cannot be read"
         : none ? "No GPU found: there is no GPU to read"
                : "Every GPU found can be read fully";
  out += " (" + std::to_string(report.count(Status::warn)) + " warning(s)).\n";
  if (report.gpus_readable) {
    const auto n = std::to_string(*report.gpus_readable);
    const auto want = std::to_string(report.gpus_expected);
    if (!report.enough_gpus())
      out += "Fewer GPUs than expected: " + n + " found, " + want + " expected (--expect-gpus).\n";
    else if (report.gpus_expected > 0)
      out += n + " GPU(s) found, " + want + " expected (--expect-gpus).\n";
    else
      out += n + " GPU(s) found.\n";
  }
  return out;
}

}  // namespace gpustream::doctor
