// NvmlBackend: power as the driver means it (under the backend's lock, inside a session, with a
// valid handle).
//
// 1. nvmlDeviceGetFieldValues with NVML_FI_DEV_POWER_INSTANT and NVML_FI_DEV_POWER_AVERAGE
//    (R535+): power_watts is the instantaneous figure (power_kind instant), power_average_watts
//    the driver's 1 s average (absent unsupported where the driver has none: before Ampere and
//    on GA100). One call per sample for both fields.
// 2. Otherwise (no such function, a driver that answers NOT_SUPPORTED for both fields, or no
//    instantaneous field): nvmlDeviceGetPowerUsage, whose meaning follows the architecture
//    (nvmlDeviceGetArchitecture): averaged over 1 s on Ampere and newer except GA100, so
//    power_kind average and power_average_watts the same figure; instantaneous before Ampere and
//    on GA100, power_kind instant. An architecture NVML does not tell, or an Ampere board whose
//    PCI device id is unknown, leaves power_kind unset: it is not guessed.
#include <optional>

#include "nvidia/nvml_backend.hpp"

namespace gpustream::nvidia_detail {
namespace {

constexpr unsigned kNvidiaVendor = 0x10DE;

/// A field's value as a number, whatever nvmlValueType_t it came in; nullopt for a type we do
/// not know.
std::optional<double> field_number(const nvml::FieldValue& f) {
  switch (f.value_type) {
    case nvml::kValueTypeDouble:
      return f.value.d_val;
    case nvml::kValueTypeUnsignedInt:
      return f.value.ui_val;
    case nvml::kValueTypeUnsignedLong:
      return static_cast<double>(f.value.ul_val);
    case nvml::kValueTypeUnsignedLongLong:
      return static_cast<double>(f.value.ull_val);
    case nvml::kValueTypeSignedLongLong:
      return static_cast<double>(f.value.sll_val);
    case nvml::kValueTypeSignedInt:
      return f.value.si_val;
    case nvml::kValueTypeUnsignedShort:
      return f.value.us_val;
    default:
      return std::nullopt;
  }
}

/// GA100 (A100, A30, A800): PCI device ids 0x2080-0x20FF.
bool is_ga100(unsigned pci_device_id) {
  const unsigned device = pci_device_id >> 16, vendor = pci_device_id & 0xFFFFU;
  return vendor == kNvidiaVendor && device >= 0x2080 && device <= 0x20FF;
}

}  // namespace

std::optional<PowerKind> nvml_power_usage_kind(std::optional<unsigned> architecture,
                                               unsigned pci_device_id) {
  if (!architecture) return std::nullopt;
  if (*architecture < nvml::kArchAmpere) return PowerKind::instant;
  if (*architecture > nvml::kArchAmpere) return PowerKind::average;
  if (pci_device_id == 0) return std::nullopt;  // an Ampere board we cannot place
  return is_ga100(pci_device_id) ? PowerKind::instant : PowerKind::average;
}

void NvmlBackend::sample_power(NvmlDevice& dev, DeviceSample& out,
                               std::vector<SampleError>& errors) {
  auto& m = out.metrics;
  const auto h = dev.handle;
  bool have_instant = false, have_average = false;

  if (api_.field_values && !dev.power_fields_unsupported) {
    nvml::FieldValue fields[2]{};
    fields[0].field_id = nvml::kFieldPowerInstant;
    fields[1].field_id = nvml::kFieldPowerAverage;
    const auto rc = api_.field_values(h, 2, fields);
    if (rc == nvml::kErrorNotSupported || rc == nvml::kErrorFunctionNotFound ||
        rc == nvml::kErrorInvalidArgument) {
      dev.power_fields_unsupported = true;  // the driver does not know these fields
    } else if (!record(dev, rc, Call::power_fields, "nvmlDeviceGetFieldValues (power)", m,
                       {Metric::power_watts, Metric::power_average_watts}, errors)) {
      return;  // absent with the call's reason (a lost GPU is marked so)
    } else {
      const auto unknown_field = [](const nvml::FieldValue& f) {
        return f.nvml_return == nvml::kErrorNotSupported ||
               f.nvml_return == nvml::kErrorInvalidArgument;
      };
      if (unknown_field(fields[0]) && unknown_field(fields[1])) {
        dev.power_fields_unsupported = true;
      } else {
        // Each field on its own: a value, absent unsupported, or absent with its own reason.
        const auto take = [&](const nvml::FieldValue& f, Metric metric) {
          if (unknown_field(f)) {
            m.set_absent(metric, Absence::unsupported, Source::nvml);
            return false;
          }
          const auto v = f.nvml_return == nvml::kSuccess ? field_number(f) : std::nullopt;
          const auto frc = f.nvml_return == nvml::kSuccess ? nvml::kErrorUnknown : f.nvml_return;
          if (!v || *v < 0) {
            record(dev, frc, Call::power_field, "nvmlDeviceGetFieldValues (power field)", m,
                   {metric}, errors);
            return false;
          }
          m.set(metric, *v / 1000.0, Source::nvml);  // mW -> W
          return true;
        };
        have_instant = take(fields[0], Metric::power_watts);
        have_average = take(fields[1], Metric::power_average_watts);
        if (have_instant) out.power_kind = PowerKind::instant;
        if (have_instant && have_average) succeeded(dev, Call::power_field);
        if (dev.lost) return;
        // A failed (not unknown) instantaneous field keeps its reason; only an unknown one
        // falls back to nvmlDeviceGetPowerUsage below.
        if (!have_instant && !unknown_field(fields[0])) return;
      }
    }
  }
  if (have_instant) return;

  if (!api_.power_usage) {
    m.set_absent(Metric::power_watts, Absence::unsupported, Source::nvml);
    return;
  }
  unsigned mw = 0;
  if (!record(dev, api_.power_usage(h, &mw), Call::power, "nvmlDeviceGetPowerUsage", m,
              {Metric::power_watts}, errors))
    return;
  m.set(Metric::power_watts, mw / 1000.0, Source::nvml);
  const auto kind = nvml_power_usage_kind(dev.architecture, dev.pci_device_id);
  out.power_kind = kind;
  // nvmlDeviceGetPowerUsage on a board that averages is the driver's average.
  if (kind == PowerKind::average && !have_average)
    m.set(Metric::power_average_watts, mw / 1000.0, Source::nvml);
}

}  // namespace gpustream::nvidia_detail
