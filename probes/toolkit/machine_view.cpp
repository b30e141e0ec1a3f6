#include "gpustream/probes/machine_view.hpp"

#include <dlfcn.h>
#include <grp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <utility>

#include "gpustream/probes/readers.hpp"
#include "gpustream/probes/sysfs.hpp"
#include "gpustream/subprocess.hpp"

namespace gpustream::machine {
namespace {

namespace fs = std::filesystem;
using readers::join_path;

std::optional<std::uint32_t> first_number(std::string_view fields, std::size_t index) {
  // "Uid:\t1000\t1000\t1000\t1000": real, effective, saved, filesystem.
  std::size_t i = 0;
  while (!fields.empty()) {
    const auto b = fields.find_first_not_of(" \t");
    if (b == std::string_view::npos) break;
    fields.remove_prefix(b);
    const auto e = fields.find_first_of(" \t");
    const auto word = fields.substr(0, e);
    if (i++ == index) {
      const auto n = readers::parse_uint(word);
      if (!n || *n > UINT32_MAX) return std::nullopt;
      return static_cast<std::uint32_t>(*n);
    }
    fields = e == std::string_view::npos ? std::string_view{} : fields.substr(e);
  }
  return std::nullopt;
}

std::string mode_string(mode_t m) {
  std::string s = S_ISCHR(m) ? "c" : S_ISBLK(m) ? "b" : S_ISDIR(m) ? "d" : "-";
  const std::array<std::pair<mode_t, char>, 9> bits{{{S_IRUSR, 'r'},
                                                     {S_IWUSR, 'w'},
                                                     {S_IXUSR, 'x'},
                                                     {S_IRGRP, 'r'},
                                                     {S_IWGRP, 'w'},
                                                     {S_IXGRP, 'x'},
                                                     {S_IROTH, 'r'},
                                                     {S_IWOTH, 'w'},
                                                     {S_IXOTH, 'x'}}};
  for (const auto& [bit, c] : bits) s += (m & bit) ? c : '-';
  return s;
}

std::string group_name(gid_t gid) {
  std::array<char, 4096> buf{};
  struct group g {};
  struct group* found = nullptr;
  if (::getgrgid_r(gid, &g, buf.data(), buf.size(), &found) == 0 && found && found->gr_name)
    return found->gr_name;
  return std::to_string(gid);
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

bool has_digit(std::string_view s) { return std::any_of(s.begin(), s.end(), is_digit); }

/// A "<digits>.<digits>" token, as every version has ("0.8.1", "535.183.01", "24.6.2+2b02a07").
bool has_version_token(std::string_view s) {
  for (std::size_t i = 0; i + 2 < s.size(); ++i)
    if (is_digit(s[i]) && s[i + 1] == '.' && is_digit(s[i + 2])) return true;
  return false;
}

bool printable_text(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u == '\n' || u == '\r' || u == '\t' || (u >= 0x20 && u < 0x7f) || u >= 0x80;
  });
}

bool valid_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t n = c < 0x80           ? 1
                    : (c >> 5) == 0x6  ? 2
                    : (c >> 4) == 0xe  ? 3
                    : (c >> 3) == 0x1e ? 4
                                       : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (std::size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) >> 6) != 0x2) return false;
    i += n;
  }
  return true;
}

}  // namespace

bool Identity::in_group(std::uint32_t g) const noexcept {
  return known && (gid == g || std::find(groups.begin(), groups.end(), g) != groups.end());
}

Identity read_identity(const std::string& procfs_root) {
  Identity id;
  const auto text = readers::read_file(join_path(procfs_root, "self/status"), kMaxViewFileBytes);
  if (!text) return id;
  bool have_uid = false;
  bool have_gid = false;
  readers::for_each_key_value(*text, [&](const readers::KeyValue& kv) {
    if (kv.key == "Pid") {
      if (auto n = readers::parse_int(kv.value)) id.pid = *n;
    } else if (kv.key == "Uid") {
      if (auto n = first_number(kv.value, 1)) id.uid = *n, have_uid = true;
    } else if (kv.key == "Gid") {
      if (auto n = first_number(kv.value, 1)) id.gid = *n, have_gid = true;
    } else if (kv.key == "Groups") {
      for (std::size_t i = 0; i < 65536; ++i) {
        const auto g = first_number(kv.value, i);
        if (!g) break;
        id.groups.push_back(*g);
      }
    } else if (kv.key == "CapEff") {
      id.cap_eff = readers::parse_uint(kv.value, 16);
    }
  });
  id.known = have_uid && have_gid;
  id.is_self = id.known && id.pid == static_cast<std::int64_t>(::getpid());
  return id;
}

std::vector<DrmNode> drm_nodes(const std::string& sysfs_root) {
  const std::string drm = join_path(sysfs_root, "class/drm");
  std::vector<DrmNode> out;
  for (const auto* prefix : {"card", "renderD"}) {
    for (const auto& e : sysfs::numbered_entries(drm, prefix)) {
      DrmNode n;
      n.name = e.name;
      n.render = std::string_view(prefix) == "renderD";
      n.device_dir = join_path(drm, e.name + "/device");
      n.driver = sysfs::driver_of(n.device_dir);
      n.pci_bus_id = sysfs::pci_bus_id_of(n.device_dir);
      if (auto s = readers::read_file(join_path(n.device_dir, "power/runtime_status"), 256))
        n.runtime_status = std::string(readers::trim(*s));
      out.push_back(std::move(n));
    }
  }
  return out;
}

bool module_loaded(const std::string& sysfs_root, std::string_view name) {
  std::error_code ec;
  return fs::is_directory(join_path(sysfs_root, "module/" + std::string(name)), ec);
}

NodeAccess node_access(const std::string& path, const Identity& who) {
  NodeAccess a;
  a.path = path;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    a.why = "not present";
    return a;
  }
  a.exists = true;
  a.group = group_name(st.st_gid);
  a.mode = mode_string(st.st_mode);
  const auto rw = [&](mode_t shift) { return ((st.st_mode >> shift) & 06) == 06; };
  if (who.root()) {
    a.allowed = true;
  } else if (who.known) {
    a.allowed = (who.uid == st.st_uid && rw(6)) || (who.in_group(st.st_gid) && rw(3)) || rw(0);
  }
  if (!a.allowed && who.is_self && ::access(path.c_str(), R_OK | W_OK) == 0) a.allowed = true;
  if (!a.allowed) {
    a.why = "mode " + a.mode + " group " + a.group + "; " +
            (who.known ? "uid " + std::to_string(who.uid) + " is not in group " + a.group
                       : std::string("who this process is is unknown"));
  }
  return a;
}

ProcView proc_view(const std::string& root_dir, const std::string& procfs_root,
                   const std::function<std::optional<std::string>(std::string_view)>& getenv) {
  ProcView v;
  std::error_code ec;
  for (const auto* marker : {".dockerenv", "run/.containerenv"})
    if (fs::exists(join_path(root_dir, marker), ec))
      v.container_evidence.push_back("/" + std::string(marker) + " exists");
  if (getenv) {
    if (auto c = getenv("container"); c && !c->empty())
      v.container_evidence.push_back("container=" + printable(*c, 40));
    if (auto k = getenv("KUBERNETES_SERVICE_HOST"); k && !k->empty())
      v.container_evidence.emplace_back("KUBERNETES_SERVICE_HOST is set");
  }
  if (auto cg = readers::read_file(join_path(procfs_root, "1/cgroup"), kMaxViewFileBytes)) {
    for (const auto* word : {"docker", "kubepods", "containerd", "libpod", "crio", "lxc"}) {
      if (cg->find(word) == std::string::npos) continue;
      v.container_evidence.push_back(std::string("pid 1's cgroup names ") + word);
      break;
    }
  }
  if (auto ns = readers::read_link(join_path(procfs_root, "1/ns/pid"))) {
    v.pid1_namespace = printable(*ns, 64);
    v.host_pid_namespace = *ns == kInitialPidNamespace;
  }
  return v;
}

std::string printable(std::string_view s, std::size_t max) {
  std::string out;
  for (char c : s.substr(0, max)) {
    const auto u = static_cast<unsigned char>(c);
    out += (u >= 0x20 && u < 0x7f) ? c : '?';
  }
  if (s.size() > max) out += "...";
  return out;
}

ToolVersion tool_version(std::vector<std::string> argv, std::chrono::milliseconds timeout,
                         std::string_view key, std::size_t max_output_bytes) {
  ToolVersion v;
  for (const auto& a : argv) v.command += (v.command.empty() ? "" : " ") + a;
  RunOptions o;
  o.argv = std::move(argv);
  o.timeout = timeout;
  o.max_output_bytes = max_output_bytes;
  o.stderr_tail_bytes = 512;
  boost::system::error_code ec;
  RunResult r;
  try {
    r = run(std::move(o), ec);
  } catch (const std::exception& e) {
    v.state = ToolVersion::State::failed;
    v.detail = std::string("cannot run it: ") + e.what();
    return v;
  }
  if (ec == boost::system::errc::no_such_file_or_directory ||
      ec == boost::system::errc::permission_denied) {
    v.state = ToolVersion::State::missing;
    v.detail =
        ec == boost::system::errc::no_such_file_or_directory ? "not found" : "not executable";
    return v;
  }
  if (r.timed_out || ec == boost::system::errc::timed_out) {
    v.state = ToolVersion::State::timed_out;
    v.detail = "`" + v.command + "` did not finish within " + std::to_string(timeout.count()) +
               " ms and was killed";
    return v;
  }
  if (ec) {
    v.state = ToolVersion::State::failed;
    v.detail = "cannot run it: " + ec.message();
    return v;
  }
  if (!r.success()) {
    v.state = ToolVersion::State::failed;
    v.detail = "`" + v.command + "` " + r.describe();
    return v;
  }
  const std::string_view out = r.output;
  if (printable_text(out) && valid_utf8(out)) {
    std::string_view rest = out;
    std::string_view any;
    while (!rest.empty()) {
      const auto nl = rest.find('\n');
      const auto line = readers::trim(rest.substr(0, nl));
      rest = nl == std::string_view::npos ? std::string_view{} : rest.substr(nl + 1);
      if (line.empty() || !has_version_token(line)) continue;
      if (key.empty() || line.find(key) != std::string_view::npos) {
        v.state = ToolVersion::State::ok;
        v.version = printable(line, 200);
        return v;
      }
      if (any.empty()) any = line;
    }
    if (!any.empty() && key.empty()) {
      v.state = ToolVersion::State::ok;
      v.version = printable(any, 200);
      return v;
    }
  }
  v.state = ToolVersion::State::garbage;
  const auto head = printable(readers::trim(out), 80);
  v.detail = "`" + v.command + "` printed no version: " + (head.empty() ? "(nothing)" : head);
  return v;
}

std::string library_file_version(const void* symbol, std::string* file) {
  Dl_info info{};
  if (!symbol || ::dladdr(symbol, &info) == 0 || !info.dli_fname) return {};
  std::string path = info.dli_fname;
  std::array<char, PATH_MAX> real{};
  if (::realpath(path.c_str(), real.data())) path = real.data();
  if (file) *file = path;
  const std::string name = fs::path(path).filename().string();
  const auto so = name.find(".so.");
  if (so == std::string::npos) return {};
  const std::string version = name.substr(so + 4);
  return has_digit(version) ? version : std::string{};
}

}  // namespace gpustream::machine
