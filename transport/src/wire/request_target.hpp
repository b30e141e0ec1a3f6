// The parts of an HTTP request target ("/api/v1/fit?bytes=1024&token=x") the server reads: its
// path and its query parameters. Shared by the wire (the /api/v1/fit parameter) and the
// server's access checks and routes.
//
// Thread safety: reentrant functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace gpustream::transport {

/// "?a=1&token=x%2F" → "x/" for key "token"; nullopt when absent.
std::optional<std::string> query_parameter(std::string_view target, std::string_view key);
/// The path part of a request target ("/ws?token=x" → "/ws").
std::string_view target_path(std::string_view target);

}  // namespace gpustream::transport
