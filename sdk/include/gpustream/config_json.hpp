// gpustream/config_json.hpp — the JSON form of a Config file (opt-in: it needs Boost.JSON; the
// embedding headers, config.hpp included, do not).
//
// A config document is one JSON object: the SDK's own keys (probes, simulate, interval_seconds,
// ...; docs/operations.md lists them) and named sections of settings for the parts outside the
// SDK (a probe's, the CLI's "serve"). A section is an object whose values are strings, numbers,
// true/false or arrays of those (SettingValue); anything else is a ConfigError naming
// "<section>.<key>".
//
// Thread safety: pure functions.
#pragma once

#include <boost/json/fwd.hpp>

#include "gpustream/config.hpp"

namespace gpustream {

/// Parses a JSON config document on top of `base`. Throws ConfigError naming the bad key.
/// `sections`: see ConfigSections in config.hpp.
Config config_from_json(const boost::json::value& v, Config base = {},
                        const ConfigSections& sections = {});

/// The JSON view of settings: {"section": {"key": value, ...}, ...}.
boost::json::object to_json(const ProbeSettings& settings);

/// One section's JSON object as settings, for `section_name`. Throws ConfigError naming
/// "<section>.<key>" for a value that is not a string, number, true/false or an array of them.
ProbeSettings::Section settings_section_from_json(const boost::json::object& section,
                                                  std::string_view section_name);

}  // namespace gpustream
