#include "gpustream/probes/readers.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <filesystem>
#include <limits>

namespace gpustream::readers {
namespace {

ReadError errno_error(const std::string& path, int err) {
  return ReadError{path, std::error_code(err, std::generic_category()), {}};
}

ReadError parse_error(const std::string& path, std::string detail) {
  return ReadError{path, std::make_error_code(std::errc::invalid_argument), std::move(detail)};
}

bool is_blank(char c) noexcept { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

// Closes a file descriptor on scope exit.
class Fd {
 public:
  explicit Fd(int fd) noexcept : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const noexcept { return fd_; }

 private:
  int fd_;
};

std::string quoted_excerpt(std::string_view s) {
  constexpr std::size_t kMax = 40;
  std::string out = "'";
  out += s.substr(0, kMax);
  if (s.size() > kMax) out += "...";
  out += "'";
  return out;
}

}  // namespace

std::string ReadError::message() const {
  if (!detail.empty()) return "cannot parse " + path + ": " + detail;
  return "cannot read " + path + ": " + code.message();
}

bool ReadError::not_found() const noexcept {
  return code == std::errc::no_such_file_or_directory || code == std::errc::no_such_process;
}

std::string join_path(std::string_view root, std::string_view rel) {
  std::string out(root);
  while (!rel.empty() && rel.front() == '/') rel.remove_prefix(1);
  if (out.empty()) return "/" + std::string(rel);
  if (rel.empty()) return out;
  if (out.back() != '/') out += '/';
  out += rel;
  return out;
}

Result<std::string> read_file(const std::string& path, std::size_t max_bytes) {
  int fd = -1;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return errno_error(path, errno);
  Fd guard(fd);

  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno_error(path, errno);
    }
    if (n == 0) break;
    if (out.size() + static_cast<std::size_t>(n) > max_bytes) return errno_error(path, EFBIG);
    out.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}

Result<std::int64_t> read_int_file(const std::string& path) {
  auto text = read_file(path);
  if (!text) return text.error();
  if (auto v = parse_int(*text)) return *v;
  return parse_error(path, "not an integer: " + quoted_excerpt(trim(*text)));
}

Result<std::uint64_t> read_uint_file(const std::string& path, int base) {
  auto text = read_file(path);
  if (!text) return text.error();
  if (auto v = parse_uint(*text, base)) return *v;
  return parse_error(path, "not an unsigned integer: " + quoted_excerpt(trim(*text)));
}

Result<std::string> read_link(const std::string& path) {
  std::error_code ec;
  auto target = std::filesystem::read_symlink(path, ec);
  if (ec) return ReadError{path, std::error_code(ec.value(), std::generic_category()), {}};
  return target.string();
}

Result<std::vector<std::int64_t>> list_numeric_dirs(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) return ReadError{dir, std::error_code(ec.value(), std::generic_category()), {}};
  std::vector<std::int64_t> out;
  for (const fs::directory_iterator end; it != end; it.increment(ec)) {
    if (ec) break;  // the directory changed under us: keep what we have
    const auto name = it->path().filename().string();
    if (name.empty() ||
        !std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    std::error_code type_ec;
    if (!it->is_directory(type_ec) || type_ec) continue;  // vanished, or a plain file
    if (auto v = parse_int(name)) out.push_back(*v);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string_view trim(std::string_view s) noexcept {
  while (!s.empty() && is_blank(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_blank(s.back())) s.remove_suffix(1);
  return s;
}

std::optional<std::uint64_t> parse_uint(std::string_view s, int base) noexcept {
  s = trim(s);
  if (base == 16 && s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) s.remove_prefix(2);
  if (s.empty() || s.front() == '-' || s.front() == '+') return std::nullopt;
  std::uint64_t v = 0;
  const auto [end, err] = std::from_chars(s.data(), s.data() + s.size(), v, base);
  if (err != std::errc{} || end != s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<std::int64_t> parse_int(std::string_view s) noexcept {
  s = trim(s);
  if (s.empty()) return std::nullopt;
  std::int64_t v = 0;
  const auto [end, err] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (err != std::errc{} || end != s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<std::uint64_t> parse_byte_size(std::string_view s) noexcept {
  s = trim(s);
  const auto space = s.find_first_of(" \t");
  const auto number = parse_uint(s.substr(0, space));
  if (!number) return std::nullopt;
  const auto unit = space == std::string_view::npos ? std::string_view{} : trim(s.substr(space));
  std::uint64_t scale = 0;
  if (unit.empty() || unit == "B") {
    scale = 1;
  } else if (unit == "kB" || unit == "KiB") {
    scale = std::uint64_t{1} << 10;
  } else if (unit == "MiB") {
    scale = std::uint64_t{1} << 20;
  } else if (unit == "GiB") {
    scale = std::uint64_t{1} << 30;
  } else {
    return std::nullopt;
  }
  if (*number > std::numeric_limits<std::uint64_t>::max() / scale) return std::nullopt;
  return *number * scale;
}

std::optional<KeyValue> split_key_value(std::string_view line, char sep) noexcept {
  const auto pos = line.find(sep);
  if (pos == std::string_view::npos) return std::nullopt;
  KeyValue kv{trim(line.substr(0, pos)), trim(line.substr(pos + 1))};
  if (kv.key.empty()) return std::nullopt;
  return kv;
}

std::optional<std::string_view> find_value(std::string_view text, std::string_view key,
                                           char sep) noexcept {
  std::optional<std::string_view> found;
  for_each_key_value(
      text,
      [&](const KeyValue& kv) {
        if (!found && kv.key == key) found = kv.value;
      },
      sep);
  return found;
}

}  // namespace gpustream::readers
