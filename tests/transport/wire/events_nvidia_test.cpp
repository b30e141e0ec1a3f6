// A vendor's GPU events on the wire, end to end: an Xid fired in the fake NVML reaches WebSocket
// and TCP clients, the /metrics counters and /api/v1/events. Built with the nvidia probe only.
#include <gtest/gtest.h>
#include <boost/asio/thread_pool.hpp>

#include "gpustream/json.hpp"
#include "gpustream/probes/nvidia_probe.hpp"
#include "probes/nvidia/nvidia_event_fakes.hpp"
#include "probes/nvidia/nvidia_fakes.hpp"
#include "transport/harness.hpp"

namespace gpustream::transport::test {
namespace {

constexpr const char* kUuid0 = "GPU-aaaaaaaa-1111-2222-3333-444444444444";

// End to end: the fake NVML fires an Xid; the NVIDIA probe's event thread reports it into the
// server's channel; both a WebSocket and a TCP client get the `event` message, and /metrics and
// /api/v1/events count it.
TEST(EventsOnTheWire, XidFromTheFakeReachesClientsAndMetrics) {
  gpustream::test::FakeNvml nvml;
  nvml.scenario(std::string("devices=1\ndevice.0.uuid=") + kUuid0 + "\n");
  gpustream::test::FakeNvmlEvents fake;
  Fixture f;
  f.start();
  auto ws = connected_ws(f);
  auto tcp = connected_tcp(f);

  boost::asio::thread_pool pool(1);
  NvidiaProbeOptions o;
  o.nvml_library = nvml.path();
  o.use = NvidiaProbeOptions::Use::nvml_only;
  o.library_session = LibrarySessionMode::persistent;
  o.event_wait_timeout = std::chrono::milliseconds{50};
  auto probe = make_nvidia_probe({f.io.get_executor(), pool.get_executor()}, o);
  probe->start_events(f.channel.events().sink());
  bool detected = false;
  probe->async_detect([&](Detection d) { detected = d.available; });
  ASSERT_TRUE(f.run_until([&] { return detected; }));
  ASSERT_TRUE(fake.await_waiters(1));

  ASSERT_EQ(fake.fire(0, gpustream::test::kFakeEventXid, 79), 1);
  ASSERT_TRUE(f.run_until([&] { return ws->count("event") == 1 && tcp->count("event") == 1; }));
  for (const auto& c : {ws, tcp}) {
    const auto m = c->of_type("event").at(0);
    EXPECT_EQ(m.at("kind").as_string(), "xid");
    EXPECT_EQ(m.at("device").as_string(), kUuid0);
    EXPECT_EQ(m.at("data").to_number<std::uint64_t>(), 79U);
    EXPECT_EQ(m.at("sequence").to_number<std::uint64_t>(), 1U);
    EXPECT_EQ(m.at("probe").as_string(), "nvidia");
  }

  const auto metrics = http_request(f, "/metrics");
  EXPECT_EQ(metrics.status, 200);
  EXPECT_NE(metrics.body.find("gpustream_gpu_events_total{device=\"" + std::string(kUuid0) +
                              "\",kind=\"xid\"} 1\n"),
            std::string::npos)
      << metrics.body;
  EXPECT_NE(metrics.body.find("gpustream_gpu_xid_errors_total{device=\"" + std::string(kUuid0) +
                              "\",xid=\"79\"} 1\n"),
            std::string::npos);
  EXPECT_NE(metrics.body.find("gpustream_server_events_sent_total 2\n"), std::string::npos);

  const auto api = http_request(f, "/api/v1/events");
  EXPECT_EQ(api.status, 200);
  const auto doc = parse_json(api.body).as_object();
  ASSERT_EQ(doc.at("events").as_array().size(), 1U);
  EXPECT_EQ(doc.at("events").as_array()[0].at("data").to_number<std::uint64_t>(), 79U);

  probe->stop_events();
  pool.join();
  EXPECT_TRUE(f.stop());
}

}  // namespace
}  // namespace gpustream::transport::test
