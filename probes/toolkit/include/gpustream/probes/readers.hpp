// gpustream/probes/readers.hpp — small, reusable readers for procfs and sysfs files.
//
// Files under /proc and /sys are small, report a size of 0, and can vanish between a directory
// listing and the read (a process exits, a device is unplugged). These helpers read them whole,
// parse the common "Key:   123 kB" line format and list numeric directories (pids), and report
// failures as a ReadError that keeps errno, so a probe can say "cannot read <path>: <why>".
//
// Thread safety: every function is reentrant; nothing here keeps state.
// Cancellation: none; each call is one short blocking read and belongs on the work pool.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <variant>
#include <vector>

namespace gpustream::readers {

/// Why a file could not be read or parsed.
struct ReadError {
  std::string path;
  std::error_code code;  // errno, in std::generic_category()
  std::string detail;    // for a parse failure: what was wrong (code is then invalid_argument)

  /// "cannot read <path>: <strerror>" or "cannot parse <path>: <detail>".
  std::string message() const;
  /// The file is not there (ENOENT), or its process is gone (ESRCH).
  bool not_found() const noexcept;
};

/// A value, or the ReadError that prevented it.
template <class T>
class Result {
 public:
  Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}          // NOLINT: implicit
  Result(ReadError error) : v_(std::in_place_index<1>, std::move(error)) {}  // NOLINT: implicit

  bool ok() const noexcept { return v_.index() == 0; }
  explicit operator bool() const noexcept { return ok(); }
  /// Precondition: ok().
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  const T& operator*() const& { return value(); }
  const T* operator->() const { return &value(); }
  /// Precondition: !ok().
  const ReadError& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, ReadError> v_;
};

/// Largest file read_file accepts by default (procfs/sysfs files are a few KiB at most).
inline constexpr std::size_t kMaxSmallFileBytes = std::size_t{1} << 20;

/// `root` + "/" + `rel`, without doubling the slash.
std::string join_path(std::string_view root, std::string_view rel);

/// Reads a whole small file. Fails with EFBIG when it is larger than `max_bytes`.
Result<std::string> read_file(const std::string& path, std::size_t max_bytes = kMaxSmallFileBytes);

/// Reads a file holding one integer ("42\n"), as sysfs attributes do.
Result<std::int64_t> read_int_file(const std::string& path);
/// Same, unsigned; base 16 accepts an optional "0x" prefix ("0x73bf\n").
Result<std::uint64_t> read_uint_file(const std::string& path, int base = 10);

/// The target of a symbolic link (e.g. /proc/self -> "1234").
Result<std::string> read_link(const std::string& path);

/// Names of the sub-directories of `dir` that are all digits (the pids under /proc, the card
/// numbers...), as numbers, ascending. Entries that vanish while listing are skipped.
Result<std::vector<std::int64_t>> list_numeric_dirs(const std::string& dir);

/// `s` without leading and trailing blanks (space, tab, CR, LF).
std::string_view trim(std::string_view s) noexcept;

/// A whole, trimmed string as a number; nullopt for anything else ("", "12x", "-", overflow).
std::optional<std::uint64_t> parse_uint(std::string_view s, int base = 10) noexcept;
std::optional<std::int64_t> parse_int(std::string_view s) noexcept;

/// "123 kB" -> 125952. Units: none or "B" (bytes), "kB" (1024, as procfs means it), "KiB",
/// "MiB", "GiB" (DRM fdinfo). nullopt for garbage, an unknown unit or an overflow.
std::optional<std::uint64_t> parse_byte_size(std::string_view s) noexcept;

/// One "Key: value" line, both sides trimmed; views into the caller's text.
struct KeyValue {
  std::string_view key;
  std::string_view value;
};

/// Splits a line at the first `sep`; nullopt when there is none or the key is empty.
std::optional<KeyValue> split_key_value(std::string_view line, char sep = ':') noexcept;

/// Calls `f(KeyValue)` for every "Key<sep> value" line of `text`; other lines are skipped.
template <class F>
void for_each_key_value(std::string_view text, F&& f, char sep = ':') {
  while (!text.empty()) {
    const auto nl = text.find('\n');
    const auto line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    if (auto kv = split_key_value(line, sep)) f(*kv);
  }
}

/// The value of the first line whose key is `key`, trimmed; nullopt when there is none.
std::optional<std::string_view> find_value(std::string_view text, std::string_view key,
                                           char sep = ':') noexcept;

}  // namespace gpustream::readers
