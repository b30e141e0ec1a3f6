// gpustream/dynamic_library.hpp — a shared library loaded at run time (dlopen/dlsym).
//
// Vendor libraries (libnvidia-ml.so.1, libze_loader.so.1) are optional at run time, so they are
// never linked: a probe opens the file, looks up the functions it uses, and splits them into
// required ones (missing: the probe is unusable, and the error names the file and the symbol)
// and optional ones (missing: a field stays absent). Functions that exist in several versions
// are looked up newest first with first_of().
//
// The library is opened with RTLD_NOW | RTLD_LOCAL (every reference resolved at load time, no
// symbols leaking into later loads) and closed when the object is destroyed. Move-only.
//
// Thread safety: a DynamicLibrary may be read (symbol lookups) from several threads at once;
// moving or destroying it needs exclusive access. Function pointers obtained from it are valid
// only while it is alive. Nothing here blocks beyond the loader itself; nothing to cancel.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include <boost/system/system_error.hpp>

#include "gpustream/errors.hpp"

namespace gpustream {

/// Thrown by DynamicLibrary::load() (code errc::library_missing) and by the required lookups
/// (code errc::symbol_missing). what() names the file, and the symbol or the loader's message.
class DynamicLibraryError : public boost::system::system_error {
 public:
  DynamicLibraryError(errc code, const std::string& message)
      : boost::system::system_error(make_error_code(code), message), message_(message) {}
  /// The message without the error category's suffix.
  const std::string& message() const noexcept { return message_; }

 private:
  std::string message_;
};

class DynamicLibrary {
 public:
  /// A function found by first_of(): its address (null when none of the names was found) and
  /// which name matched.
  template <class F>
  struct Found {
    F* function = nullptr;
    std::string_view name;
    explicit operator bool() const noexcept { return function != nullptr; }
  };

  /// Opens `path` (a file path, or a bare soname searched the loader's way). On failure returns
  /// std::nullopt and, when `error` is given, stores "cannot load <path>: <dlerror text>".
  static std::optional<DynamicLibrary> open(const std::string& path, std::string* error = nullptr);
  /// Same, throwing DynamicLibraryError (errc::library_missing) on failure.
  static DynamicLibrary load(const std::string& path);

  DynamicLibrary(DynamicLibrary&& other) noexcept;
  DynamicLibrary& operator=(DynamicLibrary&& other) noexcept;
  DynamicLibrary(const DynamicLibrary&) = delete;
  DynamicLibrary& operator=(const DynamicLibrary&) = delete;
  ~DynamicLibrary();

  /// The path the library was opened with.
  const std::string& path() const noexcept { return path_; }

  /// The address of `name`, or nullptr when the library does not export it.
  void* symbol(const char* name) const noexcept;

  /// The function `name` with type F (a function type, e.g. `int(unsigned*)`), or nullptr.
  template <class F>
  F* optional(const char* name) const noexcept {
    static_assert(std::is_function_v<F>, "F must be a function type, e.g. int(unsigned*)");
    return reinterpret_cast<F*>(symbol(name));
  }

  /// The function `name`; throws DynamicLibraryError (errc::symbol_missing) with the message
  /// "<name> missing from <path>" when it is absent.
  template <class F>
  F* required(const char* name) const {
    if (F* f = optional<F>(name)) return f;
    throw DynamicLibraryError(errc::symbol_missing, missing_message({name}));
  }

  /// The first of `names` that the library exports (list the newest version first, e.g.
  /// {"nvmlInit_v2", "nvmlInit"}), and which one it was. Empty result when none is there.
  template <class F>
  Found<F> first_of(std::initializer_list<const char*> names) const noexcept {
    for (const char* name : names) {
      if (F* f = optional<F>(name)) return {f, name};
    }
    return {};
  }

  /// Like first_of(), but throws DynamicLibraryError (errc::symbol_missing) naming every
  /// candidate when none is exported.
  template <class F>
  Found<F> required_first_of(std::initializer_list<const char*> names) const {
    if (auto found = first_of<F>(names)) return found;
    throw DynamicLibraryError(errc::symbol_missing, missing_message(names));
  }

 private:
  DynamicLibrary(void* handle, std::string path) noexcept
      : handle_(handle), path_(std::move(path)) {}
  std::string missing_message(std::initializer_list<const char*> names) const;

  void* handle_ = nullptr;
  std::string path_;
};

}  // namespace gpustream
