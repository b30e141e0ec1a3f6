// The fleet's node table (staleness), stale/gone markers, the planner and the JSON documents.
#include <algorithm>
#include <cmath>
#include <unordered_map>

#include <boost/json.hpp>

#include "gpustream/json.hpp"
#include "gpustream/transport/fleet.hpp"

namespace gpustream::transport {
namespace json = boost::json;

std::string_view to_string(NodeState s) noexcept {
  switch (s) {
    case NodeState::up:
      return "up";
    case NodeState::stale:
      return "stale";
    case NodeState::gone:
      return "gone";
  }
  return "unknown";
}

NodeTable::NodeTable(std::chrono::milliseconds stale_after, std::chrono::milliseconds gone_after,
                     std::size_t max_nodes)
    : stale_after_(std::max(stale_after, std::chrono::milliseconds(1))),
      gone_after_(std::max(gone_after, stale_after_)),
      max_nodes_(std::max<std::size_t>(max_nodes, 1)) {}

bool NodeTable::heard(const std::string& node, std::string_view agent, std::int64_t sample_unix_ns,
                      Clock::time_point now, std::int64_t heard_unix_ns,
                      std::optional<NodeState>* before) {
  auto it = nodes_.find(node);
  if (before) *before = it == nodes_.end() ? std::nullopt : std::optional(it->second.info.state);
  if (it == nodes_.end()) {
    if (nodes_.size() >= max_nodes_) {
      // Room is made only from gone nodes: the one heard from longest ago.
      auto victim = nodes_.end();
      for (auto i = nodes_.begin(); i != nodes_.end(); ++i)
        if (i->second.info.state == NodeState::gone &&
            (victim == nodes_.end() || i->second.heard < victim->second.heard))
          victim = i;
      if (victim == nodes_.end()) return false;
      nodes_.erase(victim);
    }
    it = nodes_.emplace(node, Entry{}).first;
    it->second.info.name = node;
  }
  auto& e = it->second;
  // A message that was sampled long ago (the key-value state of a node that stopped) does not
  // make the node look fresher than it is: `now` is when it was heard.
  if (now >= e.heard || e.info.messages == 0) e.heard = now;
  e.info.state = NodeState::up;
  e.info.agent = std::string(agent);
  e.info.last_sample_unix_ns = std::max(e.info.last_sample_unix_ns, sample_unix_ns);
  e.info.last_heard_unix_ns = std::max(e.info.last_heard_unix_ns, heard_unix_ns);
  ++e.info.messages;
  return true;
}

std::vector<std::pair<std::string, NodeState>> NodeTable::advance(Clock::time_point now) {
  std::vector<std::pair<std::string, NodeState>> changed;
  for (auto& [name, e] : nodes_) {
    const auto quiet = now - e.heard;
    NodeState want = NodeState::up;
    if (quiet >= gone_after_)
      want = NodeState::gone;
    else if (quiet >= stale_after_)
      want = NodeState::stale;
    // Only forward: a node comes back up by a message, never by the clock.
    if (static_cast<int>(want) > static_cast<int>(e.info.state)) {
      e.info.state = want;
      changed.emplace_back(name, want);
    }
  }
  return changed;
}

std::optional<NodeState> NodeTable::state(std::string_view node) const {
  const auto it = nodes_.find(node);
  if (it == nodes_.end()) return std::nullopt;
  return it->second.info.state;
}

std::int64_t NodeTable::last_heard_unix_ns(std::string_view node) const {
  const auto it = nodes_.find(node);
  return it == nodes_.end() ? 0 : it->second.info.last_heard_unix_ns;
}

std::vector<NodeInfo> NodeTable::nodes() const {
  std::vector<NodeInfo> out;
  out.reserve(nodes_.size());
  for (const auto& [name, e] : nodes_) out.push_back(e.info);
  return out;
}

namespace {

std::string seconds_text(std::int64_t ns) {
  const double s = static_cast<double>(ns) / 1e9;
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", s);
  return buf;
}

SampleError node_error(const GpuSnapshot& s, std::string code, std::string_view what,
                       std::int64_t last_heard_unix_ns) {
  const std::int64_t ago = wall_now_ns() - last_heard_unix_ns;
  return {std::move(code),
          "node " + s.node + " " + std::string(what) + ": nothing heard from it for " +
              seconds_text(ago) + " s; its last values are withheld",
          ""};
}

}  // namespace

GpuSnapshot stale_copy(const GpuSnapshot& s, std::int64_t last_heard_unix_ns) {
  GpuSnapshot out;
  out.probe = s.probe;
  out.node = s.node;
  out.time_unix_ns = s.time_unix_ns;
  out.monotonic_ns = s.monotonic_ns;
  out.sample_duration_ns = s.sample_duration_ns;
  out.devices.reserve(s.devices.size());
  for (const auto& d : s.devices) {
    DeviceSample c;
    c.id = d.id;
    c.vendor = d.vendor;
    c.index = d.index;
    c.name = d.name;
    c.pci_bus_id = d.pci_bus_id;
    for (std::size_t i = 0; i < kMetricCount; ++i) {
      const auto m = static_cast<Metric>(i);
      c.metrics.set_absent(m, Absence::stale, d.metrics[m].source());
    }
    c.power_state = PowerState::unknown;
    c.processes_absent = Absence::stale;
    c.attributes = d.attributes;
    out.devices.push_back(std::move(c));
  }
  out.errors.push_back(node_error(s, "node_stale", "is stale", last_heard_unix_ns));
  return out;
}

GpuSnapshot gone_marker(const GpuSnapshot& s, std::int64_t last_heard_unix_ns) {
  GpuSnapshot out;
  out.probe = s.probe;
  out.node = s.node;
  out.time_unix_ns = s.time_unix_ns;
  out.monotonic_ns = s.monotonic_ns;
  out.errors.push_back(node_error(s, "node_gone", "is gone", last_heard_unix_ns));
  return out;
}

std::vector<FleetFit> fleet_fits(const std::vector<SnapshotPtr>& latest, const NodeTable& table,
                                 std::uint64_t bytes, std::int64_t now_unix_ns) {
  std::vector<FleetFit> out;
  for (auto& f : fits(latest, bytes)) {
    FleetFit ff;
    ff.state = table.state(f.node).value_or(NodeState::up);
    if (ff.state != NodeState::up) continue;  // never an old figure as current
    ff.age_ns = std::max<std::int64_t>(0, now_unix_ns - f.time_unix_ns);
    ff.fit = std::move(f);
    out.push_back(std::move(ff));
  }
  return out;
}

std::string nodes_json(const std::vector<SnapshotPtr>& latest, const NodeTable& table,
                       std::int64_t now_unix_ns) {
  struct Sum {
    std::size_t devices = 0;
    std::size_t processes = 0;
    double util_sum = 0;
    std::size_t util_n = 0;
    double used = 0;
    double total = 0;
    double power = 0;
    bool has_memory = false;
    bool has_power = false;
    std::size_t errors = 0;
  };
  std::unordered_map<std::string_view, Sum> sums;
  for (const auto& s : latest) {
    if (!s) continue;
    auto& sum = sums[s->node];
    sum.errors += s->errors.size();
    for (const auto& d : s->devices) {
      ++sum.devices;
      sum.processes += d.processes.size();
      if (const auto& u = d.metrics[Metric::utilization_percent]) {
        sum.util_sum += u.value();
        ++sum.util_n;
      }
      const auto& used = d.metrics[Metric::memory_used_bytes];
      const auto& total = d.metrics[Metric::memory_total_bytes];
      if (used && total) {
        sum.used += used.value();
        sum.total += total.value();
        sum.has_memory = true;
      }
      if (const auto& p = d.metrics[Metric::power_watts]) {
        sum.power += p.value();
        sum.has_power = true;
      }
    }
  }
  json::array nodes;
  std::size_t counts[3] = {0, 0, 0};
  for (const auto& n : table.nodes()) {
    ++counts[static_cast<int>(n.state)];
    json::object o;
    o["node"] = n.name;
    o["state"] = to_string(n.state);
    o["agent"] = n.agent;
    o["last_sample_unix_ns"] = n.last_sample_unix_ns;
    o["last_heard_unix_ns"] = n.last_heard_unix_ns;
    o["age_seconds"] = static_cast<double>(now_unix_ns - n.last_heard_unix_ns) / 1e9;
    o["messages"] = n.messages;
    const auto it = sums.find(n.name);
    const Sum sum = it == sums.end() ? Sum{} : it->second;
    o["devices"] = sum.devices;
    o["processes"] = sum.processes;
    o["errors"] = sum.errors;
    // Absent figures are null (stale and gone nodes have none), never 0.
    o["utilization_percent_mean"] =
        sum.util_n ? json::value(sum.util_sum / static_cast<double>(sum.util_n)) : json::value();
    o["memory_used_bytes"] = sum.has_memory ? json::value(sum.used) : json::value();
    o["memory_total_bytes"] = sum.has_memory ? json::value(sum.total) : json::value();
    o["power_watts"] = sum.has_power ? json::value(sum.power) : json::value();
    nodes.push_back(std::move(o));
  }
  json::object doc{{"schema", kSchema},
                   {"stale_after_seconds", static_cast<double>(table.stale_after().count()) / 1e3},
                   {"gone_after_seconds", static_cast<double>(table.gone_after().count()) / 1e3},
                   {"up", counts[0]},
                   {"stale", counts[1]},
                   {"gone", counts[2]},
                   {"nodes", std::move(nodes)}};
  return json::serialize(doc) + "\n";
}

std::vector<FitEntry> fit_entries(const std::vector<FleetFit>& fits) {
  std::vector<FitEntry> out;
  out.reserve(fits.size());
  for (const auto& f : fits) out.push_back(fit_entry(f.fit, to_string(f.state), f.age_ns));
  return out;
}

std::string fit_json(const std::vector<FleetFit>& fits, std::uint64_t bytes) {
  // The entries are the protocol's fit_result entries, the document serve's /api/v1/fit
  // (one encoder for all three).
  return fit_json(fit_entries(fits), bytes);
}

}  // namespace gpustream::transport
