// AmdSmiLibrary: the process-wide libamd_smi.so, its LibrarySession and the host guard
// (amd_smi_backend.hpp explains the rule).
#include <dlfcn.h>

#include <map>
#include <stdexcept>

#include "amd/amd_smi_backend.hpp"
#include "gpustream/log.hpp"

namespace gpustream::amd_lib_detail {
namespace {

std::mutex& registry_mutex() {
  static std::mutex mu;
  return mu;
}

std::map<std::string, std::weak_ptr<AmdSmiLibrary>>& registry() {
  static std::map<std::string, std::weak_ptr<AmdSmiLibrary>> libs;
  return libs;
}

/// True when `path` is already loaded in this process (by the host program, or by anything
/// other than a live AmdSmiLibrary).
bool loaded_already(const std::string& path) {
  void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (!h) return false;
  ::dlclose(h);
  return true;
}

}  // namespace

std::shared_ptr<AmdSmiLibrary> AmdSmiLibrary::get(const std::string& path,
                                                  LibrarySessionMode mode) {
  std::lock_guard lock(registry_mutex());
  auto& slot = registry()[path];
  if (auto lib = slot.lock()) {
    if (lib->requested_ != mode)
      logger()->info("amd library: {} is already open in {} mode; that mode is kept", path,
                     to_string(lib->mode()));
    return lib;
  }
  auto lib = std::make_shared<AmdSmiLibrary>(path, mode, loaded_already(path));
  slot = lib;
  return lib;
}

AmdSmiLibrary::AmdSmiLibrary(const std::string& path, LibrarySessionMode mode, bool loaded_before)
    : library_(DynamicLibrary::load(path)),
      api_(amdsmi::Api::load(library_)),
      requested_(mode),
      host_owned_(loaded_before) {
  if (loaded_before)
    logger()->info(
        "amd library: {} was loaded by the host program before gpustream; gpustream will never "
        "call amdsmi_shut_down on it (its init is not reference-counted), and uses it in "
        "persistent mode",
        path);
  const auto effective = loaded_before ? LibrarySessionMode::persistent : mode;
  session_ = std::make_unique<LibrarySession>(
      "AMD SMI", effective, [this] { return init(); }, [this] { shut_down(); });
}

AmdSmiLibrary::~AmdSmiLibrary() {
  session_.reset();  // the persistent reference: shuts down (unless the host owns it)
}

LibrarySessionMode AmdSmiLibrary::mode() const noexcept {
  return host_owned_.load() ? LibrarySessionMode::persistent : session_->mode();
}

std::optional<amdsmi::LibVersion> AmdSmiLibrary::version() const {
  std::lock_guard lock(mu_);
  return version_;
}

LibrarySession::Stats AmdSmiLibrary::session_stats() const { return session_->stats(); }

std::optional<InitFailure> AmdSmiLibrary::last_init_failure() const {
  std::lock_guard lock(mu_);
  return last_failure_;
}

std::optional<std::string> AmdSmiLibrary::init() {
  const auto fail = [this](InitFailure::Step step, amdsmi::Status rc, std::string message) {
    std::lock_guard lock(mu_);
    last_failure_ = InitFailure{step, rc, message};
    return std::optional<std::string>(std::move(message));
  };
  // Already initialized by someone else? (Uninitialized, the library answers NOT_INIT.)
  std::uint32_t sockets = 0;
  const auto probe_rc = api_.socket_handles(&sockets, nullptr);
  if (probe_rc != amdsmi::kNotInit) {
    if (!host_owned_.exchange(true))
      logger()->info(
          "amd library: the AMD SMI library was already initialized by the host program; "
          "gpustream will never shut it down");
    we_initialized_ = false;
  } else {
    const auto rc = api_.init(amdsmi::kInitAmdGpus);
    if (rc != amdsmi::kSuccess)
      return fail(InitFailure::Step::init, rc,
                  "amdsmi_init(AMDSMI_INIT_AMD_GPUS): " + api_.describe(rc) + " (" +
                      amdsmi::status_name(rc) + ")");
    we_initialized_ = true;
  }
  amdsmi::VersionRaw raw{};
  if (const auto rc = api_.lib_version(&raw); rc != amdsmi::kSuccess) {
    shut_down();
    return fail(InitFailure::Step::version_call, rc,
                "amdsmi_get_lib_version: " + api_.describe(rc));
  }
  std::string why;
  auto v = amdsmi::classify_version(raw, &why);
  if (!v) {
    shut_down();
    return fail(InitFailure::Step::unknown_version, amdsmi::kSuccess, std::move(why));
  }
  {
    std::lock_guard lock(mu_);
    if (!version_)
      logger()->info("amd library: {} version {} (struct layout {})", path(), v->text,
                     to_string(v->layout));
    version_ = std::move(v);
    last_failure_.reset();
  }
  generation_.fetch_add(1);
  return std::nullopt;
}

void AmdSmiLibrary::shut_down() {
  // The host guard: never end a library someone else initialized, or one the host loaded.
  if (host_owned_.load() || !we_initialized_.exchange(false)) return;
  api_.shut_down();
}

LibrarySession::Guard AmdSmiLibrary::acquire() {
  boost::system::error_code ec;
  std::string message;
  auto guard = session_->acquire(ec, &message);
  if (!guard) throw std::runtime_error(message);
  return guard;
}

}  // namespace gpustream::amd_lib_detail
