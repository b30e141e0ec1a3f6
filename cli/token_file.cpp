#include "token_file.hpp"

#include <sys/stat.h>

#include <fstream>
#include <iostream>

#include "gpustream/config.hpp"

namespace gpustream::cli {

namespace {
constexpr std::size_t kMaxTokenFileBytes = 4096;
constexpr const char* kWhitespace = " \t\r\n";
}  // namespace

std::string read_token_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError("cannot read the token file '" + path + "'");
  std::string content(kMaxTokenFileBytes + 1, '\0');
  in.read(content.data(), static_cast<std::streamsize>(content.size()));
  if (in.bad()) throw ConfigError("cannot read the token file '" + path + "'");
  content.resize(static_cast<std::size_t>(in.gcount()));
  if (content.size() > kMaxTokenFileBytes)
    throw ConfigError("the token file '" + path + "' is larger than " +
                      std::to_string(kMaxTokenFileBytes) + " bytes; it must hold one token");
  const auto first = content.find_first_not_of(kWhitespace);
  if (first == std::string::npos) throw ConfigError("the token file '" + path + "' is empty");
  std::string token = content.substr(first, content.find_last_not_of(kWhitespace) - first + 1);
  for (const char c : token) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f)
      throw ConfigError("the token file '" + path + "' must hold one token on one line (found " +
                        (c == '\n' || c == '\r' ? std::string("a line break")
                                                : std::string("a control character")) +
                        " inside it)");
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 077) != 0)
    std::cerr << "gpustream: warning: the token file '" << path
              << "' is readable by other users (chmod 600 it)\n";
  return token;
}

}  // namespace gpustream::cli
