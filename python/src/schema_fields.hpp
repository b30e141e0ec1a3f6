// Python attributes generated from the schema description (gpustream/detail/schema.hpp): one
// read-only attribute per field, named as its JSON key. Enumerations read as their names (an
// unset optional as None), an engine's Reading as its value or None; the device's MetricSet is
// not a field here (Device.metrics, absent and reading() are written by hand).
#pragma once

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <initializer_list>
#include <optional>
#include <string_view>
#include <type_traits>
#include <utility>

#include "common.hpp"
#include "gpustream/detail/schema.hpp"
#include "gpustream/shared_optional.hpp"

/// A SharedOptional (a process's container, slurm, pod) as Python sees a std::optional: None or
/// the object. Read-only attributes hand out the shared value (a const one: never copied on
/// write); the Python object keeps its owner, and so the block, alive.
namespace pybind11::detail {
template <typename T>
struct type_caster<gpustream::SharedOptional<T>> : optional_caster<gpustream::SharedOptional<T>> {};
}  // namespace pybind11::detail

namespace gpustream::python {

/// Which fields def_fields leaves to the caller, and the docstrings of others.
struct FieldBinding {
  std::initializer_list<std::string_view> skip = {};
  std::initializer_list<std::pair<std::string_view, const char*>> docs = {};

  bool skipped(std::string_view name) const {
    return std::find(skip.begin(), skip.end(), name) != skip.end();
  }
  const char* doc(std::string_view name) const {
    for (const auto& [n, d] : docs)
      if (n == name) return d;
    return nullptr;
  }
};

namespace detail {

template <typename T>
inline constexpr bool kOptionalEnum = false;
template <typename E>
inline constexpr bool kOptionalEnum<std::optional<E>> = std::is_enum_v<E>;

/// A field's value as Python sees it (names for enumerations; the rest by pybind11's casters).
template <typename S, typename F>
py::object field_value(const S& s, const F& f) {
  using T = typename F::Type;
  const T& v = s.*f.member;
  if constexpr (std::is_enum_v<T>) {
    if ((f.unless && f.unless(s)) || (f.emit == gpustream::detail::schema::Emit::if_set &&
                                      gpustream::detail::schema::is_unset(v)))
      return py::none();
    return name_of(to_string(v));
  } else if constexpr (kOptionalEnum<T>) {
    return opt_name(v);
  } else if constexpr (std::is_same_v<T, Reading>) {
    return py::cast(v.get());
  } else {
    return py::cast(v);
  }
}

template <typename F>
inline constexpr bool kBindable = !std::is_same_v<typename F::Type, MetricSet>;

}  // namespace detail

/// The fields of S as read-only attributes of `cls`, a py::class_<S>: def_readonly where the
/// member is given as it is, a property where it is converted.
template <typename S, typename Class>
void def_fields(Class& cls, const FieldBinding& b = {}) {
  gpustream::detail::schema::for_each_field<S>([&](const auto& f) {
    using F = std::decay_t<decltype(f)>;
    using T = typename F::Type;
    if constexpr (detail::kBindable<F>) {
      if (b.skipped(f.name)) return;
      const char* doc = b.doc(f.name);
      // f.name views a string literal: NUL-terminated.
      if constexpr (std::is_enum_v<T> || detail::kOptionalEnum<T> || std::is_same_v<T, Reading>)
        cls.def_property_readonly(
            f.name.data(), [f](const S& s) { return detail::field_value(s, f); }, doc);
      else
        cls.def_readonly(f.name.data(), f.member, doc);
    }
  });
}

/// The fields of S as read-only properties of `cls`, whose objects reach their S through
/// `of(object)` (a Device or a Snapshot, which keep the snapshot alive); values are copies.
template <typename S, typename Class, typename Of>
void def_fields_of(Class& cls, Of of, const FieldBinding& b = {}) {
  using W = typename Class::type;
  gpustream::detail::schema::for_each_field<S>([&](const auto& f) {
    using F = std::decay_t<decltype(f)>;
    if constexpr (detail::kBindable<F>) {
      if (b.skipped(f.name)) return;
      cls.def_property_readonly(
          f.name.data(), [f, of](const W& w) { return detail::field_value(of(w), f); },
          b.doc(f.name));
    }
  });
}

}  // namespace gpustream::python
