// temp_tree.hpp — a throwaway directory tree for tests that read sysfs/procfs/devfs-like files.
//
//   gpustream::test::TempTree tree;
//   tree.file("proc/meminfo", "MemTotal: 1024 kB\n");
//   tree.symlink("proc/self", "4242");
//   tree.unreadable_file("proc/4242/status");
//   SystemPaths paths{.sysfs_root = tree.path("sys"), .procfs_root = tree.path("proc")};
//
// The tree lives in a fresh folder under $TMPDIR (or /tmp) and is removed, whatever is in it, when
// the TempTree is destroyed. Paths given to its functions are relative to the root; missing
// parent folders are created. Failures throw std::runtime_error naming the path.
//
// Unreadable files: mode 000 does not stop root (CAP_DAC_OVERRIDE); unreadable_file() returns
// whether the file really cannot be opened by this process. A test that needs it skips with
// kRunsUnprivileged when it can, and is listed in tests/CMakeLists.txt's unprivileged run, which
// runs it again as user nobody and fails on a skip.
//
// Thread safety: none (one test owns one tree).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace gpustream::test {

inline constexpr const char* kRunsUnprivileged =
    "running as root (CAP_DAC_OVERRIDE reads mode-000 files); ctest runs this test again as user "
    "nobody: probes.permission_denied_as_unprivileged_user";

class TempTree {
 public:
  TempTree();
  ~TempTree();
  TempTree(const TempTree&) = delete;
  TempTree& operator=(const TempTree&) = delete;

  const std::filesystem::path& root() const noexcept { return root_; }
  /// root/rel as a string (rel may be empty: the root itself).
  std::string path(std::string_view rel = {}) const;

  /// Creates (or overwrites) a file with `contents`. Returns its full path.
  std::string file(std::string_view rel, std::string_view contents);
  /// Creates a folder (and its parents). Returns its full path.
  std::string dir(std::string_view rel);
  /// Creates a symbolic link at `rel` pointing to `target`, written as given (so a relative
  /// target stays relative to the link's folder, like /proc/self -> "4242").
  std::string symlink(std::string_view rel, std::string_view target);
  /// Creates a file with mode 000. Returns true when this process indeed cannot open it
  /// (false when running as root or with CAP_DAC_OVERRIDE).
  bool unreadable_file(std::string_view rel, std::string_view contents = "x\n");
  /// Removes a file, link or folder (recursively). Missing is fine.
  void remove(std::string_view rel);

 private:
  std::filesystem::path full(std::string_view rel) const;
  std::filesystem::path root_;
};

}  // namespace gpustream::test
