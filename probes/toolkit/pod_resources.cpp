#include "gpustream/probes/pod_resources.hpp"

#include <algorithm>
#include <cctype>
#include <tuple>
#include <utility>

#include "gpustream/log.hpp"

namespace gpustream::probes {
namespace {

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

bool printable(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c > 0x20 && c < 0x7f; });
}

bool is_hex(char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; }

/// "[dddd...:]bb:dd.f" in any case and domain width → "pci:dddd:bb:dd.f"; empty when not a PCI
/// bus id.
std::string pci_key(std::string_view id) {
  std::string domain = "0000";
  auto colon = id.find(':');
  if (colon == std::string_view::npos) return {};
  std::string_view rest = id;
  if (id.find(':', colon + 1) != std::string_view::npos) {  // a domain is there
    std::string_view d = id.substr(0, colon);
    while (d.size() > 4 && d.front() == '0') d.remove_prefix(1);
    if (d.empty() || d.size() > 4 || !std::all_of(d.begin(), d.end(), is_hex)) return {};
    domain = std::string(4 - d.size(), '0') + std::string(d);
    rest = id.substr(colon + 1);
  }
  // bb:dd.f
  if (rest.size() != 7 || rest[2] != ':' || rest[5] != '.' || !is_hex(rest[0]) ||
      !is_hex(rest[1]) || !is_hex(rest[3]) || !is_hex(rest[4]) || !is_hex(rest[6]))
    return {};
  std::string key = "pci:" + domain + ":" + std::string(rest);
  std::transform(key.begin(), key.end(), key.begin(), [](char c) {
    return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  });
  return key;
}

bool pod_less(const KubernetesPod& a, const KubernetesPod& b) {
  return std::tie(a.namespace_name, a.name, a.container) <
         std::tie(b.namespace_name, b.name, b.container);
}

}  // namespace

bool is_gpu_resource(std::string_view r) noexcept {
  return r == "nvidia.com/gpu" || starts_with(r, "nvidia.com/mig-") || starts_with(r, "amd.com/") ||
         r == "gpu.intel.com/i915" || r == "gpu.intel.com/xe";
}

std::string device_key(std::string_view resource, std::string_view id) {
  if (starts_with(resource, "gpu.intel.com/")) {
    // card<N>-<share>: the DRM card
    if (starts_with(id, "card")) {
      const auto dash = id.find('-');
      return std::string(id.substr(0, dash));
    }
    return std::string(id);
  }
  if (auto k = pci_key(id); !k.empty()) return k;
  // NVIDIA's replicas (time-slicing, MPS): "<uuid>::<n>"
  if (const auto sep = id.rfind("::");
      sep != std::string_view::npos && sep + 2 < id.size() &&
      std::all_of(id.begin() + static_cast<std::ptrdiff_t>(sep) + 2, id.end(),
                  [](char c) { return c >= '0' && c <= '9'; }))
    return std::string(id.substr(0, sep));
  return std::string(id);
}

bool PodResourceMap::add(std::string_view resource, std::string_view id, const KubernetesPod& pod) {
  if (!is_gpu_resource(resource)) return true;
  const auto ok = [](std::string_view s) {
    return !s.empty() && s.size() <= kMaxString && printable(s);
  };
  if (!ok(id) || !ok(pod.name) || !ok(pod.namespace_name) || !ok(pod.container)) {
    ++refused_;
    return false;
  }
  if (holds_ >= max_holds_) {
    ++bounded_;
    return false;
  }
  auto& v = by_key_[device_key(resource, id)];
  if (std::find(v.begin(), v.end(), pod) != v.end()) return true;  // two replicas, one holder
  v.push_back(pod);
  ++holds_;
  return true;
}

void PodResourceMap::finish() {
  for (auto& [key, v] : by_key_) std::sort(v.begin(), v.end(), pod_less);
}

std::span<const KubernetesPod> PodResourceMap::holders(const std::string& key) const {
  const auto it = by_key_.find(key);
  if (it == by_key_.end()) return {};
  return it->second;
}

std::span<const KubernetesPod> PodResourceMap::holders_of(const DeviceSample& d) const {
  if (auto h = holders(d.id); !h.empty()) return h;
  if (!d.pci_bus_id.empty() && d.parent.empty())  // a MIG instance shares its GPU's bus id
    if (auto k = pci_key(d.pci_bus_id); !k.empty())
      if (auto h = holders(k); !h.empty()) return h;
  if (const auto it = d.attributes.find("card"); it != d.attributes.end())
    if (auto h = holders(it->second); !h.empty()) return h;
  return {};
}

void apply_pods(const PodResourceMap* map, std::span<DeviceSample> devices) {
  for (auto& d : devices) {
    std::span<const KubernetesPod> holders;
    if (map) holders = map->holders_of(d);
    d.pods.assign(holders.begin(), holders.end());
    for (auto& p : d.processes) {
      p.pod.reset();
      p.pod_absent = PodAbsent::none;
      // Read through a const view: a write access would copy the shared container block.
      if (!p.container || std::as_const(p.container)->pod_uid.empty()) continue;  // not in a pod
      if (!map)
        p.pod_absent = PodAbsent::kubelet_unavailable;
      else if (holders.empty())
        p.pod_absent = PodAbsent::not_assigned;
      else if (holders.size() > 1)
        p.pod_absent = PodAbsent::ambiguous;
      else
        p.pod = holders.front();
    }
  }
}

// ---------------------------------------------------------------------------------------------

KubeletWatcher::KubeletWatcher(std::unique_ptr<KubeletLister> lister, KubeletWatcherOptions o)
    : lister_(std::move(lister)), options_(o) {}

KubeletWatcher::~KubeletWatcher() { stop(); }

void KubeletWatcher::start() {
  std::lock_guard lock(mu_);
  if (thread_.joinable() || stopping_) return;
  thread_ = std::thread([this] { run(); });
}

void KubeletWatcher::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

void KubeletWatcher::run() {
  for (;;) {
    const auto delay = refresh_once();
    std::unique_lock lock(mu_);
    if (wake_.wait_for(lock, delay, [this] { return stopping_; })) return;
  }
}

std::chrono::milliseconds KubeletWatcher::refresh_once() {
  KubeletListResult r = lister_->list();
  std::lock_guard lock(mu_);
  if (r.map) {
    r.map->finish();
    stats_.refreshes++;
    stats_.available = true;
    stats_.pods = r.map->pods();
    stats_.devices = r.map->devices();
    stats_.refused += r.map->refused();
    stats_.bounded += r.map->bounded();
    stats_.last_error.clear();
    if (r.map->refused() > 0 && log_once_.first("refused"))
      logger()->warn(
          "kubelet: {} device hold(s) of the PodResources answer refused (a name or device id "
          "empty, over 253 bytes or not printable ASCII); counted in "
          "gpustream_kubelet_holds_refused_total",
          r.map->refused());
    if (r.map->bounded() > 0 && log_once_.first("bounded"))
      logger()->warn(
          "kubelet: the PodResources answer holds more than {} GPU device holds; {} left out "
          "(gpustream_kubelet_holds_bounded_total)",
          r.map->holds(), r.map->bounded());
    if (!current_ && stats_.refreshes > 1) logger()->info("kubelet: answering again");
    log_once_.retain({"refused", "bounded"});
    current_ = std::move(r.map);
    backoff_ = std::chrono::milliseconds{0};
    return options_.refresh;
  }
  stats_.errors++;
  stats_.errors_by_reason[r.error]++;
  stats_.available = false;
  stats_.last_error = r.error;
  current_.reset();
  if (log_once_.first("error:" + r.error))
    logger()->warn(
        "kubelet: no pod names ({}: {}); processes in pods say pod_absent kubelet_unavailable "
        "until it answers (retried with backoff; counted in gpustream_kubelet_errors_total)",
        r.error, r.message);
  backoff_ =
      backoff_.count() == 0 ? options_.backoff_min : std::min(backoff_ * 2, options_.backoff_max);
  return backoff_;
}

std::shared_ptr<const PodResourceMap> KubeletWatcher::current() const {
  std::lock_guard lock(mu_);
  return current_;
}

void KubeletWatcher::annotate(GpuSnapshot& s) const {
  const auto map = current();
  apply_pods(map.get(), s.devices);
}

KubeletStats KubeletWatcher::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

}  // namespace gpustream::probes
