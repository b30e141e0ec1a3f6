// gpustream/probes/pci.hpp — PCI bus ids in one canonical form, for every probe.
//
// Sources spell a PCI function differently: a vendor library "00000000:3B:00.0" (8-digit domain,
// upper case), sysfs "0000:03:00.0", DRM fdinfo's drm-pdev "0000:03:00.0", a vendor tool
// "0000:0A:00.0" (upper-case hex), some tools "03:00.0" without the domain. Device ids and the
// matching of one device across sources (fdinfo clients to sysfs cards, a vendor library or tool
// to sysfs) all go through normalize_bus_id, so one GPU has one bus id everywhere.
//
// Thread safety: pure functions. Cancellation: nothing to cancel.
#pragma once

#include <string>
#include <string_view>

namespace gpustream::pci {

/// The canonical form "dddd:bb:dd.f": lower-case hex, the domain with 4 digits (leading zeros
/// of a longer one dropped while it is longer than 4; "0000" when there is none), bus and
/// device 2 digits, function 0-7. Surrounding blanks are ignored. Anything else ("", "[N/A]",
/// "0000:01:00", "0000:01:00.9") gives "": the model's "unknown bus id".
std::string normalize_bus_id(std::string_view text);

}  // namespace gpustream::pci
