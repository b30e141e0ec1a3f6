// Codec benchmark: one 8-GPU, 100-process snapshot, serialized and decoded by gpustream's codec
// and by an equivalent nlohmann::json document (same keys and values, built from the same model).
//
//   build-dir/bench/codec_bench --benchmark_min_time=0.5
//
// Before running, main() checks that both encoders carry the same data: the nlohmann text must
// decode (with gpustream's decoder) to the very snapshot both were built from.
#include <benchmark/benchmark.h>

#include <boost/json.hpp>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "gpustream/json.hpp"

#if GPUSTREAM_HAVE_NLOHMANN
#include <nlohmann/json.hpp>
#endif

namespace {

using namespace gpustream;

/// A busy 8-GPU training node: every metric an NVML probe fills, 100 processes over the GPUs.
GpuSnapshot node_snapshot() {
  constexpr int kGpus = 8, kProcesses = 100;
  GpuSnapshot s;
  s.probe = "nvidia";
  s.sequence = 184467;
  s.time_unix_ns = 1717171717123456789;
  s.monotonic_ns = 98765432101234;
  s.sample_duration_ns = 2834567;
  for (int g = 0; g < kGpus; ++g) {
    DeviceSample d;
    char id[64];
    std::snprintf(id, sizeof id, "GPU-%08x-5b7d-4c9e-a1f0-3c2d%08x", 0x8c1f3e2a + g, 0x1000 * g);
    d.id = id;
    d.vendor = Vendor::nvidia;
    d.index = g;
    d.name = "NVIDIA H100 80GB HBM3";
    char bus[32];
    std::snprintf(bus, sizeof bus, "00000000:%02X:00.0", 0x18 + 0x10 * g);
    d.pci_bus_id = bus;
    d.power_state = PowerState::active;
    d.energy_kind = EnergyKind::counter;
    auto& m = d.metrics;
    m.set(Metric::utilization_percent, 91.0 + g * 0.7, Source::nvml);
    m.set(Metric::memory_utilization_percent, 38.0 + g, Source::nvml);
    m.set(Metric::memory_used_bytes, 61203283968.0 + g * 1048576.0, Source::nvml);
    m.set(Metric::memory_total_bytes, 85520809984.0, Source::nvml);
    m.set(Metric::temperature_celsius, 61.0 + g, Source::nvml);
    m.set(Metric::power_watts, 612.337 + g * 3.21, Source::nvml);
    m.set(Metric::power_average_watts, 598.25 + g, Source::nvml);
    m.set(Metric::power_limit_watts, 700.0, Source::nvml);
    m.set(Metric::energy_joules, 8123456.789 + g * 1000.5, Source::nvml);
    m.set(Metric::clock_graphics_mhz, 1980.0, Source::nvml);
    m.set(Metric::clock_sm_mhz, 1980.0, Source::nvml);
    m.set(Metric::clock_memory_mhz, 2619.0, Source::nvml);
    m.set_absent(Metric::fan_percent, Absence::unsupported, Source::nvml);
    m.set_absent(Metric::fan_rpm, Absence::unsupported);
    m.set_absent(Metric::gtt_used_bytes, Absence::unsupported);
    m.set_absent(Metric::gtt_total_bytes, Absence::unsupported);
    d.throttle_reasons = {"sw_power_cap"};
    d.engines = {{"graphics", Reading::of(91.0 + g * 0.7, Source::nvml)},
                 {"copy", Reading::of(4.5, Source::nvml)},
                 {"video_decode", Reading::of(0.0, Source::nvml)},
                 {"video_encode", Reading::missing(Absence::unsupported, Source::nvml)}};
    d.attributes = {{"uuid", d.id}, {"driver", "550.54.15"}, {"metrics_source", "nvml"}};
    s.devices.push_back(std::move(d));
  }
  for (int p = 0; p < kProcesses; ++p) {
    ProcessSample ps;
    ps.pid = 210000 + p * 37;
    ps.name = p % 10 == 0 ? "tritonserver" : "python3 train.py --rank " + std::to_string(p);
    ps.gpu_memory_bytes = 536870912ull + 12582912ull * static_cast<unsigned>(p);
    ps.gpu_utilization_percent = 5.0 + (p % 17) * 4.25;
    ps.host_rss_bytes = 4294967296ull + 65536ull * static_cast<unsigned>(p);
    if (p % 4 == 0)
      ps.container =
          ProcessContainer{"containerd", std::string(64, "0123456789abcdef"[p % 16]), "", ""};
    else
      ps.container_absent = ContainerAbsent::host;
    s.devices[static_cast<std::size_t>(p % kGpus)].processes.push_back(std::move(ps));
  }
  HostSample h;
  h.memory_total_bytes = 2164191297536ull;
  h.memory_available_bytes = 1705468891136ull;
  h.memory_used_bytes = 458722406400ull;
  h.swap_total_bytes = 0;
  h.swap_used_bytes = 0;
  h.processes = {{4242, "planner", 2147483648ull}};
  h.metrics = {{"system_power_watts", 6123.5}};
  s.host = h;
  return s;
}

const GpuSnapshot& snapshot() {
  static const GpuSnapshot s = node_snapshot();
  return s;
}

void report_bytes(benchmark::State& state, std::size_t bytes) {
  state.counters["bytes"] = static_cast<double>(bytes);
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes));
}

void BM_Encode_Gpustream(benchmark::State& state) {
  std::size_t bytes = 0;
  for (auto _ : state) {
    std::string text = to_json_string(snapshot());
    bytes = text.size();
    benchmark::DoNotOptimize(text.data());
  }
  report_bytes(state, bytes);
}
BENCHMARK(BM_Encode_Gpustream);

void BM_Encode_GpustreamReusedBuffer(benchmark::State& state) {
  std::string text;
  for (auto _ : state) {
    text.clear();
    append_json(text, snapshot());
    benchmark::DoNotOptimize(text.data());
  }
  report_bytes(state, text.size());
}
BENCHMARK(BM_Encode_GpustreamReusedBuffer);

void BM_Encode_BoostJsonDocument(benchmark::State& state) {
  std::size_t bytes = 0;
  for (auto _ : state) {
    std::string text = boost::json::serialize(to_json(snapshot()));
    bytes = text.size();
    benchmark::DoNotOptimize(text.data());
  }
  report_bytes(state, bytes);
}
BENCHMARK(BM_Encode_BoostJsonDocument);

void BM_Decode_Gpustream(benchmark::State& state) {
  const std::string text = to_json_string(snapshot());
  for (auto _ : state) {
    GpuSnapshot s = snapshot_from_json_string(text);
    benchmark::DoNotOptimize(s.devices.data());
  }
  report_bytes(state, text.size());
}
BENCHMARK(BM_Decode_Gpustream);

void BM_Decode_GpustreamParseOnly(benchmark::State& state) {
  const std::string text = to_json_string(snapshot());
  for (auto _ : state) {
    boost::json::monotonic_resource arena;
    boost::json::value v = parse_json(text, &arena);
    benchmark::DoNotOptimize(&v);
  }
  report_bytes(state, text.size());
}
BENCHMARK(BM_Decode_GpustreamParseOnly);

#if GPUSTREAM_HAVE_NLOHMANN
using njson = nlohmann::json;

njson nl_engines(const std::vector<EngineSample>& engines) {
  njson a = njson::array();
  for (const auto& e : engines) {
    njson o = {{"name", e.name}, {"source", to_string(e.utilization_percent.source())}};
    if (e.utilization_percent) {
      o["utilization_percent"] = e.utilization_percent.value();
    } else {
      o["utilization_percent"] = nullptr;
      o["absent"] = to_string(e.utilization_percent.reason());
    }
    a.push_back(std::move(o));
  }
  return a;
}

template <typename T>
njson nl_optional(const std::optional<T>& v) {
  return v ? njson(*v) : njson(nullptr);
}

/// The same document as to_json(), built with nlohmann::json.
njson nl_snapshot(const GpuSnapshot& s) {
  njson doc = {{"schema", kSchema},
               {"probe", s.probe},
               {"sequence", s.sequence},
               {"time_unix_ns", s.time_unix_ns},
               {"monotonic_ns", s.monotonic_ns},
               {"sample_duration_ns", s.sample_duration_ns}};
  njson devices = njson::array();
  for (const auto& d : s.devices) {
    njson o = {{"id", d.id},
               {"vendor", to_string(d.vendor)},
               {"index", d.index},
               {"name", d.name},
               {"pci_bus_id", d.pci_bus_id},
               {"power_state", to_string(d.power_state)}};
    if (d.energy_kind) o["energy_kind"] = to_string(*d.energy_kind);
    njson metrics = njson::object(), sources = njson::object(), absent = njson::object(),
          absent_sources = njson::object();
    for (std::size_t i = 0; i < kMetricCount; ++i) {
      const auto m = static_cast<Metric>(i);
      const Reading& r = d.metrics[m];
      const std::string key(to_string(m));
      if (r) {
        if (key.ends_with("_bytes"))
          metrics[key] = static_cast<std::uint64_t>(r.value());
        else
          metrics[key] = r.value();
        sources[key] = to_string(r.source());
      } else {
        absent[key] = to_string(r.reason());
        if (r.source() != Source::none) absent_sources[key] = to_string(r.source());
      }
    }
    o["metrics"] = std::move(metrics);
    o["sources"] = std::move(sources);
    o["absent"] = std::move(absent);
    if (!absent_sources.empty()) o["absent_sources"] = std::move(absent_sources);
    o["throttle_reasons"] = d.throttle_reasons;
    o["engines"] = nl_engines(d.engines);
    njson procs = njson::array();
    for (const auto& p : d.processes) {
      njson po = {{"pid", p.pid},
                  {"name", p.name},
                  {"gpu_memory_bytes", nl_optional(p.gpu_memory_bytes)},
                  {"gpu_utilization_percent", nl_optional(p.gpu_utilization_percent)},
                  {"host_rss_bytes", nl_optional(p.host_rss_bytes)},
                  {"per_process_exact", p.per_process_exact},
                  {"engines", nl_engines(p.engines)}};
      if (p.container) {
        nlohmann::json c = nlohmann::json::object();
        if (!p.container->runtime.empty()) c["runtime"] = p.container->runtime;
        if (!p.container->id.empty()) c["id"] = p.container->id;
        if (!p.container->pod_uid.empty()) c["pod_uid"] = p.container->pod_uid;
        if (!p.container->qos.empty()) c["qos"] = p.container->qos;
        po["container"] = std::move(c);
      } else if (p.container_absent != ContainerAbsent::not_collected) {
        po["container_absent"] = std::string(to_string(p.container_absent));
      }
      procs.push_back(std::move(po));
    }
    o["processes"] = std::move(procs);
    o["attributes"] = d.attributes;
    devices.push_back(std::move(o));
  }
  doc["devices"] = std::move(devices);
  if (s.host) {
    const HostSample& h = *s.host;
    njson ho = {{"memory_total_bytes", nl_optional(h.memory_total_bytes)},
                {"memory_available_bytes", nl_optional(h.memory_available_bytes)},
                {"memory_used_bytes", nl_optional(h.memory_used_bytes)},
                {"swap_total_bytes", nl_optional(h.swap_total_bytes)},
                {"swap_used_bytes", nl_optional(h.swap_used_bytes)},
                {"metrics", h.metrics}};
    njson procs = njson::array();
    for (const auto& p : h.processes)
      procs.push_back({{"pid", p.pid}, {"name", p.name}, {"rss_bytes", nl_optional(p.rss_bytes)}});
    ho["processes"] = std::move(procs);
    doc["host"] = std::move(ho);
  }
  njson errors = njson::array();
  for (const auto& e : s.errors) {
    njson eo = {{"code", e.code}, {"message", e.message}};
    if (!e.device.empty()) eo["device"] = e.device;
    errors.push_back(std::move(eo));
  }
  doc["errors"] = std::move(errors);
  return doc;
}

template <typename E>
E nl_enum(const njson& v, std::optional<E> (*parse)(std::string_view)) {
  return parse(v.get_ref<const std::string&>()).value();
}

template <typename T>
std::optional<T> nl_opt(const njson& o, const char* key) {
  const auto it = o.find(key);
  if (it == o.end() || it->is_null()) return std::nullopt;
  return it->get<T>();
}

std::vector<EngineSample> nl_engines_from(const njson& a) {
  std::vector<EngineSample> out;
  for (const auto& e : a) {
    const Source src = nl_enum(e.at("source"), source_from_string);
    const auto& u = e.at("utilization_percent");
    out.push_back({e.at("name").get<std::string>(),
                   u.is_null() ? Reading::missing(nl_enum(e.at("absent"), absence_from_string), src)
                               : Reading::of(u.get<double>(), src)});
  }
  return out;
}

/// The same validation-by-access decode as snapshot_from_json, written against nlohmann::json.
GpuSnapshot nl_decode(const njson& doc) {
  GpuSnapshot s;
  if (doc.at("schema").get_ref<const std::string&>() != kSchema) throw std::runtime_error("schema");
  s.probe = doc.at("probe").get<std::string>();
  s.sequence = doc.at("sequence").get<std::uint64_t>();
  s.time_unix_ns = doc.at("time_unix_ns").get<std::int64_t>();
  s.monotonic_ns = doc.at("monotonic_ns").get<std::int64_t>();
  s.sample_duration_ns = doc.at("sample_duration_ns").get<std::int64_t>();
  for (const auto& dj : doc.at("devices")) {
    DeviceSample d;
    d.id = dj.at("id").get<std::string>();
    d.vendor = nl_enum(dj.at("vendor"), vendor_from_string);
    d.index = dj.at("index").get<int>();
    d.name = dj.at("name").get<std::string>();
    d.pci_bus_id = dj.at("pci_bus_id").get<std::string>();
    d.power_state = nl_enum(dj.at("power_state"), power_state_from_string);
    if (dj.contains("energy_kind"))
      d.energy_kind = nl_enum(dj["energy_kind"], energy_kind_from_string);
    const auto& sources = dj.at("sources");
    for (const auto& [k, v] : dj.at("metrics").items())
      if (auto m = metric_from_string(k))
        d.metrics.set(*m, v.get<double>(), nl_enum(sources.at(k), source_from_string));
    const auto none = njson::object();
    const auto& absent_sources = dj.contains("absent_sources") ? dj["absent_sources"] : none;
    for (const auto& [k, v] : dj.at("absent").items())
      if (auto m = metric_from_string(k))
        d.metrics.set_absent(*m, nl_enum(v, absence_from_string),
                             absent_sources.contains(k)
                                 ? nl_enum(absent_sources[k], source_from_string)
                                 : Source::none);
    d.throttle_reasons = dj.at("throttle_reasons").get<std::vector<std::string>>();
    d.engines = nl_engines_from(dj.at("engines"));
    for (const auto& pj : dj.at("processes")) {
      ProcessSample p;
      p.pid = pj.at("pid").get<std::int64_t>();
      p.name = pj.at("name").get<std::string>();
      p.gpu_memory_bytes = nl_opt<std::uint64_t>(pj, "gpu_memory_bytes");
      p.gpu_utilization_percent = nl_opt<double>(pj, "gpu_utilization_percent");
      p.host_rss_bytes = nl_opt<std::uint64_t>(pj, "host_rss_bytes");
      p.per_process_exact = pj.at("per_process_exact").get<bool>();
      if (const auto c = pj.find("container"); c != pj.end()) {
        ProcessContainer pc;
        pc.runtime = c->value("runtime", "");
        pc.id = c->value("id", "");
        pc.pod_uid = c->value("pod_uid", "");
        pc.qos = c->value("qos", "");
        p.container = std::move(pc);
      } else if (const auto a = pj.find("container_absent"); a != pj.end()) {
        p.container_absent = container_absent_from_string(a->get<std::string>())
                                 .value_or(ContainerAbsent::not_collected);
      }
      p.engines = nl_engines_from(pj.at("engines"));
      d.processes.push_back(std::move(p));
    }
    d.attributes = dj.at("attributes").get<std::map<std::string, std::string>>();
    s.devices.push_back(std::move(d));
  }
  if (const auto it = doc.find("host"); it != doc.end() && !it->is_null()) {
    HostSample h;
    h.memory_total_bytes = nl_opt<std::uint64_t>(*it, "memory_total_bytes");
    h.memory_available_bytes = nl_opt<std::uint64_t>(*it, "memory_available_bytes");
    h.memory_used_bytes = nl_opt<std::uint64_t>(*it, "memory_used_bytes");
    h.swap_total_bytes = nl_opt<std::uint64_t>(*it, "swap_total_bytes");
    h.swap_used_bytes = nl_opt<std::uint64_t>(*it, "swap_used_bytes");
    for (const auto& pj : it->at("processes"))
      h.processes.push_back({pj.at("pid").get<std::int64_t>(), pj.at("name").get<std::string>(),
                             nl_opt<std::uint64_t>(pj, "rss_bytes")});
    h.metrics = it->at("metrics").get<std::map<std::string, double>>();
    s.host = std::move(h);
  }
  for (const auto& ej : doc.at("errors"))
    s.errors.push_back({ej.at("code").get<std::string>(), ej.at("message").get<std::string>(),
                        nl_opt<std::string>(ej, "device").value_or("")});
  return s;
}

void BM_Encode_NlohmannBuildAndDump(benchmark::State& state) {
  std::size_t bytes = 0;
  for (auto _ : state) {
    std::string text = nl_snapshot(snapshot()).dump();
    bytes = text.size();
    benchmark::DoNotOptimize(text.data());
  }
  report_bytes(state, bytes);
}
BENCHMARK(BM_Encode_NlohmannBuildAndDump);

void BM_Encode_NlohmannDumpOnly(benchmark::State& state) {
  const njson doc = nl_snapshot(snapshot());
  std::size_t bytes = 0;
  for (auto _ : state) {
    std::string text = doc.dump();
    bytes = text.size();
    benchmark::DoNotOptimize(text.data());
  }
  report_bytes(state, bytes);
}
BENCHMARK(BM_Encode_NlohmannDumpOnly);

void BM_Decode_Nlohmann(benchmark::State& state) {
  const std::string text = nl_snapshot(snapshot()).dump();
  for (auto _ : state) {
    GpuSnapshot s = nl_decode(njson::parse(text));
    benchmark::DoNotOptimize(s.devices.data());
  }
  report_bytes(state, text.size());
}
BENCHMARK(BM_Decode_Nlohmann);

void BM_Decode_NlohmannParseOnly(benchmark::State& state) {
  const std::string text = nl_snapshot(snapshot()).dump();
  for (auto _ : state) {
    njson doc = njson::parse(text);
    benchmark::DoNotOptimize(&doc);
  }
  report_bytes(state, text.size());
}
BENCHMARK(BM_Decode_NlohmannParseOnly);
#endif

/// Both encoders must carry the same data, or the comparison means nothing.
bool same_data_check() {
  const GpuSnapshot& s = snapshot();
  bool ok = snapshot_from_json_string(to_json_string(s)) == s;
#if GPUSTREAM_HAVE_NLOHMANN
  const std::string nl_text = nl_snapshot(s).dump();
  ok = ok && snapshot_from_json_string(nl_text) == s;
  ok = ok && nl_decode(njson::parse(to_json_string(s))) == s;
  ok = ok && parse_json(nl_text) == parse_json(to_json_string(s));
#else
  std::fprintf(stderr, "codec_bench: built without nlohmann-json; comparison skipped\n");
#endif
  if (!ok) std::fprintf(stderr, "codec_bench: the encoders do not carry the same data\n");
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  if (!same_data_check()) return 1;
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
