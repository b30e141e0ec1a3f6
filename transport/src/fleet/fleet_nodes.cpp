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

std::string_view to_string(FleetRefusal r) noexcept {
  switch (r) {
    case FleetRefusal::bad_subject:
      return "bad_subject";
    case FleetRefusal::subject_mismatch:
      return "subject_mismatch";
    case FleetRefusal::node_table_full:
      return "node_table_full";
    case FleetRefusal::budget_messages:
      return "budget_messages";
    case FleetRefusal::queue_full:
      return "queue_full";
    case FleetRefusal::too_large:
      return "too_large";
    case FleetRefusal::budget_bytes:
      return "budget_bytes";
    case FleetRefusal::budget_cpu:
      return "budget_cpu";
    case FleetRefusal::malformed:
      return "malformed";
    case FleetRefusal::seq_stale:
      return "seq_stale";
    case FleetRefusal::seq_jump:
      return "seq_jump";
    case FleetRefusal::waiting:
      return "waiting";
    case FleetRefusal::inflation:
      return "inflation";
    case FleetRefusal::too_many_devices:
      return "too_many_devices";
    case FleetRefusal::too_many_streams:
      return "too_many_streams";
    case FleetRefusal::republished:
      return "republished";
    case FleetRefusal::key_mismatch:
      return "key_mismatch";
    case FleetRefusal::bad_key:
      return "bad_key";
  }
  return "unknown";
}

std::string_view to_string(KvStorage s) noexcept {
  return s == KvStorage::memory ? "memory" : "file";
}

NodeTable::NodeTable(std::chrono::milliseconds stale_after, std::chrono::milliseconds gone_after,
                     std::size_t max_nodes, std::size_t max_streams)
    : stale_after_(std::max(stale_after, std::chrono::milliseconds(1))),
      gone_after_(std::max(gone_after, stale_after_)),
      max_nodes_(std::max<std::size_t>(max_nodes, 1)),
      max_streams_(std::max<std::size_t>(max_streams, 1)) {}

void NodeTable::index(const Entry& e, const std::string& name) {
  by_state_[static_cast<int>(e.info.state)].emplace(e.heard, name);
}

void NodeTable::unindex(const Entry& e, const std::string& name) {
  by_state_[static_cast<int>(e.info.state)].erase({e.heard, name});
}

void NodeTable::forget_streams(std::string_view node) {
  auto it = streams_.lower_bound(std::make_pair(std::string(node), std::string()));
  while (it != streams_.end() && it->first.first == node) {
    streams_by_heard_.erase({it->second, {it->first.first, it->first.second}});
    it = streams_.erase(it);
  }
}

void NodeTable::stream_heard(const std::string& node, std::string_view probe,
                             Clock::time_point now) {
  auto it = streams_.find(std::make_pair(node, std::string(probe)));
  if (it != streams_.end()) {
    if (now < it->second) return;  // an old state (the bucket's) does not make it fresher
    streams_by_heard_.erase({it->second, {it->first.first, it->first.second}});
    it->second = now;
  } else {
    if (streams_.size() >= max_streams_) {
      // Room is made from the stream heard from longest ago: it is reported stale next (its
      // node's other streams and the node itself stay as they are).
      const auto oldest = streams_by_heard_.begin();
      const auto victim = streams_.find(
          std::make_pair(std::string(oldest->second.first), std::string(oldest->second.second)));
      evicted_streams_.push_back(victim->first);
      streams_by_heard_.erase(oldest);
      streams_.erase(victim);
    }
    it = streams_.emplace(std::make_pair(node, std::string(probe)), now).first;
  }
  streams_by_heard_.emplace(
      now, std::make_pair(std::string_view(it->first.first), std::string_view(it->first.second)));
}

bool NodeTable::admits(std::string_view node) const {
  return nodes_.size() < max_nodes_ || nodes_.find(node) != nodes_.end() ||
         !by_state_[static_cast<int>(NodeState::gone)].empty();
}

bool NodeTable::heard(const std::string& node, std::string_view agent, std::int64_t sample_unix_ns,
                      Clock::time_point now, std::int64_t heard_unix_ns,
                      std::optional<NodeState>* before, std::string_view probe) {
  auto it = nodes_.find(node);
  if (before) *before = it == nodes_.end() ? std::nullopt : std::optional(it->second.info.state);
  if (it == nodes_.end()) {
    if (nodes_.size() >= max_nodes_) {
      // Room is made only from gone nodes: the one heard from longest ago (the first of the
      // gone index: O(log n), no scan).
      auto& gone = by_state_[static_cast<int>(NodeState::gone)];
      if (gone.empty()) return false;
      const auto victim = nodes_.find(gone.begin()->second);
      gone.erase(gone.begin());
      forget_streams(victim->first);
      nodes_.erase(victim);
    }
    it = nodes_.emplace(node, Entry{}).first;
    it->second.info.name = node;
    it->second.heard = now;
  } else {
    unindex(it->second, it->first);
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
  index(e, it->first);
  if (!probe.empty()) stream_heard(it->first, probe, now);
  return true;
}

std::vector<std::pair<std::string, NodeState>> NodeTable::advance(
    Clock::time_point now, std::vector<Stream>* stale_streams) {
  std::vector<std::pair<std::string, NodeState>> changed;
  // Only forward: a node comes back up by a message, never by the clock. The oldest of each
  // index first, only as far as the bound: O(changes · log n).
  const auto move_on = [&](NodeState from) {
    auto& idx = by_state_[static_cast<int>(from)];
    const auto bound = from == NodeState::up ? stale_after_ : gone_after_;
    while (!idx.empty() && now - idx.begin()->first >= bound) {
      auto& e = nodes_.find(idx.begin()->second)->second;
      idx.erase(idx.begin());
      e.info.state = now - e.heard >= gone_after_ ? NodeState::gone : NodeState::stale;
      index(e, e.info.name);
      // Its streams go with it: the node's stale copies or gone markers stand for all of them.
      forget_streams(e.info.name);
      changed.emplace_back(e.info.name, e.info.state);
    }
  };
  move_on(NodeState::up);
  move_on(NodeState::stale);
  std::sort(changed.begin(), changed.end());
  // An up node becomes stale, then gone, in one call when both bounds passed: reported once.
  changed.erase(std::unique(changed.begin(), changed.end(),
                            [](const auto& a, const auto& b) { return a.first == b.first; }),
                changed.end());
  for (auto& c : changed) c.second = nodes_.find(c.first)->second.info.state;
  // The streams of nodes still up that were not heard for stale_after (nodes no longer up had
  // their streams forgotten above).
  std::vector<Stream> streams = std::move(evicted_streams_);
  evicted_streams_.clear();
  while (!streams_by_heard_.empty() && now - streams_by_heard_.begin()->first >= stale_after_) {
    const auto key = streams_by_heard_.begin()->second;
    const auto it = streams_.find(std::make_pair(std::string(key.first), std::string(key.second)));
    streams_by_heard_.erase(streams_by_heard_.begin());
    streams.push_back(it->first);
    streams_.erase(it);
  }
  if (stale_streams) {
    for (auto& s : streams)
      if (state(s.first) == NodeState::up) stale_streams->push_back(std::move(s));
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

std::vector<std::pair<std::string, NodeState>> NodeTable::states() const {
  std::vector<std::pair<std::string, NodeState>> out;
  out.reserve(nodes_.size());
  for (const auto& [name, e] : nodes_) out.emplace_back(name, e.info.state);
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

GpuSnapshot stale_copy(const GpuSnapshot& s, std::int64_t last_heard_unix_ns, bool stream_only) {
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
  if (stream_only)
    out.errors.push_back({"stream_stale",
                          "node " + s.node + " is up, but nothing of its probe " + s.probe +
                              " was accepted for its stale bound; its last values are withheld",
                          ""});
  else
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
