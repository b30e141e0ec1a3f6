// container.cpp — the container of a process from its cgroup path (see container.hpp for the
// path shapes of each runtime).
#include "gpustream/probes/container.hpp"

#include <array>
#include <cstddef>

namespace gpustream::probes {
namespace {

constexpr std::size_t kMaxCgroupText = 64 * 1024;
constexpr std::size_t kIdLength = 64;

bool is_hex_id(std::string_view s) noexcept {
  if (s.size() != kIdLength) return false;
  for (char c : s) {
    const bool hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
    if (!hex) return false;
  }
  return true;
}

bool starts_with(std::string_view s, std::string_view prefix) noexcept {
  return s.substr(0, prefix.size()) == prefix;
}

bool ends_with(std::string_view s, std::string_view suffix) noexcept {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// A pod UID as the kubelet names cgroups: "pod" + uid, the uid with '_' for '-' under the systemd
// driver. Given back in its canonical 8-4-4-4-12 form; empty when it is not one.
std::string pod_uid_from(std::string_view element) {
  if (!starts_with(element, "pod")) return {};
  std::string uid(element.substr(3));
  for (char& c : uid) {
    if (c == '_') c = '-';
  }
  constexpr std::array<std::size_t, 4> kDashes{8, 13, 18, 23};
  if (uid.size() != 36) return {};
  for (std::size_t i = 0; i < uid.size(); ++i) {
    const char c = uid[i];
    const bool dash_here = i == kDashes[0] || i == kDashes[1] || i == kDashes[2] || i == kDashes[3];
    if (dash_here) {
      if (c != '-') return {};
    } else if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
      return {};
    }
  }
  return uid;
}

// One path element of a container scope: "<prefix><id>.scope" (systemd driver) or "<id>" alone
// after a runtime element (cgroupfs driver). Returns the runtime, or empty.
struct ScopeMatch {
  std::string_view runtime;
  std::string_view id;
};

ScopeMatch match_scope(std::string_view element) {
  struct Prefix {
    std::string_view prefix;
    std::string_view runtime;
  };
  // crio-conmon-<id>.scope is the conmon monitor of a CRI-O container, not the container: it
  // does not match "crio-" + 64 hex digits because "conmon-" is not hex.
  static constexpr std::array<Prefix, 5> kPrefixes{{{"docker-", "docker"},
                                                    {"cri-containerd-", "containerd"},
                                                    {"crio-", "cri-o"},
                                                    {"libpod-", "podman"},
                                                    {"containerd-", "containerd"}}};
  std::string_view body = element;
  if (ends_with(body, ".scope")) body.remove_suffix(6);
  for (const auto& p : kPrefixes) {
    if (starts_with(body, p.prefix) && is_hex_id(body.substr(p.prefix.size()))) {
      return {p.runtime, body.substr(p.prefix.size())};
    }
  }
  return {};
}

// Whether some path element carries a container runtime's or the kubelet's mark.
bool mentions_container(std::string_view text) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t end = text.find_first_of("/\n", pos);
    const std::string_view e =
        text.substr(pos, end == std::string_view::npos ? std::string_view::npos : end - pos);
    pos = end == std::string_view::npos ? text.size() : end + 1;
    if (starts_with(e, "crio-conmon-")) continue;  // CRI-O's monitor, a host process
    if (e == "docker" || e == "libpod_parent" || starts_with(e, "kubepods") ||
        starts_with(e, "docker-") || starts_with(e, "cri-containerd-") || starts_with(e, "crio-") ||
        starts_with(e, "libpod-")) {
      return true;
    }
  }
  return false;
}

}  // namespace

std::optional<ContainerInfo> container_from_cgroup_path(std::string_view path) {
  ContainerInfo info;
  bool kube = false;
  std::string_view previous;  // the element before the current one
  std::size_t pos = 0;
  while (pos <= path.size()) {
    const std::size_t slash = path.find('/', pos);
    const std::string_view element =
        path.substr(pos, slash == std::string_view::npos ? std::string_view::npos : slash - pos);
    pos = slash == std::string_view::npos ? path.size() + 1 : slash + 1;
    if (element.empty()) continue;

    // Kubernetes: "kubepods" (cgroupfs) or "kubepods.slice" and its children (systemd).
    if (element == "kubepods" || element == "kubepods.slice") {
      kube = true;
      info.qos = "guaranteed";  // until a QoS element says otherwise
    } else if (kube && (element == "burstable" || element == "besteffort")) {
      info.qos = std::string(element);
    } else if (kube &&
               (element == "kubepods-burstable.slice" || element == "kubepods-besteffort.slice")) {
      info.qos = std::string(element.substr(9, element.size() - 9 - 6));
    } else if (kube && info.pod_uid.empty()) {
      // "pod<uid>" (cgroupfs) or "kubepods[-<qos>]-pod<uid_>.slice" (systemd).
      std::string_view pod = element;
      if (ends_with(pod, ".slice")) {
        pod.remove_suffix(6);
        const std::size_t at = pod.rfind("-pod");
        if (at != std::string_view::npos) pod = pod.substr(at + 1);
      }
      info.pod_uid = pod_uid_from(pod);
      if (!info.pod_uid.empty()) continue;
    }

    const ScopeMatch scope = match_scope(element);
    if (!scope.runtime.empty()) {
      info.runtime = std::string(scope.runtime);
      info.id = std::string(scope.id);
    } else if (is_hex_id(element)) {
      // cgroupfs driver: the id alone, under the runtime's parent or the pod.
      if (previous == "docker") {
        info.runtime = "docker";
        info.id = std::string(element);
      } else if (previous == "libpod_parent") {
        info.runtime = "podman";
        info.id = std::string(element);
      } else if (kube && !info.pod_uid.empty()) {
        // cgroupfs kubelet: the runtime is not in the path; the pod is.
        info.runtime = "kubernetes";
        info.id = std::string(element);
      }
    }
    previous = element;
  }
  if (!info.id.empty()) return info;
  if (kube && !info.pod_uid.empty()) {
    info.runtime = "kubernetes";
    return info;
  }
  return std::nullopt;
}

ContainerResult parse_cgroup(std::string_view text) {
  ContainerResult result;
  if (text.size() > kMaxCgroupText) {
    result.absent = ContainerAbsent::malformed;
    return result;
  }
  bool any_line = false;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    if (line.empty()) continue;
    // "hierarchy-id:controllers:path"; the path may itself contain ':'.
    const std::size_t first = line.find(':');
    const std::size_t second = first == std::string_view::npos ? first : line.find(':', first + 1);
    if (second == std::string_view::npos) {
      result.absent = ContainerAbsent::malformed;
      return result;
    }
    any_line = true;
    const std::string_view path = line.substr(second + 1);
    if (auto c = container_from_cgroup_path(path)) {
      result.container = std::move(c);
      return result;
    }
  }
  if (!any_line) {
    result.absent = ContainerAbsent::malformed;
    return result;
  }
  // Host services live in system.slice/user.slice/init.scope (the runtimes' own daemons too:
  // docker.service, containerd.service). A path with a runtime's or the kubelet's mark that no
  // shape above matched is `unrecognized`, not `host`.
  result.absent = ContainerAbsent::host;
  if (mentions_container(text)) result.absent = ContainerAbsent::unrecognized;
  return result;
}

}  // namespace gpustream::probes
