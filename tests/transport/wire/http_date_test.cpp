// HTTP-date: the three forms of RFC 9110 §5.6.7, and what is refused.
#include "wire/http_date.hpp"

#include <gtest/gtest.h>

namespace gpustream::transport {
namespace {

// 1994-11-06T08:49:37Z, RFC 9110's example, in seconds since the epoch.
constexpr std::int64_t kExample = 784111777;

TEST(HttpDate, ReadsTheThreeFormsOfTheSameInstant) {
  EXPECT_EQ(parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT"), kExample);
  EXPECT_EQ(parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT"), kExample);
  EXPECT_EQ(parse_http_date("Sun Nov  6 08:49:37 1994"), kExample);
}

TEST(HttpDate, CountsLeapYearsAndTheEpoch) {
  EXPECT_EQ(parse_http_date("Thu, 01 Jan 1970 00:00:00 GMT"), 0);
  EXPECT_EQ(parse_http_date("Tue, 29 Feb 2000 12:00:00 GMT"), 951825600);
  EXPECT_EQ(parse_http_date("Fri, 27 Nov 2026 11:00:00 GMT"), 1795777200);
  EXPECT_EQ(parse_http_date("Wed Dec 31 23:59:59 2025"), 1767225599);
  // A two-digit year of RFC 850 is read as the one in 1970..2069.
  EXPECT_EQ(parse_http_date("Monday, 01-Jan-29 00:00:00 GMT"), 1861920000);
}

TEST(HttpDate, RefusesWhatIsNotOneOfTheForms) {
  for (const char* bad : {"", "120", "Sun, 6 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 08:49:37",
                          "Sun, 06 Nov 1994 08:49:37 UTC", "Sun, 06 Nov 1994 08:49:37 GMT ",
                          "Sun, 31 Nov 1994 08:49:37 GMT", "Mon, 29 Feb 2100 08:49:37 GMT",
                          "Sun, 06 Foo 1994 08:49:37 GMT", "Sun, 06 Nov 1994 24:00:00 GMT",
                          "Sun, 06 Nov 1994 08:60:00 GMT", "Sun, 06 Nov 1969 08:49:37 GMT",
                          "Sunday, 06 Nov 1994 08:49:37 GMT", "Sun Nov 6 08:49:37 1994",
                          "Xyz, 06 Nov 1994 08:49:37 GMT"})
    EXPECT_FALSE(parse_http_date(bad).has_value()) << bad;
  EXPECT_FALSE(parse_http_date(std::string(10000, 'S')).has_value());
}

}  // namespace
}  // namespace gpustream::transport
