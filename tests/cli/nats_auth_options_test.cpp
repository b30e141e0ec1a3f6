// In-process: the NATS credential flags of `serve --nats` and `fleet` (nats_auth_options.hpp):
// the secrets read from their files, every other file checked at start, and the errors naming
// the flag and the file but never a secret.
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cli_test_util.hpp"
#include "gpustream/config.hpp"
#include "nats_auth_options.hpp"

namespace gpustream::cli {
namespace {

using test::TempDir;

constexpr const char* kSeed = "SUAMLK2ZNL35WSMW37E7UD4VZ7ELPKW7DHC3BWBSD2GCZ7IUQQXZIORRBU";
constexpr const char* kPublic = "UDXU4RCSJNZOIQHZNWXHXORDPRTGNJAHAHFRGZNEEJCPQTT2M7NLCNF4";

std::string error_of(const NatsAuthFlags& f) {
  try {
    make_nats_auth(f);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(NatsAuthOptions, OneTableServesBothCommandsWithUnderscoreKeys) {
  const auto& rows = nats_auth_flag_table();
  ASSERT_EQ(rows.size(), 9u);
  for (const auto& row : rows) {
    std::string key(row.flag.substr(2));
    for (char& c : key)
      if (c == '-') c = '_';
    EXPECT_EQ(row.key, key) << row.flag;
  }
}

TEST(NatsAuthOptions, PasswordAndTokenAreReadFromTheirFilesWithoutTheNewline) {
  TempDir t;
  t.write("pw", "s3cret pass\n");
  t.write("tok", "tok-123\r\n");
  const auto a = make_nats_auth({.user = "node1", .password_file = t.file("pw")});
  EXPECT_EQ(a.user, "node1");
  EXPECT_EQ(a.password, "s3cret pass");
  EXPECT_TRUE(a.token.empty());
  EXPECT_FALSE(a.tls());
  EXPECT_EQ(make_nats_auth({.token_file = t.file("tok")}).token, "tok-123");
}

TEST(NatsAuthOptions, AMissingFileNamesTheFlagAndThePath) {
  TempDir t;
  const std::string missing = t.file("absent");
  const std::pair<const char*, NatsAuthFlags> cases[] = {
      {"--nats-password-file", {.user = "u", .password_file = missing}},
      {"--nats-token-file", {.token_file = missing}},
      {"--nats-creds", {.creds = missing}},
      {"--nats-nkey", {.nkey = missing}},
      {"--nats-ca", {.ca = missing}},
      {"--nats-cert", {.cert = missing, .key = missing}},
  };
  for (const auto& [flag, flags] : cases) {
    const auto e = error_of(flags);
    EXPECT_NE(e.find(flag), std::string::npos) << e;
    EXPECT_NE(e.find(missing), std::string::npos) << e;
  }
}

TEST(NatsAuthOptions, AnErrorNeverShowsTheSecret) {
  TempDir t;
  // Two lines: not one password. The message names the file, not what is in it.
  t.write("pw", "hunter2-secret\nsecond-line\n");
  const auto e = error_of({.user = "u", .password_file = t.file("pw")});
  EXPECT_NE(e.find("--nats-password-file"), std::string::npos) << e;
  EXPECT_EQ(e.find("hunter2"), std::string::npos) << e;
  t.write("big", std::string(5000, 'x'));
  EXPECT_NE(error_of({.token_file = t.file("big")}).find("larger than 4096 bytes"),
            std::string::npos);
}

TEST(NatsAuthOptions, PairsAndOneIdentityAreChecked) {
  TempDir t;
  t.write("pw", "p\n");
  t.write("tok", "t\n");
  t.write("pem", "x\n");
  EXPECT_NE(error_of({.user = "u"}).find("--nats-user needs --nats-password-file"),
            std::string::npos);
  EXPECT_NE(error_of({.password_file = t.file("pw")}).find("needs --nats-user"), std::string::npos);
  EXPECT_NE(error_of({.cert = t.file("pem")}).find("--nats-cert needs --nats-key"),
            std::string::npos);
  EXPECT_NE(error_of({.key = t.file("pem")}).find("--nats-key needs --nats-cert"),
            std::string::npos);
  EXPECT_NE(error_of({.user = "u", .password_file = t.file("pw"), .token_file = t.file("tok")})
                .find("one NATS identity"),
            std::string::npos);
  const auto a = make_nats_auth({.ca = t.file("pem"), .cert = t.file("pem"), .key = t.file("pem")});
  EXPECT_TRUE(a.tls());
  EXPECT_EQ(a.ca_file, t.file("pem"));
}

TEST(NatsAuthOptions, AnNkeyFileGivesItsPublicKeyAndKeepsTheSeedInTheFile) {
  TempDir t;
  t.write("user.nk", std::string(kSeed) + "\n" + kPublic + "\n");
  const auto a = make_nats_auth({.nkey = t.file("user.nk")});
  EXPECT_EQ(a.nkey_public, kPublic);
  EXPECT_EQ(a.nkey_seed_file, t.file("user.nk"));
  t.write("seed-only.nk", std::string(kSeed) + "\n");
  EXPECT_NE(error_of({.nkey = t.file("seed-only.nk")}).find("holds no public key"),
            std::string::npos);
  t.write("public-only.nk", std::string(kPublic) + "\n");
  EXPECT_NE(error_of({.nkey = t.file("public-only.nk")}).find("holds no user nkey seed"),
            std::string::npos);
}

TEST(NatsAuthOptions, TheTransportCheckRefusesTwoIdentities) {
  transport::NatsAuth a;
  EXPECT_EQ(transport::nats_auth_error(a), "");
  a.token = "t";
  a.creds_file = "c";
  EXPECT_NE(transport::nats_auth_error(a).find("one NATS identity"), std::string::npos);
  a = {};
  a.nkey_seed_file = "s";
  EXPECT_NE(transport::nats_auth_error(a).find("public key"), std::string::npos);
}

// The inbox prefix is a plain subject: a wildcard would make the permission it stands for match
// other clients' replies, and libnats would refuse it only when connecting (retried forever).
TEST(NatsAuthOptions, TheInboxPrefixIsAPlainSubjectOfAtMost128Bytes) {
  EXPECT_EQ(make_nats_auth({.inbox_prefix = "_INBOX_gpustream.node-1"}).inbox_prefix,
            "_INBOX_gpustream.node-1");
  EXPECT_EQ(make_nats_auth({}).inbox_prefix, "");  // the command's default
  const std::pair<const char*, const char*> refused[] = {
      {"_INBOX.*", "wildcard"},
      {"_INBOX.>", "wildcard"},
      {"_INBOX..x", "empty token"},
      {".x", "empty token"},
      {"x.", "empty token"},
      {"a b", "space"},
      {"a\tb", "space"},
      {"caf\xc3\xa9", "printable ASCII"},
  };
  for (const auto& [prefix, why] : refused) {
    const auto e = error_of({.inbox_prefix = prefix});
    EXPECT_NE(e.find("--nats-inbox-prefix"), std::string::npos) << prefix << ": " << e;
    EXPECT_NE(e.find(why), std::string::npos) << prefix << ": " << e;
  }
  const std::string longest(transport::kMaxInboxPrefixBytes, 'x');
  EXPECT_EQ(make_nats_auth({.inbox_prefix = longest}).inbox_prefix, longest);
  EXPECT_NE(error_of({.inbox_prefix = longest + "x"}).find("longer than 128 bytes"),
            std::string::npos);
  // The transport's own check says the same to a library user.
  transport::NatsAuth a;
  a.inbox_prefix = "_INBOX.>";
  EXPECT_NE(transport::nats_auth_error(a).find("wildcard"), std::string::npos);
}

// SIGHUP's reloader: the files read again; the same contents ask nothing of the setter; new
// ones are handed over once, and the setter's answer is the step (refused: failed with the
// reason, the credentials in use kept, so the same new file is offered again next time).
TEST(NatsAuthOptions, TheReloaderHandsNewCredentialsToTheSetterAndSaysItsAnswer) {
  TempDir t;
  t.write("pw", "first\n");
  NatsAuthFlags flags;
  flags.user = "node1";
  flags.password_file = t.file("pw");
  std::vector<transport::NatsAuth> given;
  transport::NatsAuthChange answer = transport::NatsAuthChange::reconnecting;
  auto reload = nats_auth_reloader(flags, make_nats_auth(flags),
                                   [&](const transport::NatsAuth& a, std::string* error) {
                                     given.push_back(a);
                                     if (answer == transport::NatsAuthChange::refused)
                                       *error = "the setter's reason";
                                     return answer;
                                   });
  EXPECT_EQ(reload({}).result, ReloadStep::Result::unchanged);
  EXPECT_TRUE(given.empty()) << "the same credentials were handed over";

  t.write("pw", "second\n");
  answer = transport::NatsAuthChange::refused;
  auto step = reload({});
  EXPECT_EQ(step.result, ReloadStep::Result::failed);
  EXPECT_NE(step.message.find("the setter's reason"), std::string::npos) << step.message;
  EXPECT_EQ(step.message.find("second"), std::string::npos) << "a secret in the message";
  ASSERT_EQ(given.size(), 1u);
  EXPECT_EQ(given[0].password, "second");

  answer = transport::NatsAuthChange::reconnecting;  // refused: offered again
  step = reload({});
  EXPECT_EQ(step.result, ReloadStep::Result::changed);
  EXPECT_NE(step.message.find("replaced once they connect"), std::string::npos) << step.message;
  ASSERT_EQ(given.size(), 2u);
  EXPECT_EQ(reload({}).result, ReloadStep::Result::unchanged);  // taken: now the ones in use
  EXPECT_EQ(given.size(), 2u);

  t.write("pw", "third\n");
  answer = transport::NatsAuthChange::unchanged;  // the setter already had them
  EXPECT_EQ(reload({}).result, ReloadStep::Result::unchanged);
  EXPECT_EQ(given.size(), 3u);

  std::filesystem::remove(t.file("pw"));
  step = reload({});
  EXPECT_EQ(step.result, ReloadStep::Result::failed);
  EXPECT_NE(step.message.find("cannot read the NATS credentials"), std::string::npos)
      << step.message;
  EXPECT_EQ(given.size(), 3u);
}

}  // namespace
}  // namespace gpustream::cli
