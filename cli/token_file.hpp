// The bearer token file of `serve --token FILE` and `watch --connect URL --token-file FILE`:
// both read it with this one function.
#pragma once

#include <string>

namespace gpustream::cli {

/// The token stored in `path`: the file's content without leading and trailing whitespace
/// (spaces, tabs, CR, LF — so a file written on Windows or by `echo` works). Throws ConfigError
/// (a usage error) when the file cannot be read, is larger than 4096 bytes, is empty or only
/// whitespace, or the token holds a line break or another control character (two lines are not
/// one token). Warns once on stderr when other users may read the file.
std::string read_token_file(const std::string& path);

}  // namespace gpustream::cli
