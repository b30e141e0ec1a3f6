// fleet_subscriber — one line per snapshot that any `gpustream serve --nats` in the fleet
// publishes to a NATS server (docs/protocol.md, "NATS bridge").
//
//   nats-server -a 127.0.0.1 -p 4222 &
//   gpustream serve --simulate 2 --nats nats://127.0.0.1:4222 &
//   fleet_subscriber nats://127.0.0.1:4222               # subject gpustream.>
//   fleet_subscriber nats://127.0.0.1:4222 --subject 'gpustream.gpu-box-7.*' --count 10
//
// The agents publish the compact bus encoding (docs/fleet.md): a BusDecoder rebuilds each
// snapshot; a delta that arrives before its stream's first full message is counted, not printed
// (at most full_every messages after joining). A plain gpustream/1 JSON payload (serve
// --nats-encoding json) is read as is. libnats reconnects by itself when the server goes away.
// Delivery is at most once: a snapshot published while this subscriber was away is not replayed.
// Ctrl-C ends it.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>

#include <nats/nats.h>

#include "gpustream/json.hpp"
#include "gpustream/transport/fleet_codec.hpp"

namespace {

volatile std::sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

void usage() {
  std::cerr << "usage: fleet_subscriber [URL] [--subject SUBJECT] [--count N]\n"
               "  URL: nats://HOST:PORT (default nats://127.0.0.1:4222)\n"
               "  SUBJECT: default gpustream.>\n";
}

}  // namespace

int main(int argc, char** argv) {
  std::string url = "nats://127.0.0.1:4222";
  std::string subject = "gpustream.>";
  long count = -1;  // unlimited
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--subject" && i + 1 < argc) {
      subject = argv[++i];
    } else if (a == "--count" && i + 1 < argc) {
      count = std::strtol(argv[++i], nullptr, 10);
    } else if (a == "-h" || a == "--help") {
      usage();
      return 0;
    } else if (!a.empty() && a[0] != '-') {
      url = a;
    } else {
      usage();
      return 2;
    }
  }
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);

  natsOptions* opts = nullptr;
  natsConnection* nc = nullptr;
  natsSubscription* sub = nullptr;
  natsStatus s = natsOptions_Create(&opts);
  if (s == NATS_OK) s = natsOptions_SetURL(opts, url.c_str());
  if (s == NATS_OK) s = natsOptions_SetMaxReconnect(opts, -1);  // reconnect forever
  if (s == NATS_OK) s = natsConnection_Connect(&nc, opts);
  if (s == NATS_OK) s = natsConnection_SubscribeSync(&sub, nc, subject.c_str());
  natsOptions_Destroy(opts);
  if (s != NATS_OK) {
    const char* detail = nats_GetLastError(nullptr);
    std::cerr << "fleet_subscriber: " << url << ": " << natsStatus_GetText(s)
              << (detail ? std::string(" (") + detail + ")" : "") << "\n";
    natsConnection_Destroy(nc);
    return 1;
  }
  std::cerr << "fleet_subscriber: listening on " << subject << " at " << url << "\n";

  int rc = 0;
  gpustream::transport::BusDecoder decoder;
  while (!g_stop && count != 0) {
    natsMsg* msg = nullptr;
    s = natsSubscription_NextMsg(&msg, sub, 500);  // wakes up to notice Ctrl-C
    if (s == NATS_TIMEOUT) continue;
    if (s != NATS_OK) {
      std::cerr << "fleet_subscriber: " << natsStatus_GetText(s) << "\n";
      rc = 1;
      break;
    }
    const std::string_view data(natsMsg_GetData(msg),
                                static_cast<std::size_t>(natsMsg_GetDataLength(msg)));
    bool printed = true;
    try {
      std::optional<gpustream::GpuSnapshot> snap;
      if (data.substr(0, 4) == gpustream::transport::kBusMagic) {
        if (auto d = decoder.decode(data)) snap = std::move(d->snapshot);
      } else {
        snap = gpustream::snapshot_from_json_string(data);
      }
      printed = snap.has_value();
      if (snap)
        std::printf("%s node=%s devices=%zu sequence=%llu\n", natsMsg_GetSubject(msg),
                    snap->node.c_str(), snap->devices.size(),
                    static_cast<unsigned long long>(snap->sequence));
    } catch (const std::exception& e) {
      std::printf("%s not a gpustream snapshot: %s\n", natsMsg_GetSubject(msg), e.what());
    }
    std::fflush(stdout);
    natsMsg_Destroy(msg);
    if (count > 0 && printed) --count;
  }
  natsSubscription_Destroy(sub);
  natsConnection_Destroy(nc);
  return rc;
}
