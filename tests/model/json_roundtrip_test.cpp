// The codec gives back what it was given: text and document encoders, every enum value, exact
// doubles, whole byte counts as integers, and the guards for NaN and for bytes that are not UTF-8.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "gpustream/json.hpp"
#include "model/sample_snapshots.hpp"

namespace gpustream {
namespace {

namespace json = boost::json;

GpuSnapshot through_text(const GpuSnapshot& s) {
  return snapshot_from_json_string(to_json_string(s));
}

TEST(JsonRoundTrip, RichSnapshotThroughText) {
  const GpuSnapshot s = test::rich_snapshot();
  EXPECT_EQ(through_text(s), s);
}

TEST(JsonRoundTrip, RichSnapshotThroughDocument) {
  const GpuSnapshot s = test::rich_snapshot();
  EXPECT_EQ(snapshot_from_json(to_json(s)), s);
  // Boost's own serializer writes doubles differently ("3.12457E2"); they still read back exactly.
  EXPECT_EQ(snapshot_from_json_string(json::serialize(to_json(s))), s);
}

TEST(JsonRoundTrip, EveryEnumValue) {
  const GpuSnapshot s = test::every_enum_snapshot();
  ASSERT_EQ(s.devices[0].engines.size(), kSourceCount * 8u);  // every (source, absence) pair
  EXPECT_EQ(through_text(s), s);
  EXPECT_EQ(snapshot_from_json(to_json(s)), s);
}

TEST(JsonRoundTrip, EmptySnapshot) {
  const GpuSnapshot s;
  EXPECT_EQ(through_text(s), s);
  const std::string text = to_json_string(s);
  EXPECT_EQ(text.find("\"host\""), std::string::npos) << "absent host is left out";
}

TEST(JsonRoundTrip, TextAndDocumentEncodersAgree) {
  for (const GpuSnapshot& s : {test::rich_snapshot(), test::every_enum_snapshot(), GpuSnapshot{}})
    EXPECT_EQ(parse_json(to_json_string(s)), to_json(s));
}

TEST(JsonRoundTrip, DeviceAndHostOnTheirOwn) {
  const GpuSnapshot s = test::rich_snapshot();
  EXPECT_EQ(device_from_json(to_json(s.devices[0])), s.devices[0]);
  EXPECT_EQ(host_from_json(to_json(*s.host)), *s.host);
  std::string text;
  append_json(text, s.devices[1]);
  EXPECT_EQ(device_from_json(parse_json(text)), s.devices[1]);
  text.clear();
  append_json(text, *s.host);
  EXPECT_EQ(host_from_json(parse_json(text)), *s.host);
}

TEST(JsonRoundTrip, AppendKeepsWhatWasInTheBuffer) {
  const GpuSnapshot s = test::rich_snapshot();
  std::string buffer = "prefix:";
  append_json(buffer, s);
  EXPECT_EQ(buffer, "prefix:" + to_json_string(s));
}

TEST(JsonEncoding, DeterministicGoldenText) {
  GpuSnapshot s;
  s.probe = "sim";
  s.sequence = 3;
  s.time_unix_ns = 100;
  s.monotonic_ns = 50;
  s.sample_duration_ns = 7;
  DeviceSample d;
  d.id = "sim-0";
  d.vendor = Vendor::simulated;
  d.name = "Sim";
  d.power_state = PowerState::active;
  d.energy_kind = EnergyKind::integrated;
  d.metrics.set(Metric::utilization_percent, 50, Source::simulated);
  d.metrics.set(Metric::memory_used_bytes, 1024, Source::simulated);
  d.metrics.set(Metric::power_watts, 0.1, Source::simulated);
  d.metrics.fill_absent(Absence::unsupported);
  d.metrics.set_absent(Metric::fan_percent, Absence::tool_failed, Source::nvidia_smi);
  d.engines = {{"render", Reading::of(12.5, Source::fdinfo)},
               {"video", Reading::missing(Absence::not_yet_seeded)}};
  ProcessSample p;
  p.pid = 42;
  p.name = "a";
  p.gpu_memory_bytes = 4096;
  d.processes.push_back(p);
  s.devices.push_back(d);
  s.errors.push_back({"c", "m", ""});
  const std::string expected =
      R"({"schema":"gpustream/1","probe":"sim","sequence":3,"time_unix_ns":100,)"
      R"("monotonic_ns":50,"sample_duration_ns":7,"devices":[{"id":"sim-0","vendor":"simulated",)"
      R"("index":0,"name":"Sim","pci_bus_id":"","power_state":"active",)"
      R"("energy_kind":"integrated","metrics":{"utilization_percent":50.0,)"
      R"("memory_used_bytes":1024,"power_watts":0.1},"sources":{"utilization_percent":)"
      R"("simulated","memory_used_bytes":"simulated","power_watts":"simulated"},)"
      R"("absent":{"memory_utilization_percent":"unsupported","memory_total_bytes":)"
      R"("unsupported","temperature_celsius":"unsupported","power_average_watts":"unsupported",)"
      R"("power_limit_watts":"unsupported","energy_joules":"unsupported",)"
      R"("clock_graphics_mhz":"unsupported","clock_sm_mhz":"unsupported",)"
      R"("clock_memory_mhz":"unsupported","fan_percent":"tool_failed","fan_rpm":"unsupported",)"
      R"("gtt_used_bytes":"unsupported","gtt_total_bytes":"unsupported",)"
      R"("memory_free_bytes":"unsupported",)"
      R"("pcie_rx_bytes_per_second":"unsupported","pcie_tx_bytes_per_second":"unsupported",)"
      R"("pcie_link_generation":"unsupported","pcie_link_generation_max":"unsupported",)"
      R"("pcie_link_width":"unsupported","pcie_link_width_max":"unsupported",)"
      R"("nvlink_rx_bytes_per_second":"unsupported","nvlink_tx_bytes_per_second":"unsupported",)"
      R"("ecc_corrected_volatile":"unsupported","ecc_uncorrected_volatile":"unsupported",)"
      R"("ecc_corrected_aggregate":"unsupported","ecc_uncorrected_aggregate":"unsupported",)"
      R"("retired_pages_single_bit":"unsupported","retired_pages_double_bit":"unsupported",)"
      R"("retired_pages_pending":"unsupported","remapped_rows_corrected":"unsupported",)"
      R"("remapped_rows_uncorrected":"unsupported","remapped_rows_pending":"unsupported",)"
      R"("remapped_rows_failed":"unsupported","graphics_activity_percent":"unsupported",)"
      R"("sm_activity_percent":"unsupported","sm_occupancy_percent":"unsupported",)"
      R"("tensor_activity_percent":"unsupported","dram_activity_percent":"unsupported",)"
      R"("fp64_activity_percent":"unsupported","fp32_activity_percent":"unsupported",)"
      R"("fp16_activity_percent":"unsupported"},)"
      R"("absent_sources":{"fan_percent":"nvidia-smi"},"throttle_reasons":[],)"
      R"("engines":[{"name":"render","utilization_percent":12.5,"source":"fdinfo"},)"
      R"({"name":"video","utilization_percent":null,"source":"none","absent":"not_yet_seeded"}],)"
      R"("processes":[{"pid":42,"name":"a","gpu_memory_bytes":4096,)"
      R"("gpu_utilization_percent":null,"host_rss_bytes":null,"per_process_exact":true,)"
      R"("engines":[]}],"attributes":{}}],"errors":[{"code":"c","message":"m"}]})";
  EXPECT_EQ(to_json_string(s), expected);
  EXPECT_EQ(to_json_string(s), to_json_string(s));
  EXPECT_EQ(through_text(s), s);
}

TEST(JsonRoundTrip, ProcessGttMemoryKnownZeroAndUnknown) {
  GpuSnapshot s;
  DeviceSample d;
  d.id = "amd-0";
  for (const std::optional<std::uint64_t>& gtt :
       {std::optional<std::uint64_t>{22528ULL * 1024}, std::optional<std::uint64_t>{0},
        std::optional<std::uint64_t>{}}) {
    ProcessSample p;
    p.pid = static_cast<std::int64_t>(d.processes.size()) + 1;
    p.gpu_memory_bytes = 4096;
    p.gtt_memory_bytes = gtt;
    d.processes.push_back(p);
  }
  s.devices.push_back(d);
  const std::string text = to_json_string(s);
  EXPECT_NE(text.find(R"("gpu_memory_bytes":4096,"gtt_memory_bytes":23068672,)"), std::string::npos)
      << text;
  EXPECT_NE(text.find(R"("gtt_memory_bytes":0,)"), std::string::npos) << "0 is a value";
  const json::value doc = parse_json(text);
  const auto& procs = doc.at("devices").at(0).at("processes").as_array();
  EXPECT_TRUE(procs[0].at("gtt_memory_bytes").is_int64());
  EXPECT_FALSE(procs[2].as_object().contains("gtt_memory_bytes")) << "unknown: left out";
  EXPECT_EQ(doc, to_json(s)) << "text and document encoders agree";
  const GpuSnapshot back = through_text(s);
  EXPECT_EQ(back, s);
  EXPECT_EQ(back.devices[0].processes[1].gtt_memory_bytes, 0u);
  EXPECT_FALSE(back.devices[0].processes[2].gtt_memory_bytes);
  EXPECT_EQ(snapshot_from_json(to_json(s)), s);
}

TEST(JsonRoundTrip, ProcessGttMemoryFromOlderAndNullProducers) {
  // A producer older than the key (no gtt_memory_bytes) and one writing null both read as
  // unknown; a decoder older than the key ignores it (unknown keys are ignored).
  json::value doc = to_json(test::rich_snapshot());
  auto& p0 = doc.at("devices").at(0).at("processes").at(0).as_object();
  ASSERT_FALSE(p0.contains("gtt_memory_bytes"));
  EXPECT_FALSE(snapshot_from_json(doc).devices[0].processes[0].gtt_memory_bytes);
  p0["gtt_memory_bytes"] = nullptr;
  EXPECT_FALSE(snapshot_from_json(doc).devices[0].processes[0].gtt_memory_bytes);
  p0["gtt_memory_bytes"] = 8192;
  EXPECT_EQ(snapshot_from_json(doc).devices[0].processes[0].gtt_memory_bytes, 8192u);
}

TEST(JsonRoundTrip, ThrottleReasonsAbsentWithItsReason) {
  GpuSnapshot s;
  DeviceSample a, b, c;
  a.id = "amd-0";
  a.throttle_reasons_absent = Absence::no_permission;
  b.id = "amd-1";
  b.throttle_reasons = {"ppt0", "temp_hotspot"};
  c.id = "amd-2";  // not throttled: neither reasons nor an absence
  s.devices = {a, b, c};
  const std::string text = to_json_string(s);
  EXPECT_NE(text.find(R"("throttle_reasons":[],"throttle_reasons_absent":"no_permission",)"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("throttle_reasons_absent"), text.rfind("throttle_reasons_absent"))
      << "written only where set";
  EXPECT_EQ(parse_json(text), to_json(s));
  const GpuSnapshot back = through_text(s);
  EXPECT_EQ(back, s);
  EXPECT_EQ(back.devices[0].throttle_reasons_absent, Absence::no_permission);
  EXPECT_FALSE(back.devices[1].throttle_reasons_absent);
  EXPECT_FALSE(back.devices[2].throttle_reasons_absent);
  EXPECT_EQ(snapshot_from_json(to_json(s)), s);
}

TEST(JsonEncoding, WholeByteCountsAreIntegersOtherNumbersDoubles) {
  const GpuSnapshot s = test::rich_snapshot();
  const json::value doc = parse_json(to_json_string(s));
  const auto& metrics = doc.at("devices").at(0).at("metrics");
  EXPECT_TRUE(metrics.at("memory_used_bytes").is_int64());
  EXPECT_EQ(metrics.at("memory_used_bytes").as_int64(), 34359738368);
  EXPECT_TRUE(metrics.at("memory_total_bytes").is_int64());
  EXPECT_TRUE(metrics.at("gtt_total_bytes").is_double()) << "0.30000000000000004 bytes stays";
  EXPECT_TRUE(metrics.at("temperature_celsius").is_double()) << "64.0, not 64";
  EXPECT_TRUE(metrics.at("clock_graphics_mhz").is_double());
  const auto& proc = doc.at("devices").at(0).at("processes").at(0);
  EXPECT_TRUE(proc.at("gpu_memory_bytes").is_int64());
  EXPECT_TRUE(doc.at("sequence").is_uint64());
}

TEST(JsonEncoding, DoublesRoundTripExactly) {
  std::mt19937_64 rng(12345);
  HostSample h;
  for (int i = 0; i < 4000; ++i) {
    const std::uint64_t bits = rng();
    double d = 0;
    std::memcpy(&d, &bits, sizeof d);
    if (!std::isfinite(d)) continue;
    h.metrics.emplace("random_" + std::to_string(i), d);
  }
  const double specials[] = {0.0,
                             -0.0,
                             0.1,
                             1.0 / 3.0,
                             std::numeric_limits<double>::min(),
                             std::numeric_limits<double>::denorm_min(),
                             std::numeric_limits<double>::max(),
                             -std::numeric_limits<double>::max(),
                             std::numeric_limits<double>::epsilon(),
                             9007199254740993.0,
                             1e21,
                             1e-7,
                             123456789.012};
  for (std::size_t i = 0; i < std::size(specials); ++i)
    h.metrics.emplace("special_" + std::to_string(i), specials[i]);
  GpuSnapshot s;
  s.host = h;
  DeviceSample d;
  for (std::size_t i = 0; i < kMetricCount; ++i)
    d.metrics.set(static_cast<Metric>(i), specials[i % std::size(specials)], Source::replay);
  s.devices.push_back(d);
  const GpuSnapshot back = through_text(s);
  ASSERT_TRUE(back.host);
  for (const auto& [k, v] : h.metrics) {
    const double got = back.host->metrics.at(k);
    EXPECT_EQ(std::memcmp(&got, &v, sizeof v) == 0 || (v == 0 && got == 0), true)
        << k << ": wrote " << v << " read " << got;
  }
  EXPECT_EQ(back, s);
}

TEST(JsonEncoding, NonFiniteValuesNeverReachTheText) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  GpuSnapshot s;
  DeviceSample d;
  d.id = "d";
  d.metrics.set(Metric::power_watts, nan, Source::nvml);
  d.metrics.set(Metric::temperature_celsius, -inf, Source::sysfs);
  d.metrics.set(Metric::utilization_percent, 10, Source::nvml);
  d.engines = {{"render", Reading::of(inf, Source::fdinfo)}};
  ProcessSample p;
  p.gpu_utilization_percent = nan;
  d.processes.push_back(p);
  s.devices.push_back(d);
  s.host = HostSample{};
  s.host->metrics = {{"bad_watts", inf}, {"good_watts", 5}};

  for (const std::string& text : {to_json_string(s), json::serialize(to_json(s))}) {
    for (const char* bad : {":nan", ":-nan", ":inf", ":-inf", "NaN", "Infinity", "e99999"})
      EXPECT_EQ(text.find(bad), std::string::npos) << bad << " in " << text;
    const GpuSnapshot back = snapshot_from_json_string(text);  // valid JSON, valid snapshot
    const auto& m = back.devices[0].metrics;
    EXPECT_EQ(m[Metric::power_watts], Reading::missing(Absence::unsupported, Source::nvml));
    EXPECT_EQ(m[Metric::temperature_celsius],
              Reading::missing(Absence::unsupported, Source::sysfs));
    EXPECT_EQ(m[Metric::utilization_percent], Reading::of(10, Source::nvml));
    EXPECT_EQ(back.devices[0].engines[0].utilization_percent,
              Reading::missing(Absence::unsupported, Source::fdinfo));
    EXPECT_FALSE(back.devices[0].processes[0].gpu_utilization_percent.has_value());
    EXPECT_EQ(back.host->metrics, (std::map<std::string, double>{{"good_watts", 5}}));
  }
}

TEST(JsonEncoding, EscapesControlCharactersAndQuotes) {
  GpuSnapshot s;
  s.probe = std::string(
                "a\"b\\c\nd\te\x01"
                "f\x1f") +
            std::string(1, '\0') + "/é€😀";
  const std::string text = to_json_string(s);
  EXPECT_NE(text.find(R"(a\"b\\c\nd\te\u0001f\u001f\u0000/é€😀)"), std::string::npos) << text;
  EXPECT_EQ(through_text(s), s);
  EXPECT_EQ(snapshot_from_json(to_json(s)), s);
}

TEST(JsonEncoding, BytesThatAreNotUtf8AreReplaced) {
  GpuSnapshot s;
  s.probe = "gpu\xff\xfe-\xc0\x80-\xed\xa0\x80-ok\xc3\xa9";
  s.errors.push_back({"bad", "trunc\xe2\x82", ""});
  const std::string replaced = "gpu\uFFFD\uFFFD-\uFFFD\uFFFD-\uFFFD\uFFFD\uFFFD-ok\xc3\xa9";
  for (const std::string& text : {to_json_string(s), json::serialize(to_json(s))}) {
    EXPECT_TRUE(is_valid_utf8(text));
    const GpuSnapshot back = snapshot_from_json_string(text);
    EXPECT_EQ(back.probe, replaced);
    EXPECT_EQ(back.errors[0].message, "trunc\uFFFD\uFFFD");
  }
}

TEST(Utf8, Validation) {
  EXPECT_TRUE(is_valid_utf8(""));
  EXPECT_TRUE(is_valid_utf8("plain ascii"));
  EXPECT_TRUE(is_valid_utf8("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\xf4\x8f\xbf\xbf"));
  EXPECT_FALSE(is_valid_utf8("\x80"));              // lone continuation
  EXPECT_FALSE(is_valid_utf8("\xc0\xaf"));          // overlong
  EXPECT_FALSE(is_valid_utf8("\xe0\x80\xaf"));      // overlong
  EXPECT_FALSE(is_valid_utf8("\xed\xa0\x80"));      // surrogate
  EXPECT_FALSE(is_valid_utf8("\xf4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(is_valid_utf8("\xe2\x82"));          // truncated
  EXPECT_EQ(to_valid_utf8("a\x80"
                          "b"),
            "a\uFFFD"
            "b");
  EXPECT_EQ(to_valid_utf8("\xe2\x82\xac"), "\xe2\x82\xac");
}

TEST(JsonRoundTrip, ProcessSlurmJobAndWhyItIsAbsent) {
  GpuSnapshot s;
  DeviceSample d;
  d.id = "GPU-0";
  ProcessSample in_job;
  in_job.pid = 1;
  in_job.slurm = SlurmJob{.job_id = "1235",
                          .step = "batch",
                          .uid = 4000000000u,
                          .user = "alice",
                          .array_job_id = "1230",
                          .array_task_id = "5"};
  ProcessSample job_only;
  job_only.pid = 2;
  job_only.slurm = SlurmJob{.job_id = "7"};
  ProcessSample odd;
  odd.pid = 3;
  odd.slurm_absent = SlurmAbsent::unrecognized;
  ProcessSample outside;
  outside.pid = 4;
  d.processes = {in_job, job_only, odd, outside};
  s.devices.push_back(d);
  const std::string text = to_json_string(s);
  EXPECT_NE(text.find(R"("slurm":{"job_id":"1235","step":"batch","uid":4000000000,"user":"alice",)"
                      R"("array_job_id":"1230","array_task_id":"5"})"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(R"("slurm":{"job_id":"7"})"), std::string::npos) << "unknown parts left out";
  const json::value doc = parse_json(text);
  const auto& procs = doc.at("devices").at(0).at("processes").as_array();
  EXPECT_FALSE(procs[0].as_object().contains("slurm_absent"));
  EXPECT_EQ(procs[2].at("slurm_absent"), "unrecognized");
  EXPECT_FALSE(procs[3].as_object().contains("slurm")) << "outside Slurm: nothing written";
  EXPECT_FALSE(procs[3].as_object().contains("slurm_absent"));
  EXPECT_EQ(doc, to_json(s)) << "text and document encoders agree";
  EXPECT_EQ(through_text(s), s);
  EXPECT_EQ(snapshot_from_json(to_json(s)), s);
}

TEST(JsonDecode, SlurmStringsAreBoundedAndNewReasonsReadAsNone) {
  json::value doc = to_json(test::rich_snapshot());
  auto& p0 = doc.at("devices").at(0).at("processes").at(0).as_object();
  p0["slurm"] = json::object{{"job_id", "12"}, {"user", std::string(256, 'u')}};
  EXPECT_EQ(snapshot_from_json(doc).devices[0].processes[0].slurm->user.size(), 256u);
  p0["slurm"].as_object()["user"] = std::string(257, 'u');
  EXPECT_THROW(snapshot_from_json(doc), JsonError);
  EXPECT_THROW(snapshot_from_json_string(json::serialize(doc)), JsonError);
  p0["slurm"] = json::object{{"step", "0"}};  // job_id is required inside the object
  EXPECT_THROW(snapshot_from_json(doc), JsonError);
  p0.erase("slurm");
  p0["slurm_absent"] = "a_reason_from_a_newer_producer";
  EXPECT_EQ(snapshot_from_json(doc).devices[0].processes[0].slurm_absent, SlurmAbsent::none);
}

TEST(JsonRoundTrip, ProcessPodAndDevicePods) {
  GpuSnapshot s;
  DeviceSample d;
  d.id = "GPU-0";
  d.pods = {KubernetesPod{"train-0", "ml", "trainer"}, KubernetesPod{"infer-1", "ml", "server"}};
  ProcessSample in_pod;
  in_pod.pid = 1;
  in_pod.pod = KubernetesPod{"train-0", "ml", "trainer"};
  ProcessSample shared;
  shared.pid = 2;
  shared.pod_absent = PodAbsent::ambiguous;
  ProcessSample host;
  host.pid = 3;
  d.processes = {in_pod, shared, host};
  s.devices.push_back(d);
  DeviceSample free_device;
  free_device.id = "GPU-1";
  s.devices.push_back(free_device);
  const std::string text = to_json_string(s);
  EXPECT_NE(text.find(R"("pod":{"name":"train-0","namespace":"ml","container":"trainer"})"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(R"("pods":[{"name":"train-0","namespace":"ml","container":"trainer"},)"
                      R"({"name":"infer-1","namespace":"ml","container":"server"}])"),
            std::string::npos)
      << text;
  const json::value doc = parse_json(text);
  const auto& procs = doc.at("devices").at(0).at("processes").as_array();
  EXPECT_FALSE(procs[0].as_object().contains("pod_absent"));
  EXPECT_EQ(procs[1].at("pod_absent"), "ambiguous");
  EXPECT_FALSE(procs[2].as_object().contains("pod")) << "outside a pod: nothing written";
  EXPECT_FALSE(procs[2].as_object().contains("pod_absent"));
  EXPECT_FALSE(doc.at("devices").at(1).as_object().contains("pods")) << "held by nobody";
  EXPECT_EQ(doc, to_json(s)) << "text and document encoders agree";
  EXPECT_EQ(through_text(s), s);
  EXPECT_EQ(snapshot_from_json(to_json(s)), s);
}

TEST(JsonDecode, PodStringsAreBoundedAndNewReasonsReadAsNone) {
  json::value doc = to_json(test::rich_snapshot());
  auto& d0 = doc.at("devices").at(0).as_object();
  auto& p0 = d0.at("processes").at(0).as_object();
  p0["pod"] =
      json::object{{"name", std::string(253, 'p')}, {"namespace", "ns"}, {"container", "c"}};
  EXPECT_EQ(snapshot_from_json(doc).devices[0].processes[0].pod->name.size(), 253u);
  p0["pod"].as_object()["name"] = std::string(254, 'p');
  EXPECT_THROW(snapshot_from_json(doc), JsonError);
  EXPECT_THROW(snapshot_from_json_string(json::serialize(doc)), JsonError);
  p0["pod"] = json::object{{"name", "p"}, {"namespace", "ns"}};  // container is required
  EXPECT_THROW(snapshot_from_json(doc), JsonError);
  p0.erase("pod");
  d0["pods"] = json::array{
      json::object{{"name", "p"}, {"namespace", std::string(254, 'n')}, {"container", "c"}}};
  EXPECT_THROW(snapshot_from_json(doc), JsonError);
  d0.erase("pods");
  p0["pod_absent"] = "a_reason_from_a_newer_producer";
  EXPECT_EQ(snapshot_from_json(doc).devices[0].processes[0].pod_absent, PodAbsent::none);
}

}  // namespace
}  // namespace gpustream
