#include "nvidia/proc_status.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>

#include "gpustream/probes/readers.hpp"

namespace gpustream::nvidia_detail {
namespace {

constexpr std::string_view kName = "Name:";
constexpr std::string_view kRss = "VmRSS:";

}  // namespace

ProcInfo parse_proc_status(std::string_view text, bool whole) {
  if (!whole) {  // only complete lines: a read may have stopped in the middle of one
    const auto last = text.rfind('\n');
    text = last == std::string_view::npos ? std::string_view{} : text.substr(0, last + 1);
  }
  ProcInfo out;
  bool have_name = false, have_rss = false;
  while (!text.empty() && !(have_name && have_rss)) {
    const auto nl = text.find('\n');
    const auto line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    if (!have_name && line.starts_with(kName)) {
      out.name = std::string(readers::trim(line.substr(kName.size())));
      have_name = true;
    } else if (!have_rss && line.starts_with(kRss)) {
      out.rss_bytes = readers::parse_byte_size(readers::trim(line.substr(kRss.size())));
      have_rss = true;
    }
  }
  return out;
}

ProcStatusReader::ProcStatusReader(const std::string& procfs_root)
    : dir_(::open(procfs_root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC)) {}

ProcStatusReader::~ProcStatusReader() {
  if (dir_ >= 0) ::close(dir_);
}

ProcInfo ProcStatusReader::read(std::int64_t pid) const {
  if (dir_ < 0 || pid <= 0) return {};
  char path[40];
  auto [end, ec] = std::to_chars(path, path + 24, pid);
  if (ec != std::errc{}) return {};
  std::memcpy(end, "/status", 8);
  int fd = -1;
  do {
    fd = ::openat(dir_, path, O_RDONLY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return {};
  // Name is the first line and VmRSS comes within the first ~1.5 KiB; read more only if needed.
  std::string text;
  char buf[4096];
  ProcInfo info;
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<std::size_t>(n));
    info = parse_proc_status(text, /*whole=*/false);
    if ((!info.name.empty() && info.rss_bytes) || text.size() > (1u << 20)) break;
  }
  ::close(fd);
  if (info.name.empty() || !info.rss_bytes) info = parse_proc_status(text);  // up to EOF
  return info;
}

}  // namespace gpustream::nvidia_detail
