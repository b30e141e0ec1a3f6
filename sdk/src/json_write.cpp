// The fast encoder: writes gpustream/1 text straight into a std::string, with no intermediate
// document. Key order and rules match to_json (json_value.cpp); docs/protocol.md is the contract.
#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "gpustream/json.hpp"
#include "gpustream/log.hpp"
#include "json_lossy.hpp"

namespace gpustream {
namespace {

using detail::note_lossy;
using detail::writable;

bool is_bytes_metric(Metric m) noexcept {
  static const auto kTable = [] {
    std::array<bool, kMetricCount> t{};
    for (std::size_t i = 0; i < kMetricCount; ++i)
      t[i] = to_string(static_cast<Metric>(i)).ends_with("_bytes");
    return t;
  }();
  return kTable[static_cast<std::size_t>(m)];
}

/// Appends to a std::string through a raw cursor: the string is grown ahead and trimmed by
/// finish(), so each piece is a bounds check and a memcpy.
class Writer {
 public:
  Writer(std::string& out, std::size_t hint) : out_(out) {
    const std::size_t used = out_.size();
    out_.resize(used + hint);
    p_ = out_.data() + used;
    end_ = out_.data() + out_.size();
  }
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;
  ~Writer() { finish(); }

  /// Trims the string to what was written.
  void finish() { out_.resize(static_cast<std::size_t>(p_ - out_.data())); }

  void raw(std::string_view s) {
    reserve(s.size());
    std::memcpy(p_, s.data(), s.size());
    p_ += s.size();
  }
  void raw(char c) {
    reserve(1);
    *p_++ = c;
  }

  /// `"name":` for names that need no escaping (our keys and enum names).
  void key(std::string_view name) {
    reserve(name.size() + 3);
    *p_++ = '"';
    std::memcpy(p_, name.data(), name.size());
    p_ += name.size();
    *p_++ = '"';
    *p_++ = ':';
  }
  void plain_string(std::string_view s) {
    reserve(s.size() + 2);
    *p_++ = '"';
    std::memcpy(p_, s.data(), s.size());
    p_ += s.size();
    *p_++ = '"';
  }

  void string(std::string_view s) {
    std::size_t i = 0;
    while (i < s.size() && kPlain[static_cast<unsigned char>(s[i])]) ++i;
    if (i == s.size()) return plain_string(s);  // printable ASCII, the usual case
    if (!is_valid_utf8(s)) {
      const std::string valid = to_valid_utf8(s);
      note_lossy("string that is not UTF-8", valid);
      escaped(valid);
    } else {
      escaped(s);
    }
  }

  template <typename Int>
  void integer(Int v) {
    reserve(24);
    p_ = std::to_chars(p_, p_ + 24, v).ptr;
  }

  /// Precondition: std::isfinite(v). Always reads back as a double ("1.0", not "1").
  void number(double v) {
    reserve(40);
    char* const start = p_;
    p_ = std::to_chars(p_, p_ + 38, v).ptr;
    for (const char* c = start; c != p_; ++c)
      if (*c == '.' || *c == 'e') return;
    *p_++ = '.';
    *p_++ = '0';
  }

  /// A metric value: a whole, non-negative byte count as an integer, anything else as a double.
  void metric_value(Metric m, double v) {
    if (is_bytes_metric(m) && v >= 0 && v < 18446744073709551616.0 && v == std::floor(v))
      integer(static_cast<std::uint64_t>(v));
    else
      number(v);
  }

  template <typename Int>
  void optional_integer(const std::optional<Int>& v) {
    if (v)
      integer(*v);
    else
      raw("null");
  }

  void optional_number(const std::optional<double>& v, std::string_view where) {
    if (v && std::isfinite(*v)) return number(*v);
    if (v) note_lossy("non-finite number", where);
    raw("null");
  }

 private:
  /// Bytes that go into a JSON string as they are: printable ASCII but '"' and '\\'.
  static constexpr std::array<bool, 256> kPlain = [] {
    std::array<bool, 256> t{};
    for (int c = 0x20; c < 0x80; ++c) t[static_cast<std::size_t>(c)] = c != '"' && c != '\\';
    return t;
  }();

  void reserve(std::size_t n) {
    if (static_cast<std::size_t>(end_ - p_) < n) grow(n);
  }

  [[gnu::noinline]] void grow(std::size_t n) {
    const auto used = static_cast<std::size_t>(p_ - out_.data());
    out_.resize(std::max(out_.size() * 2, used + n));
    p_ = out_.data() + used;
    end_ = out_.data() + out_.size();
  }

  /// Precondition: `s` is valid UTF-8.
  void escaped(std::string_view s) {
    static constexpr char kHex[] = "0123456789abcdef";
    reserve(s.size() * 6 + 2);  // worst case: every byte as \u00XX
    *p_++ = '"';
    for (const char ch : s) {
      const auto c = static_cast<unsigned char>(ch);
      if (c >= 0x20 && c != '"' && c != '\\') {
        *p_++ = ch;
        continue;
      }
      *p_++ = '\\';
      switch (c) {
        case '"':
          *p_++ = '"';
          break;
        case '\\':
          *p_++ = '\\';
          break;
        case '\n':
          *p_++ = 'n';
          break;
        case '\r':
          *p_++ = 'r';
          break;
        case '\t':
          *p_++ = 't';
          break;
        case '\b':
          *p_++ = 'b';
          break;
        case '\f':
          *p_++ = 'f';
          break;
        default:
          *p_++ = 'u';
          *p_++ = '0';
          *p_++ = '0';
          *p_++ = kHex[c >> 4];
          *p_++ = kHex[c & 0xF];
      }
    }
    *p_++ = '"';
  }

  std::string& out_;
  char* p_ = nullptr;
  char* end_ = nullptr;
};

void write_engines(Writer& w, const std::vector<EngineSample>& engines) {
  w.raw('[');
  bool first = true;
  for (const auto& e : engines) {
    if (!first) w.raw(',');
    first = false;
    const Reading r = writable(e.utilization_percent, e.name);
    w.raw("{\"name\":");
    w.string(e.name);
    w.raw(",\"utilization_percent\":");
    if (r.has_value())
      w.number(r.value());
    else
      w.raw("null");
    w.raw(",\"source\":");
    w.plain_string(to_string(r.source()));
    if (!r.has_value()) {
      w.raw(",\"absent\":");
      w.plain_string(to_string(r.reason()));
    }
    w.raw('}');
  }
  w.raw(']');
}

void write_process(Writer& w, const ProcessSample& p) {
  w.raw("{\"pid\":");
  w.integer(p.pid);
  w.raw(",\"name\":");
  w.string(p.name);
  w.raw(",\"gpu_memory_bytes\":");
  w.optional_integer(p.gpu_memory_bytes);
  if (p.gtt_memory_bytes) {  // left out when unknown: the key is newer than the format
    w.raw(",\"gtt_memory_bytes\":");
    w.optional_integer(p.gtt_memory_bytes);
  }
  w.raw(",\"gpu_utilization_percent\":");
  w.optional_number(p.gpu_utilization_percent, p.name);
  w.raw(",\"host_rss_bytes\":");
  w.optional_integer(p.host_rss_bytes);
  w.raw(p.per_process_exact ? ",\"per_process_exact\":true" : ",\"per_process_exact\":false");
  if (p.container) {
    // Only the known parts: an empty string is left out.
    w.raw(",\"container\":{");
    bool first = true;
    for (const auto& [key, value] :
         {std::pair<std::string_view, const std::string*>{"runtime", &p.container->runtime},
          {"id", &p.container->id},
          {"pod_uid", &p.container->pod_uid},
          {"qos", &p.container->qos}}) {
      if (value->empty()) continue;
      w.raw(first ? "\"" : ",\"");
      w.raw(key);
      w.raw("\":");
      w.string(*value);
      first = false;
    }
    w.raw('}');
  } else if (p.container_absent != ContainerAbsent::not_collected) {
    w.raw(",\"container_absent\":\"");
    w.raw(to_string(p.container_absent));
    w.raw('"');
  }
  w.raw(",\"engines\":");
  write_engines(w, p.engines);
  w.raw('}');
}

void write_metrics(Writer& w, const DeviceSample& d) {
  std::array<Reading, kMetricCount> r;
  for (std::size_t i = 0; i < kMetricCount; ++i)
    r[i] = writable(d.metrics[static_cast<Metric>(i)], d.id);

  // One object per aspect: values, their sources, absence reasons, sources of absent metrics.
  // `always`: write {} when no metric qualifies (otherwise the key is left out).
  const auto object = [&](std::string_view name, bool always, auto wanted, auto write_one) {
    bool first = true;
    for (std::size_t i = 0; i < kMetricCount; ++i) {
      if (!wanted(r[i])) continue;
      w.raw(',');
      if (first) {
        w.key(name);
        w.raw('{');
        first = false;
      }
      w.key(to_string(static_cast<Metric>(i)));
      write_one(static_cast<Metric>(i), r[i]);
    }
    if (!first) {
      w.raw('}');
    } else if (always) {
      w.raw(',');
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

void write_device(Writer& w, const DeviceSample& d) {
  w.raw("{\"id\":");
  w.string(d.id);
  w.raw(",\"vendor\":");
  w.plain_string(to_string(d.vendor));
  w.raw(",\"index\":");
  w.integer(d.index);
  w.raw(",\"name\":");
  w.string(d.name);
  w.raw(",\"pci_bus_id\":");
  w.string(d.pci_bus_id);
  w.raw(",\"power_state\":");
  w.plain_string(to_string(d.power_state));
  if (d.energy_kind) {
    w.raw(",\"energy_kind\":");
    w.plain_string(to_string(*d.energy_kind));
  }
  if (d.power_kind) {
    w.raw(",\"power_kind\":");
    w.plain_string(to_string(*d.power_kind));
  }
  if (!d.parent.empty()) {
    w.raw(",\"parent\":");
    w.string(d.parent);
  }
  if (d.mig) {
    w.raw(",\"mig\":{\"gpu_instance_id\":");
    w.integer(d.mig->gpu_instance_id);
    w.raw(",\"compute_instance_id\":");
    w.integer(d.mig->compute_instance_id);
    w.raw(",\"profile\":");
    w.string(d.mig->profile);
    w.raw('}');
  }
  if (d.partitioned) w.raw(",\"partitioned\":true");
  write_metrics(w, d);
  w.raw(",\"throttle_reasons\":[");
  for (std::size_t i = 0; i < d.throttle_reasons.size(); ++i) {
    if (i) w.raw(',');
    w.string(d.throttle_reasons[i]);
  }
  w.raw(']');
  if (d.throttle_reasons_absent) {
    w.raw(",\"throttle_reasons_absent\":");
    w.plain_string(to_string(*d.throttle_reasons_absent));
  }
  w.raw(",\"engines\":");
  write_engines(w, d.engines);
  w.raw(",\"processes\":[");
  for (std::size_t i = 0; i < d.processes.size(); ++i) {
    if (i) w.raw(',');
    write_process(w, d.processes[i]);
  }
  w.raw(']');
  if (d.processes_absent) {
    w.raw(",\"processes_absent\":");
    w.plain_string(to_string(*d.processes_absent));
  }
  w.raw(",\"attributes\":{");
  bool first = true;
  for (const auto& [k, v] : d.attributes) {
    if (!first) w.raw(',');
    first = false;
    w.string(k);
    w.raw(':');
    w.string(v);
  }
  w.raw("}}");
}

void write_host(Writer& w, const HostSample& h) {
  w.raw("{\"memory_total_bytes\":");
  w.optional_integer(h.memory_total_bytes);
  w.raw(",\"memory_available_bytes\":");
  w.optional_integer(h.memory_available_bytes);
  w.raw(",\"memory_used_bytes\":");
  w.optional_integer(h.memory_used_bytes);
  w.raw(",\"swap_total_bytes\":");
  w.optional_integer(h.swap_total_bytes);
  w.raw(",\"swap_used_bytes\":");
  w.optional_integer(h.swap_used_bytes);
  w.raw(",\"processes\":[");
  for (std::size_t i = 0; i < h.processes.size(); ++i) {
    const auto& p = h.processes[i];
    w.raw(i ? ",{\"pid\":" : "{\"pid\":");
    w.integer(p.pid);
    w.raw(",\"name\":");
    w.string(p.name);
    w.raw(",\"rss_bytes\":");
    w.optional_integer(p.rss_bytes);
    w.raw('}');
  }
  w.raw("],\"metrics\":{");
  bool first = true;
  for (const auto& [k, v] : h.metrics) {
    if (!std::isfinite(v)) {
      note_lossy("non-finite host metric", k);
      continue;
    }
    if (!first) w.raw(',');
    first = false;
    w.string(k);
    w.raw(':');
    w.number(v);
  }
  w.raw("}}");
}

std::size_t size_hint(const GpuSnapshot& s) {
  std::size_t n = 256 + s.errors.size() * 128;
  for (const auto& d : s.devices) n += 1200 + d.processes.size() * 220 + d.engines.size() * 80;
  if (s.host) n += 400 + s.host->processes.size() * 80;
  return n;
}

}  // namespace

void append_json(std::string& out, const GpuSnapshot& s) {
  Writer w(out, size_hint(s));
  w.raw("{\"schema\":");
  w.plain_string(kSchema);
  w.raw(",\"probe\":");
  w.string(s.probe);
  if (!s.node.empty()) {
    w.raw(",\"node\":");
    w.string(s.node);
  }
  w.raw(",\"sequence\":");
  w.integer(s.sequence);
  w.raw(",\"time_unix_ns\":");
  w.integer(s.time_unix_ns);
  w.raw(",\"monotonic_ns\":");
  w.integer(s.monotonic_ns);
  w.raw(",\"sample_duration_ns\":");
  w.integer(s.sample_duration_ns);
  w.raw(",\"devices\":[");
  for (std::size_t i = 0; i < s.devices.size(); ++i) {
    if (i) w.raw(',');
    write_device(w, s.devices[i]);
  }
  w.raw(']');
  if (s.host) {
    w.raw(",\"host\":");
    write_host(w, *s.host);
  }
  w.raw(",\"errors\":[");
  for (std::size_t i = 0; i < s.errors.size(); ++i) {
    const auto& e = s.errors[i];
    w.raw(i ? ",{\"code\":" : "{\"code\":");
    w.string(e.code);
    w.raw(",\"message\":");
    w.string(e.message);
    if (!e.device.empty()) {
      w.raw(",\"device\":");
      w.string(e.device);
    }
    w.raw('}');
  }
  w.raw("]}");
}

void append_json(std::string& out, const DeviceSample& device) {
  Writer w(out, 2048);
  write_device(w, device);
}

void append_json(std::string& out, const HostSample& host) {
  Writer w(out, 1024);
  write_host(w, host);
}

std::string to_json_string(const GpuSnapshot& snapshot) {
  std::string out;
  append_json(out, snapshot);
  return out;
}

}  // namespace gpustream
