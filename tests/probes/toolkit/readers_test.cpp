#include "gpustream/probes/readers.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <string>

#include "support/temp_tree.hpp"

namespace gpustream::readers {
namespace {

using test::TempTree;

TEST(Readers, ParseUintAcceptsOnlyWholeNumbers) {
  EXPECT_EQ(parse_uint("42"), 42u);
  EXPECT_EQ(parse_uint("  42\n"), 42u);
  EXPECT_EQ(parse_uint("0"), 0u);
  EXPECT_EQ(parse_uint("18446744073709551615"), 18446744073709551615ull);
  EXPECT_FALSE(parse_uint("18446744073709551616"));  // overflow
  EXPECT_FALSE(parse_uint(""));
  EXPECT_FALSE(parse_uint("   "));
  EXPECT_FALSE(parse_uint("-1"));
  EXPECT_FALSE(parse_uint("+1"));
  EXPECT_FALSE(parse_uint("12x"));
  EXPECT_FALSE(parse_uint("1 2"));
  EXPECT_EQ(parse_uint("0x73bf", 16), 0x73bfu);
  EXPECT_EQ(parse_uint("73BF", 16), 0x73bfu);
  EXPECT_FALSE(parse_uint("0x", 16));
}

TEST(Readers, ParseIntAcceptsSign) {
  EXPECT_EQ(parse_int("-17"), -17);
  EXPECT_EQ(parse_int(" 5 "), 5);
  EXPECT_FALSE(parse_int("5.0"));
  EXPECT_FALSE(parse_int("abc"));
}

TEST(Readers, ParseByteSizeKnowsProcfsAndFdinfoUnits) {
  EXPECT_EQ(parse_byte_size("123 kB"), 123u * 1024);
  EXPECT_EQ(parse_byte_size("   24684096 kB"), 24684096ull * 1024);
  EXPECT_EQ(parse_byte_size("7 KiB"), 7u * 1024);
  EXPECT_EQ(parse_byte_size("3 MiB"), 3u << 20);
  EXPECT_EQ(parse_byte_size("2 GiB"), 2ull << 30);
  EXPECT_EQ(parse_byte_size("512"), 512u);
  EXPECT_EQ(parse_byte_size("512 B"), 512u);
  EXPECT_EQ(parse_byte_size("0 kB"), 0u);
  EXPECT_FALSE(parse_byte_size("lots kB"));
  EXPECT_FALSE(parse_byte_size("12 furlongs"));
  EXPECT_FALSE(parse_byte_size("kB"));
  EXPECT_FALSE(parse_byte_size(""));
  EXPECT_FALSE(parse_byte_size("18446744073709551615 kB"));  // overflow after scaling
}

TEST(Readers, SplitsKeyValueLines) {
  auto kv = split_key_value("VmRSS:\t   5120 kB");
  ASSERT_TRUE(kv);
  EXPECT_EQ(kv->key, "VmRSS");
  EXPECT_EQ(kv->value, "5120 kB");
  EXPECT_FALSE(split_key_value("no separator here"));
  EXPECT_FALSE(split_key_value(": value without key"));
  auto eq = split_key_value("a = b", '=');
  ASSERT_TRUE(eq);
  EXPECT_EQ(eq->key, "a");
  EXPECT_EQ(eq->value, "b");
}

TEST(Readers, FindValueTakesTheFirstExactKey) {
  const std::string text = "MemTotal: 1 kB\nMemTotalX: 2 kB\nnoise\nMem: 3 kB\nMemTotal: 4 kB";
  EXPECT_EQ(find_value(text, "MemTotal"), "1 kB");
  EXPECT_EQ(find_value(text, "Mem"), "3 kB");
  EXPECT_FALSE(find_value(text, "SwapFree"));
  int lines = 0;
  for_each_key_value(text, [&](const KeyValue&) { ++lines; });
  EXPECT_EQ(lines, 4);
}

TEST(Readers, JoinPathAvoidsDoubleSlashes) {
  EXPECT_EQ(join_path("/proc", "meminfo"), "/proc/meminfo");
  EXPECT_EQ(join_path("/proc/", "/meminfo"), "/proc/meminfo");
  EXPECT_EQ(join_path("/", "proc"), "/proc");
  EXPECT_EQ(join_path("", "proc"), "/proc");
  EXPECT_EQ(join_path("/proc", ""), "/proc");
}

TEST(Readers, ReadFileReturnsContentsOrErrno) {
  TempTree tree;
  const auto path = tree.file("a/file", "hello\nworld\n");
  auto ok = read_file(path);
  ASSERT_TRUE(ok);
  EXPECT_EQ(*ok, "hello\nworld\n");

  tree.file("empty", "");
  auto empty = read_file(tree.path("empty"));
  ASSERT_TRUE(empty);
  EXPECT_EQ(*empty, "");

  auto missing = read_file(tree.path("nope"));
  ASSERT_FALSE(missing);
  EXPECT_TRUE(missing.error().not_found());
  EXPECT_EQ(missing.error().message(),
            "cannot read " + tree.path("nope") + ": No such file or directory");

  tree.dir("folder");
  auto folder = read_file(tree.path("folder"));
  ASSERT_FALSE(folder);
  EXPECT_EQ(folder.error().code, std::errc::is_a_directory);
  EXPECT_FALSE(folder.error().not_found());

  auto big = read_file(path, 4);
  ASSERT_FALSE(big);
  EXPECT_EQ(big.error().code, std::errc::file_too_large);
}

TEST(Readers, ReadFileReportsPermissionDenied) {
  TempTree tree;
  if (!tree.unreadable_file("secret")) GTEST_SKIP() << gpustream::test::kRunsUnprivileged;
  auto r = read_file(tree.path("secret"));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, std::errc::permission_denied);
  EXPECT_EQ(r.error().message(), "cannot read " + tree.path("secret") + ": Permission denied");
}

TEST(Readers, ReadIntegerFiles) {
  TempTree tree;
  EXPECT_EQ(*read_int_file(tree.file("a", "-12\n")), -12);
  EXPECT_EQ(*read_uint_file(tree.file("b", "250000000\n")), 250000000u);
  EXPECT_EQ(*read_uint_file(tree.file("c", "0x73bf\n"), 16), 0x73bfu);

  auto garbage = read_int_file(tree.file("d", "N/A\n"));
  ASSERT_FALSE(garbage);
  EXPECT_EQ(garbage.error().code, std::errc::invalid_argument);
  EXPECT_EQ(garbage.error().message(),
            "cannot parse " + tree.path("d") + ": not an integer: 'N/A'");

  auto negative = read_uint_file(tree.path("a"));
  ASSERT_FALSE(negative);
  EXPECT_NE(negative.error().message().find("not an unsigned integer"), std::string::npos);

  auto missing = read_uint_file(tree.path("zz"));
  ASSERT_FALSE(missing);
  EXPECT_TRUE(missing.error().not_found());
}

TEST(Readers, ReadLink) {
  TempTree tree;
  tree.dir("proc/4242");
  tree.symlink("proc/self", "4242");
  auto target = read_link(tree.path("proc/self"));
  ASSERT_TRUE(target);
  EXPECT_EQ(*target, "4242");
  auto not_link = read_link(tree.path("proc/4242"));
  EXPECT_FALSE(not_link);
}

TEST(Readers, ListsNumericDirectoriesOnly) {
  TempTree tree;
  tree.dir("proc/22");
  tree.dir("proc/1");
  tree.dir("proc/300");
  tree.dir("proc/abc");
  tree.dir("proc/3x");
  tree.file("proc/44", "a file, not a folder");
  tree.symlink("proc/self", "22");
  auto pids = list_numeric_dirs(tree.path("proc"));
  ASSERT_TRUE(pids);
  EXPECT_EQ(*pids, (std::vector<std::int64_t>{1, 22, 300}));

  auto missing = list_numeric_dirs(tree.path("nowhere"));
  ASSERT_FALSE(missing);
  EXPECT_TRUE(missing.error().not_found());
}

TEST(Readers, ListsRealProc) {
  auto pids = list_numeric_dirs("/proc");
  ASSERT_TRUE(pids) << pids.error().message();
  EXPECT_TRUE(
      std::binary_search(pids->begin(), pids->end(), static_cast<std::int64_t>(::getpid())));
}

}  // namespace
}  // namespace gpustream::readers
