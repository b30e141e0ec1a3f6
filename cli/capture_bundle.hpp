// The writer of a capture bundle: every byte written goes through it, so the per-file and total
// caps hold whatever the machine shows; what it refuses or cannot read becomes a finding.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include <boost/json/array.hpp>

namespace gpustream::cli {

/// The parts, joined into one string (one allocation; messages and paths built in loops).
template <class... Parts>
std::string concat(const Parts&... parts) {
  std::string out;
  out.reserve((std::string_view(parts).size() + ...));
  (out.append(std::string_view(parts)), ...);
  return out;
}

class CaptureBundle {
 public:
  CaptureBundle(std::filesystem::path dir, std::uint64_t max_file_bytes,
                std::uint64_t max_total_bytes);

  /// Writes DIR/rel (parents created). False when a cap refuses it (a finding says so) or it
  /// cannot be written.
  bool write(const std::string& rel, std::string_view content, unsigned mode = 0644);
  /// Copies the machine's file `src` to DIR/rel: read up to the per-file cap; a larger file is
  /// not copied. Missing: false, nothing recorded (a missing file is part of the view).
  /// Unreadable (EACCES): an empty file of mode 000 is written, so that an unprivileged replay
  /// meets the same refusal, and a finding says so.
  bool copy(const std::string& src, const std::string& rel);
  /// Makes DIR/rel a symbolic link with `target` (parents created); idempotent.
  bool link(const std::string& rel, const std::string& target);

  /// Mirrors `rel`, a path under the machine's `root`, into DIR/`prefix`: each folder is made,
  /// each symbolic link on the way is recreated as a relative link inside DIR and followed,
  /// and a regular file at the end is copied. `follow_leaf` false: a link at the end is only
  /// recreated (a link the probes read with readlink). A link that leads out of `root` is not
  /// followed (a finding). Missing paths are skipped silently.
  void mirror(const std::string& root, const std::string& prefix, const std::string& rel,
              bool follow_leaf = true);

  /// "what failed and why", for the manifest.
  void finding(const std::string& area, const std::string& what);

  const std::filesystem::path& dir() const noexcept { return dir_; }
  std::uint64_t bytes() const noexcept { return bytes_; }
  std::uint64_t files() const noexcept { return files_; }
  std::uint64_t links() const noexcept { return links_; }
  std::uint64_t refused() const noexcept { return refused_; }
  const boost::json::array& findings() const noexcept { return findings_; }

 private:
  std::optional<std::string> resolve(const std::string& root, const std::string& prefix,
                                     const std::string& rel, bool follow_leaf, int depth);

  std::filesystem::path dir_;
  std::uint64_t max_file_ = 0;
  std::uint64_t max_total_ = 0;
  std::uint64_t bytes_ = 0, files_ = 0, links_ = 0, refused_ = 0;
  bool total_reported_ = false;
  std::set<std::string> done_;  // DIR-relative paths already written
  boost::json::array findings_;
};

}  // namespace gpustream::cli
