// GPU events in `watch`: one line each (time in UTC with milliseconds, device, kind, detail,
// sequence and probe), and the newest few under the live table on a terminal.
#include <gtest/gtest.h>

#include <string>

#include "format.hpp"
#include "stream.hpp"

namespace gpustream::cli {
namespace {

GpuEvent event(EventKind kind, std::optional<std::uint64_t> data) {
  GpuEvent e;
  e.sequence = 7;
  e.time_unix_ns = 1764147600123456789;  // 2025-11-26T09:00:00.123456789Z
  e.probe = "nvidia";
  e.device_id = "GPU-aaaa";
  e.kind = kind;
  e.data = data;
  return e;
}

TEST(FormatEvent, OneLineWithTimeDeviceKindAndDetail) {
  EXPECT_EQ(event_line(event(EventKind::xid, 79)),
            "2025-11-26T09:00:00.123Z GPU-aaaa xid 79 (#7, nvidia)");
  // The clocks-event reasons and a vendor's type bits are masks: hex.
  EXPECT_EQ(event_line(event(EventKind::clock_event, 0x48)),
            "2025-11-26T09:00:00.123Z GPU-aaaa clock_event 0x48 (#7, nvidia)");
  EXPECT_EQ(event_line(event(EventKind::other, 0x8000)),
            "2025-11-26T09:00:00.123Z GPU-aaaa other 0x8000 (#7, nvidia)");
  EXPECT_EQ(event_line(event(EventKind::ecc_double_bit, std::nullopt)),
            "2025-11-26T09:00:00.123Z GPU-aaaa ecc_double_bit (#7, nvidia)");
}

TEST(FormatEvent, TimesBeforeTheEpochAndAnEmptyDevice) {
  auto e = event(EventKind::pstate, std::nullopt);
  e.time_unix_ns = -1;  // 1 ns before the epoch: floored to the millisecond below
  e.device_id.clear();
  EXPECT_EQ(event_line(e), "1969-12-31T23:59:59.999Z - pstate (#7, nvidia)");
}

TEST(FormatEvent, TheLiveTableShowsTheNewestEvents) {
  GpuSnapshot s;
  s.probe = "nvidia";
  Printer tty(false, true);
  EXPECT_EQ(tty.render(s).find("GPU events"), std::string::npos);  // none yet
  for (int i = 1; i <= 7; ++i) tty.note_event("event " + std::to_string(i));
  const auto text = tty.render(s);
  ASSERT_NE(text.find("GPU events (newest last):"), std::string::npos) << text;
  EXPECT_EQ(text.find("event 2\n"), std::string::npos) << text;  // only the newest 5
  EXPECT_NE(text.find("  event 3\n"), std::string::npos) << text;
  EXPECT_LT(text.find("event 3"), text.find("event 7"));

  // Piped or JSON output keeps its one format (the events go to stderr only).
  Printer piped(false, false);
  piped.note_event("event 1");
  EXPECT_EQ(piped.render(s).find("event 1"), std::string::npos);
  Printer json(true, false);
  json.note_event("event 1");
  EXPECT_EQ(json.render(s).find("event 1"), std::string::npos);
}

}  // namespace
}  // namespace gpustream::cli
