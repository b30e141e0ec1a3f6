#include "support/temp_tree.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <system_error>
#include <vector>

namespace gpustream::test {
namespace fs = std::filesystem;

namespace {

[[noreturn]] void fail(const std::string& what, const fs::path& p, int err) {
  throw std::runtime_error("TempTree: " + what + " " + p.string() + ": " + std::strerror(err));
}

// Gives every folder of the tree rwx back to its owner, so that remove_all can walk it.
void make_removable(const fs::path& root) {
  std::error_code ec;
  fs::permissions(root, fs::perms::owner_all, fs::perm_options::add, ec);
  for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    std::error_code type_ec;
    if (it->is_directory(type_ec) && !it->is_symlink(type_ec))
      fs::permissions(it->path(), fs::perms::owner_all, fs::perm_options::add, type_ec);
  }
}

}  // namespace

TempTree::TempTree() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern =
      (tmp && *tmp ? std::string(tmp) : std::string("/tmp")) + "/gpustream-test-XXXXXX";
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  if (!::mkdtemp(buf.data())) fail("cannot create", pattern, errno);
  root_ = buf.data();
}

TempTree::~TempTree() {
  make_removable(root_);
  std::error_code ec;
  fs::remove_all(root_, ec);
}

fs::path TempTree::full(std::string_view rel) const {
  while (!rel.empty() && rel.front() == '/') rel.remove_prefix(1);
  return rel.empty() ? root_ : root_ / fs::path(rel);
}

std::string TempTree::path(std::string_view rel) const { return full(rel).string(); }

std::string TempTree::dir(std::string_view rel) {
  const auto p = full(rel);
  std::error_code ec;
  fs::create_directories(p, ec);
  if (ec) fail("cannot create folder", p, ec.value());
  return p.string();
}

std::string TempTree::file(std::string_view rel, std::string_view contents) {
  const auto p = full(rel);
  std::error_code ec;
  fs::create_directories(p.parent_path(), ec);
  if (ec) fail("cannot create folder", p.parent_path(), ec.value());
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  if (!out) fail("cannot create", p, errno);
  out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
  out.close();
  if (!out) fail("cannot write", p, errno);
  return p.string();
}

std::string TempTree::symlink(std::string_view rel, std::string_view target) {
  const auto p = full(rel);
  std::error_code ec;
  fs::create_directories(p.parent_path(), ec);
  if (ec) fail("cannot create folder", p.parent_path(), ec.value());
  fs::remove(p, ec);
  fs::create_symlink(fs::path(target), p, ec);
  if (ec) fail("cannot create link", p, ec.value());
  return p.string();
}

bool TempTree::unreadable_file(std::string_view rel, std::string_view contents) {
  const auto p = file(rel, contents);
  if (::chmod(p.c_str(), 0) != 0) fail("cannot chmod", p, errno);
  const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    ::close(fd);
    return false;
  }
  return true;
}

void TempTree::remove(std::string_view rel) {
  const auto p = full(rel);
  std::error_code ec;
  fs::remove_all(p, ec);
  if (ec) fail("cannot remove", p, ec.value());
}

}  // namespace gpustream::test
