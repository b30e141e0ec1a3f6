#include "gpustream/dynamic_library.hpp"

#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "gpustream_fake_paths.hpp"

namespace gpustream {
namespace {

using fakes::kCountingLibrary;

TEST(DynamicLibrary, OpensAndFindsRequiredSymbols) {
  auto lib = DynamicLibrary::load(kCountingLibrary);
  EXPECT_EQ(lib.path(), kCountingLibrary);
  auto* reset = lib.required<void()>("fake_reset");
  auto* init = lib.required<int()>("fake_init");
  auto* count = lib.required<int()>("fake_init_count");
  reset();
  EXPECT_EQ(init(), 0);
  EXPECT_EQ(count(), 1);
  lib.required<void()>("fake_shutdown")();
}

TEST(DynamicLibrary, MissingFileNamesThePathAndTheLoaderMessage) {
  std::string error;
  auto lib = DynamicLibrary::open("/nonexistent/libnvidia-ml.so.1", &error);
  EXPECT_FALSE(lib.has_value());
  EXPECT_NE(error.find("/nonexistent/libnvidia-ml.so.1"), std::string::npos) << error;
  EXPECT_NE(error.find("No such file"), std::string::npos) << error;

  try {
    DynamicLibrary::load("/nonexistent/libze_loader.so.1");
    FAIL() << "load() should throw";
  } catch (const DynamicLibraryError& e) {
    EXPECT_EQ(e.code(), make_error_code(errc::library_missing));
    EXPECT_NE(e.message().find("/nonexistent/libze_loader.so.1"), std::string::npos);
  }
}

TEST(DynamicLibrary, NotALibraryIsAnError) {
  std::string error;
  // A text file is not an ELF object: dlopen fails, and the message says why.
  auto lib = DynamicLibrary::open(GPUSTREAM_SOURCE_DIR "/CMakeLists.txt", &error);
  EXPECT_FALSE(lib.has_value());
  EXPECT_NE(error.find("CMakeLists.txt"), std::string::npos) << error;
  EXPECT_GT(error.size(), std::string("cannot load ").size() + 20) << error;
}

TEST(DynamicLibrary, EmptyPathIsAnError) {
  std::string error;
  EXPECT_FALSE(DynamicLibrary::open("", &error).has_value());
  EXPECT_FALSE(error.empty());
}

TEST(DynamicLibrary, RequiredMissingSymbolNamesSymbolAndFile) {
  auto lib = DynamicLibrary::load(kCountingLibrary);
  try {
    lib.required<int()>("nvmlInit_v2");
    FAIL() << "required() should throw";
  } catch (const DynamicLibraryError& e) {
    EXPECT_EQ(e.code(), make_error_code(errc::symbol_missing));
    EXPECT_EQ(e.message(), std::string("nvmlInit_v2 missing from ") + kCountingLibrary);
  }
}

TEST(DynamicLibrary, OptionalMissingSymbolIsNull) {
  auto lib = DynamicLibrary::load(kCountingLibrary);
  EXPECT_EQ(lib.optional<int()>("nvmlDeviceGetPowerUsage"), nullptr);
  EXPECT_EQ(lib.symbol("nvmlDeviceGetPowerUsage"), nullptr);
  EXPECT_NE(lib.optional<int()>("fake_use"), nullptr);
}

TEST(DynamicLibrary, FirstOfPrefersTheFirstListedName) {
  auto lib = DynamicLibrary::load(kCountingLibrary);
  // Newest first: the missing "_v2" name is skipped, the older one is found.
  auto found = lib.first_of<int()>({"fake_init_v2", "fake_init"});
  ASSERT_TRUE(found);
  EXPECT_EQ(found.name, "fake_init");
  EXPECT_EQ(found.function, lib.optional<int()>("fake_init"));

  // When both exist, the first wins.
  auto both = lib.first_of<int()>({"fake_init_count", "fake_init"});
  ASSERT_TRUE(both);
  EXPECT_EQ(both.name, "fake_init_count");

  auto none = lib.first_of<int()>({"nvmlInit_v2", "nvmlInit"});
  EXPECT_FALSE(none);
  EXPECT_EQ(none.function, nullptr);
  EXPECT_TRUE(none.name.empty());
}

TEST(DynamicLibrary, RequiredFirstOfNamesEveryCandidate) {
  auto lib = DynamicLibrary::load(kCountingLibrary);
  EXPECT_EQ(lib.required_first_of<int()>({"nope", "fake_use"}).name, "fake_use");
  try {
    lib.required_first_of<int()>({"nvmlInit_v2", "nvmlInit"});
    FAIL() << "required_first_of() should throw";
  } catch (const DynamicLibraryError& e) {
    EXPECT_EQ(e.message(),
              std::string("none of nvmlInit_v2, nvmlInit found in ") + kCountingLibrary);
  }
}

TEST(DynamicLibrary, MoveTransfersOwnership) {
  auto a = DynamicLibrary::load(kCountingLibrary);
  auto* use = a.required<int()>("fake_use");
  DynamicLibrary b = std::move(a);
  EXPECT_EQ(b.optional<int()>("fake_use"), use);
  EXPECT_EQ(a.symbol("fake_use"), nullptr);  // NOLINT(bugprone-use-after-move): moved-from is empty
  auto c = DynamicLibrary::load(kCountingLibrary);
  c = std::move(b);
  EXPECT_EQ(c.optional<int()>("fake_use"), use);
  EXPECT_EQ(c.path(), kCountingLibrary);
}

}  // namespace
}  // namespace gpustream
