#include "gpustream/dynamic_library.hpp"

#include <dlfcn.h>

#include <utility>

namespace gpustream {
namespace {

std::string last_dl_error() {
  const char* text = ::dlerror();
  return text != nullptr ? std::string(text) : std::string("unknown loader error");
}

}  // namespace

std::optional<DynamicLibrary> DynamicLibrary::open(const std::string& path, std::string* error) {
  if (path.empty()) {
    if (error != nullptr) *error = "cannot load a library: empty path";
    return std::nullopt;
  }
  ::dlerror();  // clear a stale message
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    if (error != nullptr) *error = "cannot load " + path + ": " + last_dl_error();
    return std::nullopt;
  }
  return DynamicLibrary(handle, path);
}

DynamicLibrary DynamicLibrary::load(const std::string& path) {
  std::string error;
  auto lib = open(path, &error);
  if (!lib) throw DynamicLibraryError(errc::library_missing, error);
  return std::move(*lib);
}

DynamicLibrary::DynamicLibrary(DynamicLibrary&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)), path_(std::move(other.path_)) {}

DynamicLibrary& DynamicLibrary::operator=(DynamicLibrary&& other) noexcept {
  if (this != &other) {
    if (handle_ != nullptr) ::dlclose(handle_);
    handle_ = std::exchange(other.handle_, nullptr);
    path_ = std::move(other.path_);
  }
  return *this;
}

DynamicLibrary::~DynamicLibrary() {
  if (handle_ != nullptr) ::dlclose(handle_);
}

void* DynamicLibrary::symbol(const char* name) const noexcept {
  if (handle_ == nullptr || name == nullptr) return nullptr;
  return ::dlsym(handle_, name);
}

std::string DynamicLibrary::missing_message(std::initializer_list<const char*> names) const {
  std::string message;
  if (names.size() == 1) {
    message = *names.begin();
  } else {
    message = "none of ";
    bool first = true;
    for (const char* name : names) {
      if (!first) message += ", ";
      message += name;
      first = false;
    }
  }
  message += (names.size() == 1 ? " missing from " : " found in ") + path_;
  return message;
}

}  // namespace gpustream
