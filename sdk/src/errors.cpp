#include "gpustream/errors.hpp"

#include <string>

namespace gpustream {
namespace {

// A final class of one static instance, never deleted through a base pointer.
// NOLINTNEXTLINE(cppcoreguidelines-virtual-class-destructor)
class Category final : public boost::system::error_category {
 public:
  const char* name() const noexcept override { return "gpustream"; }
  std::string message(int ev) const override {
    switch (static_cast<errc>(ev)) {
      case errc::ok:
        return "success";
      case errc::probe_unavailable:
        return "probe unavailable";
      case errc::sample_failed:
        return "sample failed";
      case errc::timeout:
        return "sample timed out";
      case errc::overrun:
        return "previous sample still running";
      case errc::library_missing:
        return "library could not be loaded";
      case errc::symbol_missing:
        return "required symbol missing from library";
      case errc::tool_failed:
        return "tool failed";
      case errc::parse_error:
        return "malformed input";
      case errc::stopped:
        return "stopped";
    }
    return "unknown gpustream error";
  }
};

}  // namespace

const boost::system::error_category& gpustream_category() noexcept {
  static const Category category;
  return category;
}

}  // namespace gpustream
