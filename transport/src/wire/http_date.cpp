// HTTP-date parsing: a small recursive-descent reader over the three fixed formats.
#include "wire/http_date.hpp"

#include <array>

namespace gpustream::transport {
namespace {

constexpr std::array<std::string_view, 12> kHttpDateMonths = {
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
constexpr std::array<std::string_view, 7> kHttpDateDays = {"Mon", "Tue", "Wed", "Thu",
                                                           "Fri", "Sat", "Sun"};
constexpr std::array<std::string_view, 7> kHttpDateLongDays = {
    "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"};

/// A cursor over the text; every reader consumes on success only.
struct DateCursor {
  std::string_view s;

  bool literal(std::string_view l) {
    if (!s.starts_with(l)) return false;
    s.remove_prefix(l.size());
    return true;
  }
  /// Exactly `n` digits (n <= 4).
  std::optional<int> digits(std::size_t n) {
    if (s.size() < n) return std::nullopt;
    int v = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const char c = s[i];
      if (c < '0' || c > '9') return std::nullopt;
      v = v * 10 + (c - '0');
    }
    s.remove_prefix(n);
    return v;
  }
  template <std::size_t N>
  std::optional<int> name(const std::array<std::string_view, N>& names) {
    for (std::size_t i = 0; i < N; ++i)
      if (literal(names[i])) return static_cast<int>(i);
    return std::nullopt;
  }
};

/// Days since 1970-01-01 of a proleptic Gregorian date (the civil-from-days inverse).
std::int64_t days_from_civil(std::int64_t y, int m, int d) {
  y -= m <= 2 ? 1 : 0;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = y - era * 400;
  const auto doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const auto doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

bool leap(int y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

std::optional<std::int64_t> seconds_of(int year, int month0, int day, int h, int min, int sec) {
  static constexpr std::array<int, 12> kLengths = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (year < 1970 || month0 < 0 || month0 > 11 || day < 1) return std::nullopt;
  const int length = kLengths[static_cast<std::size_t>(month0)] + (month0 == 1 && leap(year));
  if (day > length || h > 23 || min > 59 || sec > 60) return std::nullopt;  // 60: a leap second
  return days_from_civil(year, month0 + 1, day) * 86400 + h * 3600 + min * 60 + sec;
}

/// "HH:MM:SS"
bool time_of_day(DateCursor& c, int& h, int& m, int& s) {
  const auto hh = c.digits(2);
  if (!hh || !c.literal(":")) return false;
  const auto mm = c.digits(2);
  if (!mm || !c.literal(":")) return false;
  const auto ss = c.digits(2);
  if (!ss) return false;
  h = *hh;
  m = *mm;
  s = *ss;
  return true;
}

std::optional<std::int64_t> imf_fixdate(DateCursor c) {
  // Sun, 06 Nov 1994 08:49:37 GMT
  if (!c.name(kHttpDateDays) || !c.literal(", ")) return std::nullopt;
  const auto day = c.digits(2);
  if (!day || !c.literal(" ")) return std::nullopt;
  const auto month = c.name(kHttpDateMonths);
  if (!month || !c.literal(" ")) return std::nullopt;
  const auto year = c.digits(4);
  int h = 0, m = 0, s = 0;
  if (!year || !c.literal(" ") || !time_of_day(c, h, m, s) || !c.literal(" GMT") || !c.s.empty())
    return std::nullopt;
  return seconds_of(*year, *month, *day, h, m, s);
}

std::optional<std::int64_t> rfc850_date(DateCursor c) {
  // Sunday, 06-Nov-94 08:49:37 GMT
  if (!c.name(kHttpDateLongDays) || !c.literal(", ")) return std::nullopt;
  const auto day = c.digits(2);
  if (!day || !c.literal("-")) return std::nullopt;
  const auto month = c.name(kHttpDateMonths);
  if (!month || !c.literal("-")) return std::nullopt;
  const auto yy = c.digits(2);
  int h = 0, m = 0, s = 0;
  if (!yy || !c.literal(" ") || !time_of_day(c, h, m, s) || !c.literal(" GMT") || !c.s.empty())
    return std::nullopt;
  return seconds_of(*yy < 70 ? 2000 + *yy : 1900 + *yy, *month, *day, h, m, s);
}

std::optional<std::int64_t> asctime_date(DateCursor c) {
  // Sun Nov  6 08:49:37 1994
  if (!c.name(kHttpDateDays) || !c.literal(" ")) return std::nullopt;
  const auto month = c.name(kHttpDateMonths);
  if (!month || !c.literal(" ")) return std::nullopt;
  std::optional<int> day;
  if (c.literal(" "))
    day = c.digits(1);
  else
    day = c.digits(2);
  int h = 0, m = 0, s = 0;
  if (!day || !c.literal(" ") || !time_of_day(c, h, m, s) || !c.literal(" ")) return std::nullopt;
  const auto year = c.digits(4);
  if (!year || !c.s.empty()) return std::nullopt;
  return seconds_of(*year, *month, *day, h, m, s);
}

}  // namespace

std::optional<std::int64_t> parse_http_date(std::string_view text) {
  if (text.size() > 64) return std::nullopt;
  if (auto v = imf_fixdate(DateCursor{text})) return v;
  if (auto v = rfc850_date(DateCursor{text})) return v;
  return asctime_date(DateCursor{text});
}

}  // namespace gpustream::transport
