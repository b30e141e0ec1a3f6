// redact_url_credentials: the one helper every logged or shown URL goes through.
#include <gtest/gtest.h>

#include "gpustream/transport/address.hpp"

namespace gpustream::transport {
namespace {

TEST(RedactUrl, HidesTokenLikeQueryParameters) {
  EXPECT_EQ(redact_url_credentials("ws://127.0.0.1:9400/ws?token=SECRET"),
            "ws://127.0.0.1:9400/ws?token=***");
  EXPECT_EQ(redact_url_credentials("ws://h:1/ws?probes=a&Token=SECRET&x=1"),
            "ws://h:1/ws?probes=a&Token=***&x=1");
  EXPECT_EQ(redact_url_credentials("ws://h/ws?access_token=S1;api_key=S2&client_secret=S3"),
            "ws://h/ws?access_token=***;api_key=***&client_secret=***");
  EXPECT_EQ(redact_url_credentials("ws://h/ws?password=S1&sig=S2&auth=S3&session=S4"),
            "ws://h/ws?password=***&sig=***&auth=***&session=***");
}

TEST(RedactUrl, HidesSecretsInTheFragment) {
  EXPECT_EQ(redact_url_credentials("http://h:9400/#access_token=SECRET&view=1"),
            "http://h:9400/#access_token=***&view=1");
  EXPECT_EQ(redact_url_credentials("http://h:9400/?a=1#token=SECRET"),
            "http://h:9400/?a=1#token=***");
}

TEST(RedactUrl, ASecretValueWithACommaIsHiddenWhole) {
  const auto r = redact_url_credentials("ws://h/ws?token=PART1,PART2&x=1");
  EXPECT_EQ(r, "ws://h/ws?token=***&x=1");
  EXPECT_EQ(redact_url_credentials("ws://h/ws?token=PART1,PART2").find("PART"), std::string::npos);
}

TEST(RedactUrl, HidesUserinfoOnlyInTheAuthority) {
  EXPECT_EQ(redact_url_credentials("ws://alice:pw@h:1/ws?token=T"), "ws://***@h:1/ws?token=***");
  // An '@' in the path or the query is not userinfo.
  EXPECT_EQ(redact_url_credentials("ws://h:1/a@b?mail=x@y"), "ws://h:1/a@b?mail=x@y");
  EXPECT_EQ(redact_url_credentials("tcp://[::1]:9401"), "tcp://[::1]:9401");
}

TEST(RedactUrl, LeavesHarmlessUrlsAndTextAlone) {
  for (const char* s : {"", "ws://127.0.0.1:9400/ws", "ws://h/ws?probes=a,b&since=3", "not a url",
                        "ws://h/ws?token", "ws://h/ws?=x&", "http://h/?"})
    EXPECT_EQ(redact_url_credentials(s), s) << s;
}

TEST(RedactUrl, EachUrlOfAListIsRedacted) {
  EXPECT_EQ(redact_url_credentials("nats://u:p@b:2,tls://c:3,ws://a:1/ws?token=T1"),
            "nats://***@b:2,tls://c:3,ws://a:1/ws?token=***");
  // A secret value may contain commas: it hides the rest of the list rather than leak a part.
  EXPECT_EQ(redact_url_credentials("ws://a:1/ws?token=T1,nats://b:2"), "ws://a:1/ws?token=***");
}

}  // namespace
}  // namespace gpustream::transport
