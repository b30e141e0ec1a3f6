// The text encoder: writes gpustream/1 text straight into a std::string, with no intermediate
// document, walking the schema description (gpustream/detail/schema.hpp) with the one JSON text
// writer (json_writer.hpp). Also that writer's form of any boost::json::value, for the
// transport's messages (gpustream/detail/json_text.hpp).
#include <algorithm>
#include <array>
#include <boost/json/value.hpp>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "gpustream/detail/json_text.hpp"
#include "gpustream/detail/schema.hpp"
#include "gpustream/json.hpp"
#include "json_lossy.hpp"
#include "json_writer.hpp"

namespace gpustream {
namespace {
namespace text {

using detail::JsonWriter;
using detail::note_lossy;
using detail::writable;
namespace schema = detail::schema;

struct Ctx {
  JsonWriter& w;
  const std::vector<Metric>* fields;  // a projection's metrics; null: every metric
};

// How a value of each type is written (`where` names it in a logged lossy write).
void value(Ctx& c, const std::string& s, std::string_view where);
void value(Ctx& c, bool b, std::string_view where);
template <typename E>
requires std::is_enum_v<E>
void value(Ctx& c, E e, std::string_view where);
template <typename I>
requires(std::is_integral_v<I> && !std::is_same_v<I, bool>) void value(Ctx& c, I i,
                                                                       std::string_view where);
void value(Ctx& c, const std::optional<double>& v, std::string_view where);
template <typename T>
void value(Ctx& c, const std::optional<T>& v, std::string_view where);
template <typename T>
void value(Ctx& c, const SharedOptional<T>& v, std::string_view where);
template <typename T>
void value(Ctx& c, const std::vector<T>& v, std::string_view where);
void value(Ctx& c, const std::vector<PowerSample>& v, std::string_view where);
void value(Ctx& c, const std::map<std::string, std::string>& m, std::string_view where);
void value(Ctx& c, const std::map<std::string, double>& m, std::string_view where);
template <typename S>
requires schema::kDescribed<S>
void value(Ctx& c, const S& s, std::string_view where);

/// `"name":value`, after a ',' unless it is the object's first member.
template <typename T>
void member(Ctx& c, std::string_view name, const T& v, std::string_view where, bool& first) {
  if (!first) c.w.raw(',');
  first = false;
  c.w.key(name);
  value(c, v, where);
}

/// An engine's Reading: `"<name>":value-or-null,"source":...` and `"absent":reason` when absent.
void member(Ctx& c, std::string_view name, const Reading& reading, std::string_view where,
            bool& first) {
  const Reading r = writable(reading, where);
  if (!first) c.w.raw(',');
  first = false;
  c.w.key(name);
  if (r.has_value())
    c.w.number(r.value());
  else
    c.w.raw("null");
  c.w.raw(',');
  c.w.key("source");
  c.w.plain_string(to_string(r.source()));
  if (!r.has_value()) {
    c.w.raw(',');
    c.w.key("absent");
    c.w.plain_string(to_string(r.reason()));
  }
}

/// A device's metrics: one object per aspect, "metrics" (values), "sources", "absent" (reasons)
/// and "absent_sources" (sources of absent metrics, left out when none has one).
void member(Ctx& c, std::string_view, const MetricSet& set, std::string_view where, bool& first) {
  std::array<Reading, kMetricCount> r;
  std::array<bool, kMetricCount> kept{};
  for (std::size_t i = 0; i < kMetricCount; ++i) {
    const auto m = static_cast<Metric>(i);
    r[i] = writable(set[m], where);
    kept[i] = !c.fields || std::binary_search(c.fields->begin(), c.fields->end(), m);
  }
  JsonWriter& w = c.w;
  // `always`: write {} when no metric qualifies (otherwise the key is left out).
  const auto object = [&](std::string_view name, bool always, auto wanted, auto write_one) {
    bool opened = false;
    for (std::size_t i = 0; i < kMetricCount; ++i) {
      if (!kept[i] || !wanted(r[i])) continue;
      if (!opened) {
        if (!first) w.raw(',');
        first = false;
        w.key(name);
        w.raw('{');
        opened = true;
      } else {
        w.raw(',');
      }
      w.key(to_string(static_cast<Metric>(i)));
      write_one(static_cast<Metric>(i), r[i]);
    }
    if (opened) {
      w.raw('}');
    } else if (always) {
      if (!first) w.raw(',');
      first = false;
      w.key(name);
      w.raw("{}");
    }
  };
  const auto present = [](const Reading& x) { return x.has_value(); };
  const auto absent = [](const Reading& x) { return !x.has_value(); };
  const auto source = [&](Metric, const Reading& x) { w.plain_string(to_string(x.source())); };
  object("metrics", true, present,
         [&](Metric m, const Reading& x) { w.metric_value(m, x.value()); });
  object("sources", true, present, source);
  object("absent", true, absent,
         [&](Metric, const Reading& x) { w.plain_string(to_string(x.reason())); });
  object(
      "absent_sources", false,
      [](const Reading& x) { return !x.has_value() && x.source() != Source::none; }, source);
}

/// The members of a described struct, as its schema says.
template <typename S>
void members(Ctx& c, const S& s, bool first) {
  const std::string_view where = schema::Schema<S>::where(s);
  schema::for_each_field<S>([&](const auto& f) {
    if (f.unless && f.unless(s)) return;
    const auto& v = s.*f.member;
    if (f.emit == schema::Emit::if_set && schema::is_unset(v)) return;
    member(c, f.name, v, where, first);
  });
}

void value(Ctx& c, const std::string& s, std::string_view) { c.w.string(s); }

void value(Ctx& c, bool b, std::string_view) { c.w.boolean(b); }

template <typename E>
requires std::is_enum_v<E>
void value(Ctx& c, E e, std::string_view) { c.w.plain_string(to_string(e)); }

template <typename I>
requires(std::is_integral_v<I> && !std::is_same_v<I, bool>) void value(Ctx& c, I i,
                                                                       std::string_view) {
  c.w.integer(i);
}

void value(Ctx& c, const std::optional<double>& v, std::string_view where) {
  if (v && std::isfinite(*v)) return c.w.number(*v);
  if (v) note_lossy("non-finite number", where);
  c.w.raw("null");
}

template <typename T>
void value(Ctx& c, const std::optional<T>& v, std::string_view where) {
  if (v)
    value(c, *v, where);
  else
    c.w.raw("null");
}

template <typename T>
void value(Ctx& c, const SharedOptional<T>& v, std::string_view where) {
  if (v)
    value(c, *v, where);
  else
    c.w.raw("null");
}

template <typename T>
void value(Ctx& c, const std::vector<T>& v, std::string_view where) {
  c.w.raw('[');
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) c.w.raw(',');
    value(c, v[i], where);
  }
  c.w.raw(']');
}

/// Power samples as [monotonic_ns, watts] pairs; one whose watts JSON cannot carry is left out.
void value(Ctx& c, const std::vector<PowerSample>& v, std::string_view where) {
  c.w.raw('[');
  bool first = true;
  for (const auto& p : v) {
    if (!std::isfinite(p.watts)) {
      note_lossy("non-finite power sample", where);
      continue;
    }
    if (!first) c.w.raw(',');
    first = false;
    c.w.raw('[');
    c.w.integer(p.monotonic_ns);
    c.w.raw(',');
    c.w.number(p.watts);
    c.w.raw(']');
  }
  c.w.raw(']');
}

/// A map's members; `skip(value)` leaves one out. Under a projection, a key that two keys not
/// UTF-8 repair to is written once, as the document form holds it.
template <typename V, typename Skip, typename Write>
void map_members(Ctx& c, const std::map<std::string, V>& m, Skip skip, Write write_value) {
  std::set<std::string> seen;
  const bool dedupe = c.fields && std::any_of(m.begin(), m.end(), [](const auto& kv) {
                        return !is_valid_utf8(kv.first);
                      });
  c.w.raw('{');
  bool first = true;
  for (const auto& [k, v] : m) {
    if (skip(k, v)) continue;
    if (dedupe && !seen.insert(is_valid_utf8(k) ? k : to_valid_utf8(k)).second) continue;
    if (!first) c.w.raw(',');
    first = false;
    c.w.string(k);
    c.w.raw(':');
    write_value(v);
  }
  c.w.raw('}');
}

void value(Ctx& c, const std::map<std::string, std::string>& m, std::string_view) {
  map_members(
      c, m, [](const std::string&, const std::string&) { return false; },
      [&](const std::string& v) { c.w.string(v); });
}

/// Host figures: a non-finite one is left out.
void value(Ctx& c, const std::map<std::string, double>& m, std::string_view) {
  map_members(
      c, m,
      [](const std::string& k, double v) {
        if (std::isfinite(v)) return false;
        note_lossy("non-finite host metric", k);
        return true;
      },
      [&](double v) { c.w.number(v); });
}

template <typename S>
requires schema::kDescribed<S>
void value(Ctx& c, const S& s, std::string_view) {
  c.w.raw('{');
  members(c, s, true);
  c.w.raw('}');
}

std::size_t size_hint(const GpuSnapshot& s) {
  std::size_t n = 256 + s.errors.size() * 128;
  for (const auto& d : s.devices)
    n += 1200 + d.processes.size() * 220 + d.engines.size() * 80 + d.power_samples.size() * 32;
  if (s.host) n += 400 + s.host->processes.size() * 80;
  return n;
}

void json_value(JsonWriter& w, const boost::json::value& v) {
  namespace json = boost::json;
  switch (v.kind()) {
    case json::kind::null:
      return w.raw("null");
    case json::kind::bool_:
      return w.boolean(v.get_bool());
    case json::kind::int64:
      return w.integer(v.get_int64());
    case json::kind::uint64:
      return w.integer(v.get_uint64());
    case json::kind::double_:
      if (!std::isfinite(v.get_double())) return w.raw("null");
      return w.number(v.get_double());
    case json::kind::string:
      return w.string({v.get_string().data(), v.get_string().size()}, false);
    case json::kind::array: {
      w.raw('[');
      bool first = true;
      for (const auto& e : v.get_array()) {
        if (!first) w.raw(',');
        first = false;
        json_value(w, e);
      }
      return w.raw(']');
    }
    case json::kind::object: {
      w.raw('{');
      bool first = true;
      for (const auto& kv : v.get_object()) {
        if (!first) w.raw(',');
        first = false;
        w.string({kv.key().data(), kv.key().size()}, false);
        w.raw(':');
        json_value(w, kv.value());
      }
      return w.raw('}');
    }
  }
}

}  // namespace text
}  // namespace

void detail::append_snapshot_json(std::string& out, const GpuSnapshot& s, const SnapshotText& how) {
  JsonWriter w(out, text::size_hint(s));
  text::Ctx c{w, how.fields};
  w.raw('{');
  if (!how.type.empty()) {
    w.key("type");
    w.string(how.type);
    w.raw(',');
  }
  w.key("schema");
  w.plain_string(kSchema);
  text::members(c, s, false);
  w.raw('}');
}

void detail::append_json_value(std::string& out, const boost::json::value& v) {
  JsonWriter w(out, 256);
  text::json_value(w, v);
}

void append_json(std::string& out, const GpuSnapshot& s) {
  detail::append_snapshot_json(out, s, {});
}

void append_json(std::string& out, const DeviceSample& device) {
  detail::JsonWriter w(out, 2048);
  text::Ctx c{w, nullptr};
  text::value(c, device, {});
}

void append_json(std::string& out, const HostSample& host) {
  detail::JsonWriter w(out, 1024);
  text::Ctx c{w, nullptr};
  text::value(c, host, {});
}

std::string to_json_string(const GpuSnapshot& snapshot) {
  std::string out;
  append_json(out, snapshot);
  return out;
}

}  // namespace gpustream
