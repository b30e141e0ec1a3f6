#include "capture_bundle.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <system_error>
#include <vector>

#include <boost/json/object.hpp>

namespace gpustream::cli {
namespace {

namespace fs = std::filesystem;

constexpr int kMaxLinkDepth = 40;  // as the kernel's MAXSYMLINKS

std::vector<std::string> split(const std::string& rel) {
  std::vector<std::string> out;
  std::size_t b = 0;
  while (b <= rel.size()) {
    auto e = rel.find('/', b);
    if (e == std::string::npos) e = rel.size();
    if (e > b) out.push_back(rel.substr(b, e - b));
    b = e + 1;
  }
  return out;
}

std::string join(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  return a + "/" + b;
}

std::string parent(const std::string& rel) {
  const auto slash = rel.rfind('/');
  return slash == std::string::npos ? std::string() : rel.substr(0, slash);
}

/// `path` relative to `root` with "." and ".." folded; nullopt when it leaves root.
std::optional<std::string> fold(const std::string& path) {
  std::vector<std::string> parts;
  for (auto& c : split(path)) {
    if (c == ".") continue;
    if (c == "..") {
      if (parts.empty()) return std::nullopt;
      parts.pop_back();
      continue;
    }
    parts.push_back(std::move(c));
  }
  std::string out;
  for (const auto& p : parts) out = join(out, p);
  return out;
}

}  // namespace

CaptureBundle::CaptureBundle(fs::path dir, std::uint64_t max_file_bytes,
                             std::uint64_t max_total_bytes)
    : dir_(std::move(dir)), max_file_(max_file_bytes), max_total_(max_total_bytes) {}

void CaptureBundle::finding(const std::string& area, const std::string& what) {
  findings_.push_back(boost::json::object{{"area", area}, {"what", what}});
}

bool CaptureBundle::write(const std::string& rel, std::string_view content, unsigned mode) {
  if (content.size() > max_file_) {
    ++refused_;
    finding("limits", rel + ": " + std::to_string(content.size()) +
                          " bytes, more than the per-file cap of " + std::to_string(max_file_) +
                          " bytes: not captured");
    return false;
  }
  if (bytes_ + content.size() > max_total_) {
    ++refused_;
    if (!total_reported_)
      finding("limits", "the bundle reached its cap of " + std::to_string(max_total_) +
                            " bytes at " + rel + ": it and what follows are not captured");
    total_reported_ = true;
    return false;
  }
  const auto path = dir_ / rel;
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    if (!out) {
      finding("write", "cannot write " + path.string());
      return false;
    }
  }
  ::chmod(path.c_str(), mode);
  if (done_.insert(rel).second) ++files_;
  bytes_ += content.size();
  return true;
}

bool CaptureBundle::copy(const std::string& src, const std::string& rel) {
  if (done_.count(rel)) return true;
  const int fd = ::open(src.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int e = errno;
    if (e == EACCES || e == EPERM) {
      finding("permission", src + ": " + std::generic_category().message(e) +
                                " (captured as an unreadable empty file; run the capture as root "
                                "to copy it)");
      write(rel, {}, 0);
    }
    return false;
  }
  // Up to one byte more than the cap, to know a file is larger (sysfs files report 4096 as
  // their size whatever they hold, so the size cannot be taken from stat).
  std::string content;
  char buf[8192];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      const int e = errno;
      ::close(fd);
      if (e == EACCES || e == EPERM) {
        finding("permission", src + ": " + std::generic_category().message(e) +
                                  " (captured as an unreadable empty file)");
        return write(rel, {}, 0);
      }
      // EIO/ENODEV/EOPNOTSUPP: the attribute exists and cannot be read; the probes see that as
      // unsupported, as they do a missing file.
      finding("read", src + ": " + std::generic_category().message(e) + " (not captured)");
      return false;
    }
    if (n == 0) break;
    content.append(buf, static_cast<std::size_t>(n));
    if (content.size() > max_file_) {
      ::close(fd);
      ++refused_;
      finding("limits", src + ": more than the per-file cap of " + std::to_string(max_file_) +
                            " bytes: not captured");
      return false;
    }
  }
  ::close(fd);
  return write(rel, content);
}

bool CaptureBundle::link(const std::string& rel, const std::string& target) {
  if (done_.count(rel)) return true;
  const auto path = dir_ / rel;
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  if (::symlink(target.c_str(), path.c_str()) != 0 && errno != EEXIST) {
    finding("write", "cannot make the link " + path.string() + ": " +
                         std::generic_category().message(errno));
    return false;
  }
  done_.insert(rel);
  ++links_;
  return true;
}

void CaptureBundle::mirror(const std::string& root, const std::string& prefix,
                           const std::string& rel, bool follow_leaf) {
  resolve(root, prefix, rel, follow_leaf, 0);
}

std::optional<std::string> CaptureBundle::resolve(const std::string& root,
                                                  const std::string& prefix, const std::string& rel,
                                                  bool follow_leaf, int depth) {
  if (depth > kMaxLinkDepth) return std::nullopt;
  const auto parts = split(rel);
  std::string cur;  // resolved so far: a path under root without links
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const auto& c = parts[i];
    const bool last = i + 1 == parts.size();
    if (c == ".") continue;
    if (c == "..") {
      if (cur.empty()) return std::nullopt;
      cur = parent(cur);
      continue;
    }
    const auto p = join(cur, c);
    const auto src = concat(root, "/", p);
    struct stat st {};
    if (::lstat(src.c_str(), &st) != 0) return std::nullopt;
    if (S_ISLNK(st.st_mode)) {
      std::vector<char> buf(4096);
      const ssize_t n = ::readlink(src.c_str(), buf.data(), buf.size() - 1);
      if (n <= 0) return std::nullopt;
      const std::string target(buf.data(), static_cast<std::size_t>(n));
      std::optional<std::string> to;  // the target, relative to root
      if (target.front() == '/') {
        if (target.compare(0, root.size() + 1, root + "/") == 0)
          to = fold(target.substr(root.size() + 1));
      } else {
        to = fold(join(parent(p), target));
      }
      if (!to) {
        finding("links", concat(src, " -> ", target, " leads out of ", root, ": not followed"));
        return std::nullopt;
      }
      // The same link inside DIR, relative, so the bundle can be moved.
      std::string text;
      if (target.front() == '/') {
        for (std::size_t k = 0; k < split(parent(p)).size(); ++k) text += "../";
        text += to->empty() ? std::string(".") : *to;
      } else {
        text = target;
      }
      link(join(prefix, p), text);
      if (last && !follow_leaf) return p;
      auto resolved = resolve(root, prefix, *to, true, depth + 1);
      if (!resolved) return std::nullopt;
      cur = *resolved;
      continue;
    }
    if (S_ISDIR(st.st_mode)) {
      std::error_code ec;
      std::filesystem::create_directories(dir_ / join(prefix, p), ec);
      cur = p;
      continue;
    }
    if (!last || !S_ISREG(st.st_mode)) return std::nullopt;
    copy(src, join(prefix, p));
    cur = p;
  }
  return cur;
}

}  // namespace gpustream::cli
