// HTTP-date (RFC 9110 §5.6.7): the three forms a recipient must accept, to seconds since the
// Unix epoch. Used for Retry-After given as a date rather than delta-seconds.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace gpustream::transport {

/// Seconds since 1970-01-01T00:00:00Z of an IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT"), an
/// obsolete RFC 850 date ("Sunday, 06-Nov-94 08:49:37 GMT"; a two-digit year is taken as the
/// one closest to 1970..2069) or an asctime date ("Sun Nov  6 08:49:37 1994"). Anything else,
/// or a value out of range (month 13, second 61, year before 1970): nullopt. The weekday's name
/// is checked for spelling, not against the date.
std::optional<std::int64_t> parse_http_date(std::string_view text);

}  // namespace gpustream::transport
