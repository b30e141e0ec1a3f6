// gpustream/errors.hpp — gpustream's error codes (boost::system::error_code category).
#pragma once

#include <boost/system/error_code.hpp>

namespace gpustream {

enum class errc {
  ok = 0,
  probe_unavailable = 1,  // detect() said the source is not there
  sample_failed,          // the source answered with an error
  timeout,                // the sample did not complete within its timeout
  overrun,                // a tick came while the previous sample was still running
  library_missing,        // dlopen failed
  symbol_missing,         // a required symbol is not in the library
  tool_failed,            // a child process exited non-zero, crashed or printed garbage
  parse_error,            // malformed input
  stopped,                // the component was stopped
};

const boost::system::error_category& gpustream_category() noexcept;

inline boost::system::error_code make_error_code(errc e) noexcept {
  return {static_cast<int>(e), gpustream_category()};
}

}  // namespace gpustream

template <>
struct boost::system::is_error_code_enum<gpustream::errc> : std::true_type {};
