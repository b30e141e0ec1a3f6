#include "gpustream/config.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/stream_parser.hpp>
#include <boost/json/value.hpp>

#include "gpustream/config_json.hpp"

#include "gpustream/logging.hpp"

namespace gpustream {
namespace {

constexpr std::int64_t kMinHistoryBytes = std::int64_t{64} << 10;
constexpr std::int64_t kMaxHistoryBytes = std::int64_t{1} << 40;
// The largest config file load_config reads (a real one is a few KiB): a larger file, or one that
// never ends (/dev/zero), is refused after this many bytes and one more (docs/configuration.md).
constexpr std::size_t kMaxConfigFileBytes = std::size_t{1} << 20;

[[noreturn]] void fail(const std::string& key, const std::string& what) {
  throw ConfigError("config key '" + key + "': " + what);
}

std::int64_t as_int(const boost::json::value& v, const std::string& key) {
  if (v.is_int64()) return v.get_int64();
  if (v.is_uint64() && v.get_uint64() <= static_cast<std::uint64_t>(INT64_MAX))
    return static_cast<std::int64_t>(v.get_uint64());
  // A whole double within int64 (casting one outside, or NaN, to an integer is undefined).
  if (v.is_double()) {
    const double d = v.get_double();
    if (d >= -9223372036854775808.0 && d < 9223372036854775808.0 && std::floor(d) == d)
      return static_cast<std::int64_t>(d);
  }
  fail(key, "expected an integer");
}

std::chrono::milliseconds as_ms_from_seconds(const boost::json::value& v, const std::string& key) {
  double s = 0;
  if (v.is_double())
    s = v.get_double();
  else if (v.is_int64())
    s = static_cast<double>(v.get_int64());
  else if (v.is_uint64())
    s = static_cast<double>(v.get_uint64());
  else
    fail(key, "expected a number of seconds");
  if (!(s > 0) || s > 86400) fail(key, "expected seconds in (0, 86400]");
  return std::chrono::milliseconds(std::llround(s * 1000.0));
}

std::string as_string(const boost::json::value& v, const std::string& key) {
  if (!v.is_string()) fail(key, "expected a string");
  return std::string(v.get_string());
}

bool as_bool(const boost::json::value& v, const std::string& key) {
  if (!v.is_bool()) fail(key, "expected true or false");
  return v.get_bool();
}

bool is_section(const ConfigSections& sections, const std::string& key) {
  return std::find(sections.begin(), sections.end(), key) != sections.end();
}

std::string unknown_key_message(const ConfigSections& sections) {
  std::string out =
      "unknown key (the SDK's keys: probes, simulate, simulate_when_no_gpu, seed, "
      "interval_seconds, probe_intervals_seconds, sample_timeout_seconds, "
      "backoff_initial_seconds, backoff_max_seconds, sysfs_root, procfs_root, "
      "devfs_root, watch_pids, history, history_max_bytes, library_session, log_level, "
      "log_format";
  if (sections.empty()) return out + "; or a section of settings, which is an object)";
  out += "; sections: ";
  for (std::size_t i = 0; i < sections.size(); ++i) out += (i ? ", " : "") + sections[i];
  return out + ")";
}

std::optional<SettingValue::Scalar> scalar_from_json(const boost::json::value& v) {
  if (v.is_string()) return std::string(v.get_string());
  if (v.is_bool()) return v.get_bool();
  if (v.is_int64()) return v.get_int64();
  if (v.is_uint64()) {
    if (v.get_uint64() <= static_cast<std::uint64_t>(INT64_MAX))
      return static_cast<std::int64_t>(v.get_uint64());
    return static_cast<double>(v.get_uint64());
  }
  if (v.is_double()) return v.get_double();
  return std::nullopt;
}

boost::json::value scalar_to_json(const SettingValue::Scalar& s) {
  return std::visit([](const auto& x) { return boost::json::value(x); }, s);
}

// Where the parser stopped, as an editor shows it: line and column from 1, the column in
// characters (UTF-8 continuation bytes are not counted).
std::string position_of(std::string_view text, std::size_t offset) {
  offset = std::min(offset, text.size());
  std::size_t line = 1, column = 1;
  for (std::size_t i = 0; i < offset; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '\n') {
      ++line;
      column = 1;
    } else if ((c & 0xC0) != 0x80) {
      ++column;
    }
  }
  return std::to_string(line) + ":" + std::to_string(column);
}

// What the parser found at `offset`: a printable ASCII character quoted, any other byte in hex
// (the message goes to a terminal and a log line as it is).
std::string found_at(std::string_view text, std::size_t offset) {
  if (offset >= text.size()) return "the end of the file";
  const auto c = static_cast<unsigned char>(text[offset]);
  if (c >= 0x20 && c < 0x7F) return std::string("'") + static_cast<char>(c) + "'";
  static constexpr char kHex[] = "0123456789abcdef";
  return std::string("byte 0x") + kHex[c >> 4] + kHex[c & 0xF];
}

bool is_json_blank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// Parses a config file's text; a syntax error names the file, line and column:
// "config.json:12:5: not valid JSON: syntax error at '\"'".
boost::json::value parse_config_text(std::string_view text, const std::string& name) {
  boost::json::stream_parser parser;
  boost::system::error_code ec;
  std::size_t at = parser.write_some(text.data(), text.size(), ec);
  std::string what;
  if (ec) {
    what = ec.message() + " at " + found_at(text, at);
  } else if (at < text.size()) {  // a whole value, then something other than blanks?
    while (at < text.size() && is_json_blank(text[at])) ++at;
    if (at < text.size()) what = "extra data after the top-level value: " + found_at(text, at);
  }
  if (what.empty() && !parser.done()) {
    at = text.size();
    what = "unexpected end of the file (incomplete JSON)";
  }
  if (what.empty()) return parser.release();
  throw ConfigError(name + ":" + position_of(text, at) + ": not valid JSON: " + what);
}

}  // namespace

ProbeSettings::Section settings_section_from_json(const boost::json::object& section,
                                                  std::string_view section_name) {
  ProbeSettings::Section out;
  for (const auto& [k, v] : section) {
    const std::string key(k);  // a named copy: a lambda cannot capture a structured binding
    const std::string name = std::string(section_name) + "." + key;
    if (auto s = scalar_from_json(v)) {
      std::visit([&](auto& x) { out.insert_or_assign(key, SettingValue(std::move(x))); }, *s);
    } else if (v.is_array()) {
      SettingValue::List list;
      for (const auto& e : v.get_array()) {
        auto es = scalar_from_json(e);
        if (!es) fail(name, "expected an array of strings, numbers or true/false");
        list.push_back(std::move(*es));
      }
      out.insert_or_assign(std::string(k), SettingValue(std::move(list)));
    } else {
      fail(name, "expected a string, a number, true/false or an array of them");
    }
  }
  return out;
}

boost::json::object to_json(const ProbeSettings& settings) {
  boost::json::object out;
  for (const auto& [name, section] : settings) {
    boost::json::object o;
    for (const auto& [key, value] : section) {
      if (const auto* list = value.if_list()) {
        boost::json::array a;
        for (const auto& e : *list) a.push_back(scalar_to_json(e));
        o[key] = std::move(a);
      } else if (const auto* str = value.if_string()) {
        o[key] = *str;
      } else if (const auto* i = value.if_int()) {
        o[key] = *i;
      } else if (const auto* d = value.if_double()) {
        o[key] = *d;
      } else if (const auto* b = value.if_bool()) {
        o[key] = *b;
      }
    }
    out[name] = std::move(o);
  }
  return out;
}

Config config_from_json(const boost::json::value& v, Config c, const ConfigSections& sections) {
  if (!v.is_object()) throw ConfigError("config: expected a JSON object at the top level");
  for (const auto& [k, val] : v.get_object()) {
    const std::string key(k);
    if (key == "probes") {
      if (!val.is_array()) fail(key, "expected an array of probe names");
      c.probes.clear();
      for (const auto& p : val.get_array()) c.probes.push_back(as_string(p, key));
    } else if (key == "simulate") {
      const auto n = as_int(val, key);
      if (n < 0 || n > kMaxSimulatedGpus)
        fail(key,
             "expected 0.." + std::to_string(kMaxSimulatedGpus) + ", got " + std::to_string(n));
      c.simulate = static_cast<int>(n);
    } else if (key == "simulate_when_no_gpu") {
      c.simulate_when_no_gpu = as_bool(val, key);
    } else if (key == "seed") {
      c.seed = static_cast<std::uint64_t>(as_int(val, key));
    } else if (key == "interval_seconds") {
      c.interval = as_ms_from_seconds(val, key);
    } else if (key == "probe_intervals_seconds") {
      if (!val.is_object()) fail(key, "expected an object {probe: seconds}");
      for (const auto& [pk, pv] : val.get_object())
        c.probe_intervals[std::string(pk)] = as_ms_from_seconds(pv, key + "." + std::string(pk));
    } else if (key == "sample_timeout_seconds") {
      c.sample_timeout = as_ms_from_seconds(val, key);
    } else if (key == "backoff_initial_seconds") {
      c.backoff_initial = as_ms_from_seconds(val, key);
    } else if (key == "backoff_max_seconds") {
      c.backoff_max = as_ms_from_seconds(val, key);
    } else if (key == "sysfs_root") {
      c.paths.sysfs_root = as_string(val, key);
    } else if (key == "procfs_root") {
      c.paths.procfs_root = as_string(val, key);
    } else if (key == "devfs_root") {
      c.paths.devfs_root = as_string(val, key);
    } else if (key == "watch_pids") {
      if (!val.is_array()) fail(key, "expected an array of pids");
      c.watch_pids.clear();
      for (const auto& p : val.get_array()) {
        const auto pid = as_int(p, key);
        if (pid <= 0) fail(key, "pids are positive integers");
        c.watch_pids.push_back(pid);
      }
    } else if (key == "history") {
      const auto n = as_int(val, key);
      if (n < 1 || n > 1'000'000) fail(key, "expected 1..1000000");
      c.history = static_cast<std::size_t>(n);
    } else if (key == "history_max_bytes") {
      const auto n = as_int(val, key);
      if (n < kMinHistoryBytes || n > kMaxHistoryBytes)
        fail(key, "expected 65536..1099511627776 (64 KiB..1 TiB)");
      c.history_max_bytes = static_cast<std::size_t>(n);
    } else if (key == "library_session") {
      const auto mode = parse_library_session_mode(as_string(val, key));
      if (!mode) fail(key, "expected \"persistent\" or \"lazy\"");
      c.library_session = *mode;
    } else if (key == "fatal_event_window_seconds") {
      const auto n = as_int(val, key);
      if (n < 0 || n > 604800) fail(key, "expected 0..604800 seconds (0: no health rule)");
      c.fatal_event_window = std::chrono::seconds{n};
    } else if (key == "log_level") {
      c.log_level = as_string(val, key);
      if (!log_level_from_string(c.log_level))
        fail(key, "expected trace, debug, info, warn, error, critical or off");
    } else if (key == "log_format") {
      c.log_format = as_string(val, key);
      if (c.log_format != "text" && c.log_format != "json") fail(key, "expected text or json");
    } else if (sections.empty() ? val.is_object() : is_section(sections, key)) {
      if (!val.is_object()) fail(key, "expected an object of settings");
      c.probe_settings[key] = settings_section_from_json(val.get_object(), key);
    } else {
      fail(key, unknown_key_message(sections));
    }
  }
  return c;
}

void validate_config(const Config& c) {
  if (c.simulate < 0 || c.simulate > kMaxSimulatedGpus)
    fail("simulate", "expected 0.." + std::to_string(kMaxSimulatedGpus) + ", got " +
                         std::to_string(c.simulate));
  const auto positive = [](const std::string& key, std::chrono::milliseconds d) {
    if (d.count() <= 0)
      fail(key, "expected a positive duration, got " + std::to_string(d.count()) + " ms");
  };
  positive("interval_seconds", c.interval);
  for (const auto& [probe, d] : c.probe_intervals) positive("probe_intervals_seconds." + probe, d);
  if (c.sample_timeout.count() < 0)
    fail("sample_timeout_seconds", "expected 0 (none) or a positive duration");
  positive("backoff_initial_seconds", c.backoff_initial);
  positive("backoff_max_seconds", c.backoff_max);
  if (c.history < 1) fail("history", "expected 1..1000000, got 0");
  if (c.fatal_event_window.count() < 0 || c.fatal_event_window.count() > 604800)
    fail("fatal_event_window_seconds",
         "expected 0..604800 seconds, got " + std::to_string(c.fatal_event_window.count()));
  if (c.history_max_bytes < static_cast<std::size_t>(kMinHistoryBytes) ||
      c.history_max_bytes > static_cast<std::size_t>(kMaxHistoryBytes))
    fail("history_max_bytes", "expected 65536..1099511627776 (64 KiB..1 TiB), got " +
                                  std::to_string(c.history_max_bytes));
  for (const auto pid : c.watch_pids)
    if (pid <= 0) fail("watch_pids", "pids are positive integers, got " + std::to_string(pid));
  if (!c.log_level.empty() && !log_level_from_string(c.log_level))
    fail("log_level", "unknown level '" + c.log_level +
                          "' (expected trace, debug, info, warn, error, critical or off)");
  if (!c.log_format.empty() && c.log_format != "text" && c.log_format != "json")
    fail("log_format", "unknown format '" + c.log_format + "' (expected text or json)");
}

Config load_config(const std::string& path, Config base, const ConfigSections& sections) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError("cannot open config file '" + path + "'");
  // Bounded: at most kMaxConfigFileBytes + 1 bytes are read, whatever the path is.
  std::string text(kMaxConfigFileBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  if (text.size() > kMaxConfigFileBytes)
    throw ConfigError("config file '" + path + "' is larger than " +
                      std::to_string(kMaxConfigFileBytes) + " bytes: not a gpustream config file");
  auto v = parse_config_text(text, path);
  try {
    return config_from_json(v, std::move(base), sections);
  } catch (const ConfigError& e) {
    throw ConfigError("config file '" + path + "': " + e.what());
  }
}

}  // namespace gpustream
