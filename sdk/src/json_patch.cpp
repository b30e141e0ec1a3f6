// The patch reader (gpustream/detail/json_patch.hpp): a fleet bus delta's patch read onto a
// snapshot, only the paths it names, with the reader's rules (json_read_rules.hpp) and the
// schema's tables (gpustream/detail/schema.hpp).
#include "gpustream/detail/json_patch.hpp"

#include <array>
#include <boost/json/object.hpp>
#include <charconv>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "gpustream/detail/schema.hpp"
#include "gpustream/json.hpp"
#include "json_read_rules.hpp"

namespace gpustream {
namespace {

// ---- patches (gpustream/detail/json_patch.hpp) ----
//
// Each patch entry is read as the patched document would be: a key is in the document when the
// writer writes it (Schema's Emit and `unless`), a replacement is read with the reader's rules
// for its type, a removed key is missing (required: refused; optional: its default), and a key
// no field has is ignored as the reader ignores it (a nested patch under it is refused: the
// document has no such key).

/// What one patch entry does.
enum class PatchOp : std::uint8_t { replace, remove, nested };

PatchOp patch_op(const json::value& p, const Path& at) {
  if (p.is_null()) return PatchOp::remove;
  if (p.is_object()) return PatchOp::nested;
  if (p.is_array()) {
    if (p.get_array().size() != 1) fail(at, "a patch's replacement holds one value");
    return PatchOp::replace;
  }
  fail(at, "a patch entry is [value], null or an object");
}

const json::value& replacement_of(const json::value& p) { return p.get_array()[0]; }

[[noreturn]] void no_key(const Path& at) {
  fail(at, "the patch names a key the document does not have");
}
[[noreturn]] void patches_scalar(const Path& at) {
  fail(at, "the patch descends into a value that is neither an object nor an array");
}

std::string_view key_of(const json::key_value_pair& kv) {
  return {kv.key().data(), kv.key().size()};
}

std::size_t patch_index(std::string_view k, std::size_t size, const Path& at) {
  std::size_t i = 0;
  const auto r = std::from_chars(k.data(), k.data() + k.size(), i);
  if (k.empty() || r.ec != std::errc() || r.ptr != k.data() + k.size() || i >= size)
    fail(at, "bad array index '" + std::string(k) + "'");
  return i;
}

/// A default-built S: what a field missing from the document keeps.
template <typename S>
const S& default_of() {
  static const S d{};
  return d;
}

/// Whether the writer writes field `f` of `s` (its key is in the document).
template <typename S, typename F>
bool written(const S& s, const F& f) {
  if (f.unless && f.unless(s)) return false;
  return f.emit == schema::Emit::always || !schema::is_unset(s.*f.member);
}

template <typename T>
inline constexpr bool kIsOptional = false;
template <typename T>
inline constexpr bool kIsOptional<std::optional<T>> = true;
template <typename T>
inline constexpr bool kIsOptional<SharedOptional<T>> = true;  // *v copies a shared block first
template <typename T>
inline constexpr bool kIsVector = false;
template <typename T>
inline constexpr bool kIsVector<std::vector<T>> = true;
template <typename T>
inline constexpr bool kIsMap = false;
template <typename V>
inline constexpr bool kIsMap<std::map<std::string, V>> = true;

template <typename S>
requires schema::kDescribed<S>
void patch_struct(S& s, const json::object& p, const Path& at);
void patch_elements(std::vector<PowerSample>& v, const json::object& p, const Path& at);
template <typename T>
void patch_elements(std::vector<T>& v, const json::object& p, const Path& at);
template <typename V>
void patch_map(std::map<std::string, V>& m, const json::object& p, const Path& at);

/// A nested patch of a value present in the document.
template <typename T>
void patch_nested(T& v, const json::object& p, const Path& at) {
  if constexpr (schema::kDescribed<T>) {
    patch_struct(v, p, at);
  } else if constexpr (kIsOptional<T>) {
    if (!v) patches_scalar(at);  // null (or, Emit::if_set, no key: refused either way)
    patch_nested(*v, p, at);
  } else if constexpr (kIsVector<T> || kIsMap<T>) {
    if constexpr (kIsVector<T>)
      patch_elements(v, p, at);
    else
      patch_map(v, p, at);
  } else {
    patches_scalar(at);
  }
}

template <typename T>
void patch_elements(std::vector<T>& v, const json::object& p, const Path& at) {
  for (const auto& kv : p) {
    const std::size_t i = patch_index(key_of(kv), v.size(), at);
    const Path ai = at[i];
    switch (patch_op(kv.value(), ai)) {
      case PatchOp::remove:
        fail(ai, "an array's element cannot be removed, only replaced");
      case PatchOp::replace: {
        T t{};
        read(replacement_of(kv.value()), ai, t);
        v[i] = std::move(t);
        break;
      }
      case PatchOp::nested:
        patch_nested(v[i], kv.value().get_object(), ai);
        break;
    }
  }
}

/// A device's power samples: pairs, patched whole or by their two indexes, then checked in
/// order as the reader checks them.
void patch_elements(std::vector<PowerSample>& v, const json::object& p, const Path& at) {
  for (const auto& kv : p) {
    const std::size_t i = patch_index(key_of(kv), v.size(), at);
    const Path ai = at[i];
    switch (patch_op(kv.value(), ai)) {
      case PatchOp::remove:
        fail(ai, "an array's element cannot be removed, only replaced");
      case PatchOp::replace:
        v[i] = power_sample(replacement_of(kv.value()), ai);
        break;
      case PatchOp::nested:
        for (const auto& half : kv.value().get_object()) {
          const std::size_t j = patch_index(key_of(half), 2, ai);
          const Path aj = ai[j];
          const PatchOp op = patch_op(half.value(), aj);
          if (op == PatchOp::remove)
            fail(aj, "an array's element cannot be removed, only replaced");
          if (op == PatchOp::nested) patches_scalar(aj);
          if (j == 0)
            v[i].monotonic_ns = as_int64(replacement_of(half.value()), aj);
          else
            v[i].watts = as_double(replacement_of(half.value()), aj);
        }
        if (v[i].watts < 0) fail(ai[1], "negative power");
        break;
    }
  }
  for (std::size_t i = 1; i < v.size(); ++i)
    if (v[i].monotonic_ns <= v[i - 1].monotonic_ns)
      fail(at[i][0], "power samples must be in strictly increasing monotonic_ns");
}

template <typename V>
void patch_map(std::map<std::string, V>& m, const json::object& p, const Path& at) {
  for (const auto& kv : p) {
    const std::string_view key = key_of(kv);
    const Path ak = at / key;
    switch (patch_op(kv.value(), ak)) {
      case PatchOp::remove:
        if (const auto it = m.find(std::string(key)); it != m.end()) m.erase(it);
        break;
      case PatchOp::replace: {
        V val{};
        read(replacement_of(kv.value()), ak, val);
        m.insert_or_assign(std::string(key), std::move(val));
        break;
      }
      case PatchOp::nested:
        if (m.contains(std::string(key))) patches_scalar(ak);
        no_key(ak);
    }
  }
}

/// One field of `s` patched by `pv` (the MetricSet and the engine's Reading are their parent's:
/// several keys each).
template <typename S, typename F>
void patch_field(S& s, const F& f, PatchOp op, const json::value& pv, const Path& at) {
  using T = typename F::Type;
  if constexpr (!std::is_same_v<T, MetricSet> && !std::is_same_v<T, Reading>) {
    T& v = s.*f.member;
    switch (op) {
      case PatchOp::remove:
        if (!written(s, f)) return;  // no key: nothing removed
        if (f.need == schema::Need::required) fail(at, "required key is missing");
        v = default_of<S>().*f.member;
        return;
      case PatchOp::replace: {
        const json::value& r = replacement_of(pv);
        if (f.need == schema::Need::optional && r.is_null()) {  // null counts as missing
          v = default_of<S>().*f.member;
          return;
        }
        T t{};
        read(r, at, t);
        v = std::move(t);
        return;
      }
      case PatchOp::nested:
        if (!written(s, f)) no_key(at);
        patch_nested(v, pv.get_object(), at);
        return;
    }
  }
}

/// One of the four per-metric objects of a device ("metrics", "sources", "absent",
/// "absent_sources") patched: `col` is it, one slot per metric; `has_key`: it is in the document.
template <typename T, typename Parse>
void patch_column(std::array<std::optional<T>, kMetricCount>& col, bool has_key, bool required,
                  const json::value& p, const Path& at, Parse parse) {
  switch (patch_op(p, at)) {
    case PatchOp::remove:
      if (required) fail(at, "required key is missing");
      col.fill(std::nullopt);
      return;
    case PatchOp::replace: {
      const json::value& v = replacement_of(p);
      col.fill(std::nullopt);
      if (!required && v.is_null()) return;
      for (const auto& kv : as_object(v, at)) {
        const std::string_view name = key_of(kv);
        if (const auto m = metric_from_string(name))
          col[static_cast<std::size_t>(*m)] = parse(kv.value(), at / name);
      }
      return;
    }
    case PatchOp::nested:
      if (!has_key) no_key(at);
      for (const auto& kv : p.get_object()) {
        const std::string_view name = key_of(kv);
        const Path an = at / name;
        const auto m = metric_from_string(name);
        switch (patch_op(kv.value(), an)) {
          case PatchOp::remove:
            if (m) col[static_cast<std::size_t>(*m)].reset();
            break;
          case PatchOp::replace:  // an unknown metric is inserted, and ignored by the reader
            if (m) col[static_cast<std::size_t>(*m)] = parse(replacement_of(kv.value()), an);
            break;
          case PatchOp::nested:
            if (m && col[static_cast<std::size_t>(*m)]) patches_scalar(an);
            no_key(an);
        }
      }
      return;
  }
}

/// The four per-metric objects: `cols` are their patches (null: not patched). The set is then
/// rebuilt from them with the reader's rules.
void patch_metrics(MetricSet& set, const std::array<const json::value*, 4>& cols, const Path& at) {
  std::array<std::optional<double>, kMetricCount> value{};
  std::array<std::optional<Source>, kMetricCount> source{}, absent_source{};
  std::array<std::optional<Absence>, kMetricCount> absent{};
  bool absent_sources_key = false;
  for (std::size_t i = 0; i < kMetricCount; ++i) {
    const Reading& r = set[static_cast<Metric>(i)];
    if (r.has_value()) {
      value[i] = r.value();
      source[i] = r.source();
    } else {
      absent[i] = r.reason();
      if (r.source() != Source::none) {
        absent_source[i] = r.source();
        absent_sources_key = true;
      }
    }
  }
  const auto source_of = [](const json::value& v, const Path& p) {
    return as_enum(v, p, source_from_string);
  };
  const Path pm = at / "metrics", ps = at / "sources", pa = at / "absent",
             pas = at / "absent_sources";
  if (cols[0]) patch_column(value, true, true, *cols[0], pm, as_double);
  if (cols[1]) patch_column(source, true, true, *cols[1], ps, source_of);
  if (cols[2])
    patch_column(absent, true, true, *cols[2], pa, [](const json::value& v, const Path& p) {
      return as_enum(v, p, absence_from_string);
    });
  if (cols[3]) patch_column(absent_source, absent_sources_key, false, *cols[3], pas, source_of);
  for (std::size_t i = 0; i < kMetricCount; ++i) {
    const auto m = static_cast<Metric>(i);
    const std::string_view name = to_string(m);
    if (value[i]) {
      if (absent[i]) fail(pa / name, "metric is both present and absent");
      if (absent_source[i]) fail(pas / name, "source given for a metric not absent");
      set[m] = Reading::of(*value[i], source[i].value_or(Source::none));
    } else if (source[i]) {
      fail(ps / name, "source given for a metric with no value");
    } else if (absent[i]) {
      set[m] = Reading::missing(*absent[i], absent_source[i].value_or(Source::none));
    } else {
      if (absent_source[i]) fail(pas / name, "source given for a metric not absent");
      set[m] = Reading{};
    }
  }
}

/// An engine's Reading: `keys` are the patches of "utilization_percent", "source" and
/// "absent" (null: not patched).
void patch_engine_reading(Reading& r, const std::array<const json::value*, 3>& keys,
                          const Path& at) {
  std::optional<double> u = r.get();
  Source source = r.source();
  std::optional<Absence> why;
  if (!r.has_value()) why = r.reason();
  const Path pu = at / "utilization_percent", ps = at / "source", pa = at / "absent";
  if (keys[0]) {
    switch (patch_op(*keys[0], pu)) {
      case PatchOp::remove:
        fail(pu, "required key is missing");
      case PatchOp::nested:
        patches_scalar(pu);
      case PatchOp::replace: {
        const json::value& v = replacement_of(*keys[0]);
        u.reset();
        if (!v.is_null()) u = as_double(v, pu);
      }
    }
  }
  if (keys[1]) {
    const PatchOp op = patch_op(*keys[1], ps);
    if (op == PatchOp::nested) patches_scalar(ps);
    source = Source::none;
    if (op == PatchOp::replace && !replacement_of(*keys[1]).is_null())
      source = as_enum(replacement_of(*keys[1]), ps, source_from_string);
  }
  if (keys[2]) {
    const PatchOp op = patch_op(*keys[2], pa);
    if (op == PatchOp::nested) {
      if (why) patches_scalar(pa);
      no_key(pa);
    }
    why.reset();
    if (op == PatchOp::replace && !replacement_of(*keys[2]).is_null())
      why = as_enum(replacement_of(*keys[2]), pa, absence_from_string);
  }
  if (u) {
    if (why) fail(pa, "engine has a value and an absence reason");
    r = Reading::of(*u, source);
  } else {
    r = Reading::missing(why.value_or(Absence::not_collected), source);
  }
}

std::optional<std::size_t> metric_column(std::string_view key) {
  constexpr std::array<std::string_view, 4> kColumns = {"metrics", "sources", "absent",
                                                        "absent_sources"};
  for (std::size_t i = 0; i < kColumns.size(); ++i)
    if (key == kColumns[i]) return i;
  return std::nullopt;
}

std::optional<std::size_t> engine_reading_key(std::string_view key) {
  constexpr std::array<std::string_view, 3> kKeys = {"utilization_percent", "source", "absent"};
  for (std::size_t i = 0; i < kKeys.size(); ++i)
    if (key == kKeys[i]) return i;
  return std::nullopt;
}

/// The document's "schema" key patched: it must stay "gpustream/1".
void patch_schema_key(PatchOp op, const json::value& pv, const Path& at) {
  if (op == PatchOp::remove) fail(at, "required key is missing");
  if (op == PatchOp::nested) patches_scalar(at);
  const std::string_view schema = as_view(replacement_of(pv), at);
  if (schema != kSchema) fail(at, "unsupported schema \"" + std::string(schema) + "\"");
}

template <typename S>
requires schema::kDescribed<S>
void patch_struct(S& s, const json::object& p, const Path& at) {
  [[maybe_unused]] std::array<const json::value*, 4> metric_cols{};
  [[maybe_unused]] std::array<const json::value*, 3> reading_keys{};
  bool deferred = false;
  for (const auto& kv : p) {
    const std::string_view key = key_of(kv);
    const Path ak = at / key;
    const json::value& pv = kv.value();
    const PatchOp op = patch_op(pv, ak);
    if constexpr (std::is_same_v<S, DeviceSample>) {
      if (const auto c = metric_column(key)) {
        metric_cols[*c] = &pv;
        continue;
      }
    }
    if constexpr (std::is_same_v<S, EngineSample>) {
      if (const auto c = engine_reading_key(key)) {
        reading_keys[*c] = &pv;
        continue;
      }
    }
    bool known = false;
    schema::for_each_field<S>([&](const auto& f) {
      if (known || f.name != key) return;
      known = true;
      // A field read only unless another holds: once the others are patched (a nested patch
      // of it is refused now: they are enumerations, scalars).
      if (f.unless && op != PatchOp::nested)
        deferred = true;
      else
        patch_field(s, f, op, pv, ak);
    });
    if (known) continue;
    if constexpr (std::is_same_v<S, GpuSnapshot>) {
      if (key == "schema") {
        patch_schema_key(op, pv, ak);
        continue;
      }
    }
    if (op == PatchOp::nested) no_key(ak);  // else: a key readers ignore, or none to remove
  }
  if constexpr (std::is_same_v<S, DeviceSample>) {
    if (metric_cols[0] || metric_cols[1] || metric_cols[2] || metric_cols[3])
      patch_metrics(s.metrics, metric_cols, at);
  }
  if constexpr (std::is_same_v<S, EngineSample>) {
    if (reading_keys[0] || reading_keys[1] || reading_keys[2])
      patch_engine_reading(s.utilization_percent, reading_keys, at);
  }
  if (deferred) {
    for (const auto& kv : p) {
      const std::string_view key = key_of(kv);
      schema::for_each_field<S>([&](const auto& f) {
        if (!f.unless || f.name != key || f.unless(s)) return;
        const Path ak = at / key;
        patch_field(s, f, patch_op(kv.value(), ak), kv.value(), ak);
      });
    }
  }
  // As the reader: a field skipped while `unless` holds keeps its default; `refuse` refuses.
  schema::for_each_field<S>([&](const auto& f) {
    if (f.unless && f.unless(s))
      s.*f.member = default_of<S>().*f.member;
    else if (f.refuse && f.refuse(s))
      fail(at / f.name, f.refuse_why);
  });
}

}  // namespace

namespace detail {

void patch_snapshot(GpuSnapshot& s, const json::object& patch) {
  patch_struct(s, patch, kRoot);
  check_snapshot(s, kRoot);
}

}  // namespace detail

}  // namespace gpustream
