// gpustream/detail/schema.hpp — the gpustream/1 snapshot schema, described once.
//
// One table per model struct (gpustream/model.hpp): each field's JSON key, its member, when the
// key is written and whether a reader needs it, in the order of the document. The JSON text
// writer (json_write.cpp), the document form (json_value.cpp), the reader (json_read.cpp), the
// transport's projections (through the text writer) and the Python bindings walk these tables;
// none of them names a field of its own. A field added to the model is one line here (and its
// paragraph in docs/protocol.md); docs/architecture/schema.md says how.
//
// How a value of each C++ type is written and read is the codecs' business (one overload per
// type): strings are escaped, enums are their to_string names, an unset optional is null, a
// MetricSet is the four per-metric objects ("metrics", "sources", "absent", "absent_sources")
// and an engine's Reading is "utilization_percent", "source" and "absent". Not installed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <tuple>

#include "gpustream/model.hpp"

namespace gpustream::detail::schema {

/// When a writer writes a field's key.
enum class Emit : std::uint8_t {
  always,  // every time (an unset optional as null)
  if_set,  // only when the value differs from the type's default: an optional with a value, a
           // non-empty string or list, true, an enumeration other than its first value
};

/// What a reader makes of a missing key.
enum class Need : std::uint8_t {
  required,  // the key must be there (null is the unset value of an optional)
  optional,  // missing or null: the member keeps its default
};

/// One field of struct S: its key and member, and the rules above. `unless`: the field is
/// neither written nor read when it holds (a reason that only means something while another
/// field is unset). `refuse`: a reader refuses the document, saying `refuse_why`, when it holds
/// once this field is read.
template <typename S, typename T>
struct Field {
  using Struct = S;
  using Type = T;
  std::string_view name;
  T S::*member;
  Emit emit = Emit::always;
  Need need = Need::required;
  bool (*unless)(const S&) = nullptr;
  bool (*refuse)(const S&) = nullptr;
  std::string_view refuse_why{};
};

/// A field written every time and required by readers.
template <typename S, typename T>
constexpr Field<S, T> field(std::string_view name, T S::*member) {
  return {name, member};
}
/// A field written every time that readers may miss (keys added after the first version, and
/// the host's figures).
template <typename S, typename T>
constexpr Field<S, T> field_optional(std::string_view name, T S::*member) {
  return {name, member, Emit::always, Need::optional};
}
/// A field written only when set (see Emit::if_set); readers may miss it.
template <typename S, typename T>
constexpr Field<S, T> field_if_set(std::string_view name, T S::*member) {
  return {name, member, Emit::if_set, Need::optional};
}

/// True when a field of this value is left out under Emit::if_set.
template <typename T>
bool is_unset(const T& v) {
  return v == T{};
}

/// The table of struct S: `fields`, and `where(s)`, the name a logged lossy write quotes.
template <typename S>
struct Schema;

template <>
struct Schema<EngineSample> {
  static constexpr auto fields = std::tuple{
      field("name", &EngineSample::name),
      field("utilization_percent", &EngineSample::utilization_percent),  // + source, absent
  };
  static std::string_view where(const EngineSample& e) { return e.name; }
};

template <>
struct Schema<ProcessContainer> {
  // Only the known parts: an empty string is left out.
  static constexpr auto fields = std::tuple{
      field_if_set("runtime", &ProcessContainer::runtime),
      field_if_set("id", &ProcessContainer::id),
      field_if_set("pod_uid", &ProcessContainer::pod_uid),
      field_if_set("qos", &ProcessContainer::qos),
  };
  static std::string_view where(const ProcessContainer& c) { return c.id; }
};

/// The longest string a reader takes in a `slurm` object, bytes (a job id is at most 10 digits,
/// a user name at most LOGIN_NAME_MAX = 256): a longer one refuses the document.
inline constexpr std::size_t kMaxSlurmString = 256;

template <>
struct Schema<SlurmJob> {
  static constexpr auto fields = std::tuple{
      field("job_id", &SlurmJob::job_id),
      field_if_set("step", &SlurmJob::step),
      field_if_set("uid", &SlurmJob::uid),
      field_if_set("user", &SlurmJob::user),
      field_if_set("array_job_id", &SlurmJob::array_job_id),
      field_if_set("array_task_id", &SlurmJob::array_task_id),
  };
  static std::string_view where(const SlurmJob& j) { return j.job_id; }
  static bool too_long(const SlurmJob& j) {
    for (const auto* s : {&j.job_id, &j.step, &j.user, &j.array_job_id, &j.array_task_id})
      if (s->size() > kMaxSlurmString) return true;
    return false;
  }
};

/// The longest string a reader takes in a `pod` object, bytes (Kubernetes: a pod name at most
/// 253, a namespace and a container name at most 63): a longer one refuses the document.
inline constexpr std::size_t kMaxPodString = 253;

template <>
struct Schema<KubernetesPod> {
  static constexpr auto fields = std::tuple{
      field("name", &KubernetesPod::name),
      field("namespace", &KubernetesPod::namespace_name),
      field("container", &KubernetesPod::container),
  };
  static std::string_view where(const KubernetesPod& k) { return k.name; }
  static bool too_long(const KubernetesPod& k) {
    return k.name.size() > kMaxPodString || k.namespace_name.size() > kMaxPodString ||
           k.container.size() > kMaxPodString;
  }
};

template <>
struct Schema<ProcessSample> {
  static constexpr auto fields = std::tuple{
      field("pid", &ProcessSample::pid),
      field("name", &ProcessSample::name),
      field("gpu_memory_bytes", &ProcessSample::gpu_memory_bytes),
      field_if_set("gtt_memory_bytes", &ProcessSample::gtt_memory_bytes),  // newer than the format
      field("gpu_utilization_percent", &ProcessSample::gpu_utilization_percent),
      field("host_rss_bytes", &ProcessSample::host_rss_bytes),
      field("per_process_exact", &ProcessSample::per_process_exact),
      field_if_set("container", &ProcessSample::container),
      Field<ProcessSample, ContainerAbsent>{
          "container_absent", &ProcessSample::container_absent, Emit::if_set, Need::optional,
          [](const ProcessSample& p) { return p.container.has_value(); }},
      Field<ProcessSample, SharedOptional<SlurmJob>>{
          "slurm", &ProcessSample::slurm, Emit::if_set, Need::optional, nullptr,
          [](const ProcessSample& p) { return p.slurm && Schema<SlurmJob>::too_long(*p.slurm); },
          "a slurm string longer than 256 bytes"},
      Field<ProcessSample, SlurmAbsent>{"slurm_absent", &ProcessSample::slurm_absent, Emit::if_set,
                                        Need::optional,
                                        [](const ProcessSample& p) { return p.slurm.has_value(); }},
      Field<ProcessSample, SharedOptional<KubernetesPod>>{
          "pod", &ProcessSample::pod, Emit::if_set, Need::optional, nullptr,
          [](const ProcessSample& p) { return p.pod && Schema<KubernetesPod>::too_long(*p.pod); },
          "a pod string longer than 253 bytes"},
      Field<ProcessSample, PodAbsent>{"pod_absent", &ProcessSample::pod_absent, Emit::if_set,
                                      Need::optional,
                                      [](const ProcessSample& p) { return p.pod.has_value(); }},
      field_optional("engines", &ProcessSample::engines),
  };
  static std::string_view where(const ProcessSample& p) { return p.name; }
};

template <>
struct Schema<MigIdentity> {
  static constexpr auto fields = std::tuple{
      field("gpu_instance_id", &MigIdentity::gpu_instance_id),
      field("compute_instance_id", &MigIdentity::compute_instance_id),
      field("profile", &MigIdentity::profile),
  };
  static std::string_view where(const MigIdentity& m) { return m.profile; }
};

template <>
struct Schema<DeviceSample> {
  static constexpr auto fields = std::tuple{
      field("id", &DeviceSample::id),
      field("vendor", &DeviceSample::vendor),
      field("index", &DeviceSample::index),
      field("name", &DeviceSample::name),
      field("pci_bus_id", &DeviceSample::pci_bus_id),
      field_optional("power_state", &DeviceSample::power_state),
      field_if_set("energy_kind", &DeviceSample::energy_kind),
      field_if_set("power_kind", &DeviceSample::power_kind),
      field_if_set("parent", &DeviceSample::parent),
      field_if_set("mig", &DeviceSample::mig),
      field_if_set("partitioned", &DeviceSample::partitioned),
      Field<DeviceSample, std::vector<KubernetesPod>>{"pods", &DeviceSample::pods, Emit::if_set,
                                                      Need::optional, nullptr,
                                                      [](const DeviceSample& d) {
                                                        for (const auto& k : d.pods)
                                                          if (Schema<KubernetesPod>::too_long(k))
                                                            return true;
                                                        return false;
                                                      },
                                                      "a pod string longer than 253 bytes"},
      field("metrics", &DeviceSample::metrics),  // + sources, absent, absent_sources
      // [[monotonic_ns, watts], ...]: pairs, not objects (the codecs' PowerSample overloads).
      field_if_set("power_samples", &DeviceSample::power_samples),
      field_optional("throttle_reasons", &DeviceSample::throttle_reasons),
      Field<DeviceSample, std::optional<Absence>>{
          "throttle_reasons_absent", &DeviceSample::throttle_reasons_absent, Emit::if_set,
          Need::optional, nullptr,
          [](const DeviceSample& d) {
            return d.throttle_reasons_absent && !d.throttle_reasons.empty();
          },
          "throttle reasons both present and absent"},
      field("engines", &DeviceSample::engines),
      field("processes", &DeviceSample::processes),
      field_if_set("processes_absent", &DeviceSample::processes_absent),
      field_optional("attributes", &DeviceSample::attributes),
  };
  static std::string_view where(const DeviceSample& d) { return d.id; }
};

template <>
struct Schema<HostProcess> {
  static constexpr auto fields = std::tuple{
      field("pid", &HostProcess::pid),
      field("name", &HostProcess::name),
      field_optional("rss_bytes", &HostProcess::rss_bytes),
  };
  static std::string_view where(const HostProcess& p) { return p.name; }
};

template <>
struct Schema<HostSample> {
  static constexpr auto fields = std::tuple{
      field_optional("memory_total_bytes", &HostSample::memory_total_bytes),
      field_optional("memory_available_bytes", &HostSample::memory_available_bytes),
      field_optional("memory_used_bytes", &HostSample::memory_used_bytes),
      field_optional("swap_total_bytes", &HostSample::swap_total_bytes),
      field_optional("swap_used_bytes", &HostSample::swap_used_bytes),
      field_optional("processes", &HostSample::processes),
      field_optional("metrics", &HostSample::metrics),  // a non-finite one is left out
  };
  static std::string_view where(const HostSample&) { return "host"; }
};

template <>
struct Schema<SampleError> {
  static constexpr auto fields = std::tuple{
      field("code", &SampleError::code),
      field("message", &SampleError::message),
      field_if_set("device", &SampleError::device),
  };
  static std::string_view where(const SampleError& e) { return e.code; }
};

/// The document's head, `"schema":"gpustream/1"`, comes before these fields.
template <>
struct Schema<GpuSnapshot> {
  static constexpr auto fields = std::tuple{
      field("probe", &GpuSnapshot::probe),
      field_if_set("node", &GpuSnapshot::node),
      field("sequence", &GpuSnapshot::sequence),
      field("time_unix_ns", &GpuSnapshot::time_unix_ns),
      field_optional("monotonic_ns", &GpuSnapshot::monotonic_ns),
      field("sample_duration_ns", &GpuSnapshot::sample_duration_ns),
      field("devices", &GpuSnapshot::devices),
      field_if_set("host", &GpuSnapshot::host),
      field("errors", &GpuSnapshot::errors),
  };
  static std::string_view where(const GpuSnapshot& s) { return s.probe; }
};

/// Calls f(field) for each field of S, in the document's order.
template <typename S, typename F>
void for_each_field(F&& f) {
  std::apply([&](const auto&... fs) { (f(fs), ...); }, Schema<S>::fields);
}

/// True for the model structs described here.
template <typename T, typename = void>
inline constexpr bool kDescribed = false;
template <typename T>
inline constexpr bool kDescribed<T, std::void_t<decltype(Schema<T>::fields)>> = true;

}  // namespace gpustream::detail::schema
