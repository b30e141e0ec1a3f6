#include <gtest/gtest.h>

#include <optional>

#include "gpustream/library_session.hpp"
#include "platform_test_util.hpp"

namespace gpustream {
namespace {

using test::ScopedEnv;

TEST(LibrarySessionMode, FromEnvironment) {
  {
    ScopedEnv env(kLibrarySessionEnv, "lazy");
    EXPECT_EQ(library_session_mode_from_env(), LibrarySessionMode::lazy);
    EXPECT_EQ(resolve_library_session_mode(std::nullopt), LibrarySessionMode::lazy);
    // An explicit setting wins over the environment.
    EXPECT_EQ(resolve_library_session_mode(LibrarySessionMode::persistent),
              LibrarySessionMode::persistent);
  }
  {
    ScopedEnv env(kLibrarySessionEnv, "persistent");
    EXPECT_EQ(library_session_mode_from_env(), LibrarySessionMode::persistent);
  }
  {
    ScopedEnv env(kLibrarySessionEnv, "sometimes");
    EXPECT_EQ(library_session_mode_from_env(), std::nullopt);
    EXPECT_EQ(resolve_library_session_mode(std::nullopt), LibrarySessionMode::persistent);
  }
  {
    ScopedEnv env(kLibrarySessionEnv, nullptr);
    EXPECT_EQ(library_session_mode_from_env(), std::nullopt);
    EXPECT_EQ(resolve_library_session_mode(std::nullopt), LibrarySessionMode::persistent);
    EXPECT_EQ(resolve_library_session_mode(LibrarySessionMode::lazy), LibrarySessionMode::lazy);
  }
}

TEST(LibrarySessionMode, ParseAndPrint) {
  EXPECT_EQ(parse_library_session_mode("lazy"), LibrarySessionMode::lazy);
  EXPECT_EQ(parse_library_session_mode("persistent"), LibrarySessionMode::persistent);
  EXPECT_EQ(parse_library_session_mode("Lazy"), std::nullopt);
  EXPECT_EQ(parse_library_session_mode(""), std::nullopt);
  EXPECT_EQ(to_string(LibrarySessionMode::lazy), "lazy");
  EXPECT_EQ(to_string(LibrarySessionMode::persistent), "persistent");
}

}  // namespace
}  // namespace gpustream
