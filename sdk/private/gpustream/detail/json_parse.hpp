// gpustream/detail/json_parse.hpp — parse_json (gpustream/json.hpp: exact doubles) with a
// nesting bound, for parsers of untrusted messages (transport/src/protocol.cpp). Not installed.
#pragma once

#include <boost/json/error.hpp>
#include <boost/json/storage_ptr.hpp>
#include <boost/json/value.hpp>
#include <cstddef>
#include <string_view>

namespace gpustream::detail {

/// As gpustream::parse_json, refusing nesting deeper than `max_depth`; on error `ec` is set,
/// `consumed` is the byte where parsing stopped and the value is null (nothing is thrown).
boost::json::value parse_json_bounded(std::string_view text, boost::json::storage_ptr sp,
                                      std::size_t max_depth, boost::json::error_code& ec,
                                      std::size_t& consumed);

}  // namespace gpustream::detail
