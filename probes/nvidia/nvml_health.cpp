// NvmlBackend: interconnect and health of one physical GPU (under the backend's lock, inside a
// session, with a valid handle): PCIe throughput and link, NVLink throughput, ECC error counters,
// retired pages and remapped rows. Every function is optional: a library without it leaves its
// metrics absent `unsupported`, as does NVML_ERROR_NOT_SUPPORTED (e.g. ECC off, no NVLink, a
// consumer board); other failures are reported like every NVML call (failed()).
#include <algorithm>
#include <array>
#include <chrono>

#include "nvidia/nvml_backend.hpp"

namespace gpustream::nvidia_detail {
namespace {

/// A field value as a count, from whichever member NVML filled (nullopt for a negative or
/// fractional one, which a byte counter never is).
std::optional<unsigned long long> field_count(const nvml::FieldValue& f) {
  switch (f.value_type) {
    case nvml::kValueTypeUnsignedInt:
      return f.value.ui_val;
    case nvml::kValueTypeUnsignedLong:
      return f.value.ul_val;
    case nvml::kValueTypeUnsignedLongLong:
      return f.value.ull_val;
    case nvml::kValueTypeSignedLongLong:
      if (f.value.sll_val < 0) return std::nullopt;
      return static_cast<unsigned long long>(f.value.sll_val);
    default:
      return std::nullopt;
  }
}

/// The NVLink counters could not be read: the next reading seeds again.
void forget_nvlink(NvmlDevice& dev) {
  dev.nvlink_rx.clear();
  dev.nvlink_tx.clear();
}

}  // namespace

void NvmlBackend::sample_health(NvmlDevice& dev, DeviceSample& out,
                                std::vector<SampleError>& errors) {
  auto& m = out.metrics;
  const auto h = dev.handle;
  // record() bound to this device and its metrics.
  const auto ok = [&](nvml::Return rc, Call call, const char* function,
                      std::initializer_list<Metric> metrics) {
    return record(dev, rc, call, function, m, metrics, errors);
  };
  const auto unsupported = [&](std::initializer_list<Metric> metrics) {
    for (auto metric : metrics) m.set_absent(metric, Absence::unsupported, Source::nvml);
  };

  // PCIe throughput: NVML's KB/s over its own ~20 ms window; KB is 1024 bytes.
  static constexpr struct {
    unsigned counter;
    Call call;
    Metric metric;
  } kPcie[] = {{nvml::kPcieUtilRxBytes, Call::pcie_rx, Metric::pcie_rx_bytes_per_second},
               {nvml::kPcieUtilTxBytes, Call::pcie_tx, Metric::pcie_tx_bytes_per_second}};
  for (const auto& p : kPcie) {
    if (!api_.pcie_throughput) {
      unsupported({p.metric});
      continue;
    }
    unsigned kb = 0;
    if (ok(api_.pcie_throughput(h, p.counter, &kb), p.call, "nvmlDeviceGetPcieThroughput",
           {p.metric}))
      m.set(p.metric, kb * 1024.0, Source::nvml);
    if (dev.lost) return;
  }

  // PCIe link: current generation and width against the most the device and slot can do.
  const struct {
    nvml::UintFn* fn;
    const char* name;
    Call call;
    Metric metric;
  } kLink[] = {{api_.pcie_link_generation, "nvmlDeviceGetCurrPcieLinkGeneration",
                Call::pcie_generation, Metric::pcie_link_generation},
               {api_.pcie_link_generation_max, "nvmlDeviceGetMaxPcieLinkGeneration",
                Call::pcie_generation_max, Metric::pcie_link_generation_max},
               {api_.pcie_link_width, "nvmlDeviceGetCurrPcieLinkWidth", Call::pcie_width,
                Metric::pcie_link_width},
               {api_.pcie_link_width_max, "nvmlDeviceGetMaxPcieLinkWidth", Call::pcie_width_max,
                Metric::pcie_link_width_max}};
  for (const auto& l : kLink) {
    if (!l.fn) {
      unsupported({l.metric});
      continue;
    }
    unsigned v = 0;
    if (ok(l.fn(h, &v), l.call, l.name, {l.metric})) m.set(l.metric, v, Source::nvml);
    if (dev.lost) return;
  }

  // ECC error counts: volatile (since the driver loaded) and aggregate (the device's life).
  static constexpr struct {
    unsigned type, counter;
    Call call;
    Metric metric;
  } kEcc[] = {{nvml::kMemoryErrorCorrected, nvml::kVolatileEcc, Call::ecc_corrected_volatile,
               Metric::ecc_corrected_volatile},
              {nvml::kMemoryErrorUncorrected, nvml::kVolatileEcc, Call::ecc_uncorrected_volatile,
               Metric::ecc_uncorrected_volatile},
              {nvml::kMemoryErrorCorrected, nvml::kAggregateEcc, Call::ecc_corrected_aggregate,
               Metric::ecc_corrected_aggregate},
              {nvml::kMemoryErrorUncorrected, nvml::kAggregateEcc, Call::ecc_uncorrected_aggregate,
               Metric::ecc_uncorrected_aggregate}};
  for (const auto& e : kEcc) {
    if (!api_.total_ecc_errors) {
      unsupported({e.metric});
      continue;
    }
    unsigned long long n = 0;
    if (ok(api_.total_ecc_errors(h, e.type, e.counter, &n), e.call, "nvmlDeviceGetTotalEccErrors",
           {e.metric}))
      m.set(e.metric, static_cast<double>(n), Source::nvml);
    if (dev.lost) return;
  }

  // Retired pages (up to Volta/Turing): only the counts, asked with an empty buffer.
  static constexpr struct {
    unsigned cause;
    Call call;
    Metric metric;
  } kRetired[] = {
      {nvml::kRetiredMultipleSingleBit, Call::retired_single_bit, Metric::retired_pages_single_bit},
      {nvml::kRetiredDoubleBit, Call::retired_double_bit, Metric::retired_pages_double_bit}};
  for (const auto& r : kRetired) {
    if (!api_.retired_pages) {
      unsupported({r.metric});
      continue;
    }
    unsigned count = 0;
    auto rc = api_.retired_pages(h, r.cause, &count, nullptr);
    if (rc == nvml::kErrorInsufficientSize) rc = nvml::kSuccess;  // count holds the size
    if (ok(rc, r.call, "nvmlDeviceGetRetiredPages", {r.metric}))
      m.set(r.metric, count, Source::nvml);
    if (dev.lost) return;
  }
  if (!api_.retired_pages_pending) {
    unsupported({Metric::retired_pages_pending});
  } else {
    unsigned pending = 0;
    if (ok(api_.retired_pages_pending(h, &pending), Call::retired_pending,
           "nvmlDeviceGetRetiredPagesPendingStatus", {Metric::retired_pages_pending}))
      m.set(Metric::retired_pages_pending, pending != 0 ? 1 : 0, Source::nvml);
    if (dev.lost) return;
  }

  // Remapped rows (Ampere on).
  const std::initializer_list<Metric> kRows{
      Metric::remapped_rows_corrected, Metric::remapped_rows_uncorrected,
      Metric::remapped_rows_pending, Metric::remapped_rows_failed};
  if (!api_.remapped_rows) {
    unsupported(kRows);
  } else {
    unsigned corrected = 0, uncorrected = 0, pending = 0, failure = 0;
    if (ok(api_.remapped_rows(h, &corrected, &uncorrected, &pending, &failure), Call::remapped_rows,
           "nvmlDeviceGetRemappedRows", kRows)) {
      m.set(Metric::remapped_rows_corrected, corrected, Source::nvml);
      m.set(Metric::remapped_rows_uncorrected, uncorrected, Source::nvml);
      m.set(Metric::remapped_rows_pending, pending != 0 ? 1 : 0, Source::nvml);
      m.set(Metric::remapped_rows_failed, failure != 0 ? 1 : 0, Source::nvml);
    }
    if (dev.lost) return;
  }

  // NVLink: the active links (nvmlDeviceGetNvLinkState), then the cumulative data counters
  // NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX/TX (KiB) of each of them through
  // nvmlDeviceGetFieldValues (scopeId = the link), summed; the rate is the difference between
  // two samples over the time between them.
  const std::initializer_list<Metric> kNvlink{Metric::nvlink_rx_bytes_per_second,
                                              Metric::nvlink_tx_bytes_per_second};
  if (!api_.nvlink_state || !api_.field_values) {
    unsupported(kNvlink);
    return;
  }
  std::array<nvml::FieldValue, 2 * nvml::kNvLinkMaxLinks> fields{};
  int n = 0;
  for (unsigned link = 0; link < nvml::kNvLinkMaxLinks; ++link) {
    unsigned active = 0;
    const auto rc = api_.nvlink_state(h, link, &active);
    // Links past the device's last one answer INVALID_ARGUMENT (or NOT_SUPPORTED): the end.
    if (rc == nvml::kErrorInvalidArgument || (rc == nvml::kErrorNotSupported && link > 0)) break;
    if (!ok(rc, Call::nvlink_state, "nvmlDeviceGetNvLinkState", kNvlink)) {
      forget_nvlink(dev);
      return;
    }
    if (active == 0) continue;
    for (unsigned id : {nvml::kFieldNvLinkThroughputDataRx, nvml::kFieldNvLinkThroughputDataTx}) {
      auto& f = fields[static_cast<std::size_t>(n++)];
      f.field_id = id;
      f.scope_id = link;
    }
  }
  out.attributes["nvlink_active_links"] = std::to_string(n / 2);
  if (n == 0) {  // an NVLink-capable GPU with no link up: no NVLink traffic to report
    unsupported(kNvlink);
    forget_nvlink(dev);
    return;
  }
  if (!ok(api_.field_values(h, n, fields.data()), Call::nvlink_fields, "nvmlDeviceGetFieldValues",
          kNvlink)) {
    forget_nvlink(dev);
    return;
  }
  unsigned long long rx = 0, tx = 0;
  for (int i = 0; i < n; ++i) {
    const auto& f = fields[static_cast<std::size_t>(i)];
    const auto v = f.nvml_return == nvml::kSuccess ? field_count(f) : std::nullopt;
    if (!v) {
      const auto rc = f.nvml_return == nvml::kSuccess ? nvml::kErrorUnknown : f.nvml_return;
      ok(rc, Call::nvlink_fields, "nvmlDeviceGetFieldValues (NVLink throughput)", kNvlink);
      forget_nvlink(dev);
      return;
    }
    (f.field_id == nvml::kFieldNvLinkThroughputDataRx ? rx : tx) += *v * 1024ULL;
  }
  const auto now = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(options_.clock().time_since_epoch())
          .count());
  // The first sample, a counter that went back (driver reload) or no time between: no rate.
  const auto rx_step = dev.nvlink_rx.update(rx, now);
  const auto tx_step = dev.nvlink_tx.update(tx, now);
  if (!rx_step.rate || !tx_step.rate) {
    for (auto metric : kNvlink) m.set_absent(metric, Absence::not_yet_seeded, Source::nvml);
    return;
  }
  const auto per_second = [](const rate::Step& s) {
    const double seconds = std::chrono::duration<double>(
                               std::chrono::nanoseconds(static_cast<std::int64_t>(s.base_delta)))
                               .count();
    return static_cast<double>(s.delta) / seconds;
  };
  m.set(Metric::nvlink_rx_bytes_per_second, per_second(rx_step), Source::nvml);
  m.set(Metric::nvlink_tx_bytes_per_second, per_second(tx_step), Source::nvml);
}

}  // namespace gpustream::nvidia_detail
