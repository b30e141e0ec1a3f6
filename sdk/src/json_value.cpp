// The document encoder: builds a boost::json::value with the same keys, order and rules as the
// text encoder (json_write.cpp), both walking the schema description
// (gpustream/detail/schema.hpp). Slower than the text encoder (one allocation per node); use it
// when a caller wants to edit or embed the document.
#include <array>
#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/string.hpp>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "gpustream/detail/schema.hpp"
#include "gpustream/json.hpp"
#include "gpustream/log.hpp"
#include "json_lossy.hpp"
#include "json_writer.hpp"

namespace gpustream {

void detail::note_lossy(std::string_view what, std::string_view where) {
  static LogOnce once;
  if (once.first(std::string(what)))
    logger()->warn("json: {} (first seen at {}); written in a JSON-safe form", what, where);
}

Reading detail::writable(const Reading& r, std::string_view where) {
  if (r.has_value() && !std::isfinite(r.value())) {
    note_lossy("non-finite metric value", where);
    return Reading::missing(Absence::unsupported, r.source());
  }
  return r;
}

namespace {
namespace document {

namespace json = boost::json;
namespace schema = detail::schema;

using detail::note_lossy;
using detail::writable;

json::string_view sv(std::string_view s) noexcept { return {s.data(), s.size()}; }

json::value name(std::string_view enum_name) { return json::value(sv(enum_name)); }

/// A map key as the document holds it: valid UTF-8.
std::string valid_key(const std::string& k) { return is_valid_utf8(k) ? k : to_valid_utf8(k); }

// The value of each type (`where` names it in a logged lossy write).
json::value value(const std::string& s, std::string_view where);
json::value value(bool b, std::string_view where);
template <typename E>
requires std::is_enum_v<E> json::value value(E e, std::string_view where);
template <typename I>
requires(std::is_integral_v<I> && !std::is_same_v<I, bool>) json::value
    value(I i, std::string_view where);
json::value value(const std::optional<double>& v, std::string_view where);
template <typename T>
json::value value(const std::optional<T>& v, std::string_view where);
template <typename T>
json::value value(const SharedOptional<T>& v, std::string_view where);
template <typename T>
json::value value(const std::vector<T>& v, std::string_view where);
json::value value(const std::vector<PowerSample>& v, std::string_view where);
json::value value(const std::map<std::string, std::string>& m, std::string_view where);
json::value value(const std::map<std::string, double>& m, std::string_view where);
template <typename S>
requires schema::kDescribed<S> json::value value(const S& s, std::string_view where);

template <typename T>
void member(json::object& o, std::string_view key, const T& v, std::string_view where) {
  o.emplace(sv(key), value(v, where));
}

/// An engine's Reading: `<key>` (value or null), "source", and "absent" when absent.
void member(json::object& o, std::string_view key, const Reading& reading, std::string_view where) {
  const Reading r = writable(reading, where);
  o.emplace(sv(key), r.has_value() ? json::value(r.value()) : json::value());
  o.emplace("source", name(to_string(r.source())));
  if (!r.has_value()) o.emplace("absent", name(to_string(r.reason())));
}

/// A device's metrics: "metrics", "sources", "absent" and, when one names a source,
/// "absent_sources".
void member(json::object& o, std::string_view, const MetricSet& set, std::string_view where) {
  json::object metrics, sources, absent, absent_sources;
  metrics.reserve(kMetricCount);
  sources.reserve(kMetricCount);
  for (std::size_t i = 0; i < kMetricCount; ++i) {
    const auto m = static_cast<Metric>(i);
    const Reading r = writable(set[m], where);
    const auto key = sv(to_string(m));
    if (r.has_value()) {
      const double v = r.value();
      // A whole, non-negative byte count as an integer, anything else as a double.
      if (detail::JsonWriter::is_bytes_metric(m) && v >= 0 && v < 18446744073709551616.0 &&
          v == std::floor(v))
        metrics.emplace(key, static_cast<std::uint64_t>(v));
      else
        metrics.emplace(key, v);
      sources.emplace(key, name(to_string(r.source())));
    } else {
      absent.emplace(key, name(to_string(r.reason())));
      if (r.source() != Source::none) absent_sources.emplace(key, name(to_string(r.source())));
    }
  }
  o.emplace("metrics", std::move(metrics));
  o.emplace("sources", std::move(sources));
  o.emplace("absent", std::move(absent));
  if (!absent_sources.empty()) o.emplace("absent_sources", std::move(absent_sources));
}

/// The members of a described struct, as its schema says.
template <typename S>
void members(json::object& o, const S& s) {
  const std::string_view where = schema::Schema<S>::where(s);
  schema::for_each_field<S>([&](const auto& f) {
    if (f.unless && f.unless(s)) return;
    const auto& v = s.*f.member;
    if (f.emit == schema::Emit::if_set && schema::is_unset(v)) return;
    member(o, f.name, v, where);
  });
}

json::value value(const std::string& s, std::string_view) {
  if (is_valid_utf8(s)) return json::value(sv(s));
  const std::string valid = to_valid_utf8(s);
  note_lossy("string that is not UTF-8", valid);
  return json::value(sv(valid));
}

json::value value(bool b, std::string_view) { return json::value(b); }

template <typename E>
requires std::is_enum_v<E> json::value value(E e, std::string_view) { return name(to_string(e)); }

template <typename I>
requires(std::is_integral_v<I> && !std::is_same_v<I, bool>) json::value
    value(I i, std::string_view) {
  return json::value(i);
}

json::value value(const std::optional<double>& v, std::string_view where) {
  if (v && std::isfinite(*v)) return json::value(*v);
  if (v) note_lossy("non-finite number", where);
  return json::value(nullptr);
}

template <typename T>
json::value value(const std::optional<T>& v, std::string_view where) {
  return v ? value(*v, where) : json::value(nullptr);
}

template <typename T>
json::value value(const SharedOptional<T>& v, std::string_view where) {
  return v ? value(*v, where) : json::value(nullptr);
}

template <typename T>
json::value value(const std::vector<T>& v, std::string_view where) {
  json::array a;
  a.reserve(v.size());
  for (const auto& e : v) a.emplace_back(value(e, where));
  return a;
}

/// Power samples as [monotonic_ns, watts] pairs; one whose watts JSON cannot carry is left out.
json::value value(const std::vector<PowerSample>& v, std::string_view where) {
  json::array a;
  a.reserve(v.size());
  for (const auto& p : v) {
    if (!std::isfinite(p.watts)) {
      note_lossy("non-finite power sample", where);
      continue;
    }
    json::array pair;
    pair.reserve(2);
    pair.emplace_back(p.monotonic_ns);
    pair.emplace_back(p.watts);
    a.emplace_back(std::move(pair));
  }
  return a;
}

json::value value(const std::map<std::string, std::string>& m, std::string_view where) {
  json::object o;
  o.reserve(m.size());
  for (const auto& [k, v] : m) o.emplace(sv(valid_key(k)), value(v, where));
  return o;
}

/// Host figures: a non-finite one is left out.
json::value value(const std::map<std::string, double>& m, std::string_view) {
  json::object o;
  o.reserve(m.size());
  for (const auto& [k, v] : m) {
    if (!std::isfinite(v)) {
      note_lossy("non-finite host metric", k);
      continue;
    }
    o.emplace(sv(valid_key(k)), v);
  }
  return o;
}

template <typename S>
requires schema::kDescribed<S> json::value value(const S& s, std::string_view) {
  json::object o;
  o.reserve(std::tuple_size_v<std::decay_t<decltype(schema::Schema<S>::fields)>> + 3);
  members(o, s);
  return o;
}

}  // namespace document
}  // namespace

boost::json::value to_json(const DeviceSample& d) { return document::value(d, {}); }

boost::json::value to_json(const HostSample& h) { return document::value(h, {}); }

boost::json::value to_json(const GpuSnapshot& s) {
  boost::json::object o;
  o.reserve(10);
  o.emplace("schema", document::sv(kSchema));
  document::members(o, s);
  return o;
}

}  // namespace gpustream
