// gpustream list — each probe: available or not and why; the devices it found.
#include <algorithm>
#include <future>
#include <iostream>
#include <set>

#include <fmt/format.h>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/json.hpp>

#include "commands.hpp"
#include "gpustream/detail/json_text.hpp"
#include "gpustream/probes/registry.hpp"
#include "gpustream/probes/source_note.hpp"
#include "gpustream/terminal_text.hpp"

namespace gpustream::cli {

std::vector<ProbeReport> detect_probes(const Config& config, std::chrono::milliseconds timeout) {
  static const std::string kPending = "\x01pending";
  Config c = config;
  if (c.probes.empty()) {
    c.probes = default_probe_names();
    if (c.simulate > 0) c.probes.emplace_back(kSimulatedProbe);
  }
  boost::asio::io_context io;
  boost::asio::thread_pool pool(2);
  ProbeExecutors ex{io.get_executor(), pool.get_executor()};
  auto set = make_probes(c, ex);
  const auto& built = set.probes;
  const auto& errors = set.errors;

  std::vector<ProbeReport> reports;
  for (const auto& name : c.probes) {
    ProbeReport r;
    r.name = name;
    r.detection.available = false;
    r.detection.reason = kPending;
    for (const auto& e : errors)
      if (e.find("'" + name + "'") != std::string::npos) r.detection.reason = e;
    reports.push_back(std::move(r));
  }
  // The detections run on the pool and post back to io: keep io alive until all have answered.
  auto guard = boost::asio::make_work_guard(io);
  std::size_t pending = built.size();
  for (const auto& p : built) {
    if (const auto* noted = dynamic_cast<const SourceNote*>(p.get()))
      for (auto& r : reports)
        if (r.name == p->name()) r.note = noted->source_note();
    p->async_detect([&, name = std::string(p->name())](Detection d) {
      for (auto& r : reports) {
        if (r.name != name) continue;
        r.detection = std::move(d);  // names are unique: one report
        break;
      }
      if (--pending == 0) guard.reset();
    });
  }
  if (pending == 0) guard.reset();
  io.run_for(timeout);
  for (auto& r : reports)
    if (r.detection.reason == kPending && !r.detection.available)
      r.detection.reason =
          "detection did not answer within " + std::to_string(timeout.count() / 1000) + " s";
  for (const auto& p : built) p->cancel();
  pool.join();
  return reports;
}

int run_list(const Config& config, const ListOptions& o) {
  const auto reports = detect_probes(config, std::chrono::seconds{15});
  if (o.json) {
    boost::json::array arr;
    for (const auto& r : reports) {
      boost::json::array devs;
      for (const auto& d : r.detection.devices)
        devs.push_back({{"id", d.id},
                        {"vendor", to_string(d.vendor)},
                        {"index", d.index},
                        {"name", d.name},
                        {"pci_bus_id", d.pci_bus_id}});
      boost::json::object obj{{"probe", r.name}, {"available", r.detection.available}};
      if (!r.detection.available) obj["reason"] = r.detection.reason;
      if (!r.note.empty()) obj["note"] = r.note;
      obj["devices"] = std::move(devs);
      arr.push_back(std::move(obj));
    }
    // The SDK's JSON writer: a name or reason that is not UTF-8 is repaired (boost's would not).
    std::string text;
    detail::append_json_value(
        text, boost::json::object{{"schema", "gpustream/1"}, {"probes", std::move(arr)}});
    std::cout << text << "\n";
    return 0;
  }
  // Names, ids and reasons come from drivers and tools: terminal_safe.
  for (const auto& r : reports) {
    if (r.detection.available) {
      std::cout << fmt::format("{:<10} available, {} device{}\n", terminal_safe(r.name),
                               r.detection.devices.size(),
                               r.detection.devices.size() == 1 ? "" : "s");
      for (const auto& d : r.detection.devices)
        std::cout << fmt::format("  [{}] {:<28} id={}{}\n", d.index, terminal_safe(d.name),
                                 terminal_safe(d.id),
                                 d.pci_bus_id.empty() ? "" : " pci=" + terminal_safe(d.pci_bus_id));
    } else {
      std::cout << fmt::format("{:<10} unavailable: {}\n", terminal_safe(r.name),
                               terminal_safe(r.detection.reason));
    }
    if (!r.note.empty()) std::cout << fmt::format("  {}\n", terminal_safe(r.note));
  }
  return 0;
}

}  // namespace gpustream::cli

namespace gpustream::cli {

Command list_command() {
  return {"list", "Each probe: available or not and why; its devices",
          [](CLI::App& sub, CommandContext& context) -> CommandRun {
            auto o = std::make_shared<ListOptions>();
            add_common_options(sub, context.common, false);
            sub.add_flag("--json", o->json, "JSON output");
            return [o, &context] { return run_list(make_config(context.common), *o); };
          }};
}

}  // namespace gpustream::cli
