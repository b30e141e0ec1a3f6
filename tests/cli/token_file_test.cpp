// In-process: the one token-file reader of `serve --token` and `watch --token-file`.
#include <sys/stat.h>

#include <gtest/gtest.h>

#include "cli_test_util.hpp"
#include "gpustream/config.hpp"
#include "token_file.hpp"

namespace gpustream::cli {
namespace {

using test::TempDir;

std::string error_of(const std::string& path) {
  try {
    read_token_file(path);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(TokenFile, TrailingWhitespaceAndCrlfAreNotPartOfTheToken) {
  TempDir t;
  for (const char* content :
       {"s3cret", "s3cret\n", "s3cret\r\n", "s3cret \t\r\n\r\n", "  s3cret\n"}) {
    t.write("token", content);
    EXPECT_EQ(read_token_file(t.file("token")), "s3cret") << content;
  }
}

TEST(TokenFile, AnEmptyOrBlankFileIsAnError) {
  TempDir t;
  for (const char* content : {"", "\n", "\r\n", "  \t \r\n"}) {
    t.write("token", content);
    EXPECT_NE(error_of(t.file("token")).find("is empty"), std::string::npos) << content;
  }
}

TEST(TokenFile, TwoLinesOrControlCharactersAreAnError) {
  TempDir t;
  t.write("token", "first\nsecond\n");
  EXPECT_NE(error_of(t.file("token")).find("one token on one line"), std::string::npos);
  t.write("token", std::string("a\0b", 3));
  EXPECT_NE(error_of(t.file("token")).find("control character"), std::string::npos);
}

TEST(TokenFile, AMissingOrHugeFileIsAnError) {
  TempDir t;
  EXPECT_NE(error_of(t.file("missing")).find("cannot read the token file"), std::string::npos);
  t.write("token", std::string(4097, 'x'));
  EXPECT_NE(error_of(t.file("token")).find("larger than 4096 bytes"), std::string::npos);
  t.write("token", std::string(4096, 'x'));
  EXPECT_EQ(read_token_file(t.file("token")).size(), 4096u);
  // An endless file is read within the bound too (4097 bytes), not to the end.
  EXPECT_NE(error_of("/dev/zero").find("larger than 4096 bytes"), std::string::npos);
}

// A FIFO nobody writes to: the open does not block (it would wait for a writer, deaf to
// SIGINT); with no writer it reads as an empty file.
TEST(TokenFile, AFifoWithoutAWriterIsAnEmptyFileNotAHang) {
  TempDir t;
  ASSERT_EQ(::mkfifo(t.file("fifo").c_str(), 0600), 0);
  EXPECT_NE(error_of(t.file("fifo")).find("is empty"), std::string::npos);
}

}  // namespace
}  // namespace gpustream::cli
