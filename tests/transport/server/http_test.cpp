// The HTTP side: /metrics, /api/v1/*, /healthz, /, and who may ask (Host, Origin, token).
#include <regex>
#include <set>
#include <sstream>

#include <gtest/gtest.h>
#include <boost/json.hpp>

#include "transport/harness.hpp"

namespace gpustream::transport::test {
namespace {

namespace json = boost::json;

std::vector<ProbeStats> one_probe_stats() {
  ProbeStats s;
  s.probe = "sim";
  s.state = ProbeState::available;
  s.samples = 42;
  s.failures = 3;
  s.timeouts = 1;
  s.overruns = 2;
  s.interval = std::chrono::milliseconds{500};
  s.latency_p50_ns = 1'500'000;
  s.latency_p90_ns = 2'000'000;
  s.latency_p99_ns = 3'000'000;
  s.latency_max_ns = 4'000'000;
  s.devices = 2;
  return {s};
}

/// Checks the exposition's structure: every sample's family has exactly one HELP and one TYPE,
/// given before its samples, and the samples of a family are together. Returns the family
/// names and their types.
std::map<std::string, std::string> check_exposition(const std::string& text) {
  std::map<std::string, std::string> types;
  std::set<std::string> helped, finished;
  std::string current;
  std::istringstream in(text);
  std::string line;
  const std::regex sample(R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})? (\S+)$)");
  while (std::getline(in, line)) {
    if (line.rfind("# HELP ", 0) == 0) {
      const auto name = line.substr(7, line.find(' ', 7) - 7);
      EXPECT_TRUE(helped.insert(name).second) << "two HELP lines for " << name;
      continue;
    }
    if (line.rfind("# TYPE ", 0) == 0) {
      std::istringstream t(line.substr(7));
      std::string name, type;
      t >> name >> type;
      EXPECT_TRUE(types.emplace(name, type).second) << "two TYPE lines for " << name;
      EXPECT_TRUE(helped.count(name)) << "TYPE before HELP for " << name;
      if (!current.empty()) finished.insert(current);
      current = name;
      continue;
    }
    std::smatch m;
    EXPECT_TRUE(std::regex_match(line, m, sample)) << "not a sample line: " << line;
    if (m.empty()) continue;
    const std::string name = m[1];
    EXPECT_EQ(name, current) << "sample outside its family block: " << line;
    EXPECT_EQ(name.rfind("gpustream_", 0), 0u) << line;
    EXPECT_NO_THROW((void)std::stod(m[3])) << line;
    if (types[name] == "counter") EXPECT_EQ(name.substr(name.size() - 6), "_total") << line;
  }
  return types;
}

TEST(TransportHttp, MetricsFollowThePrometheusConventions) {
  Fixture f;
  f.start({}, one_probe_stats);
  auto snap = make_snapshot("sim", 2, 1, true);
  snap.devices[1].name = "Odd \"GPU\" \\ name\nline";
  f.channel.publish(std::move(snap));
  f.run_for(5ms);
  const auto r = http_request(f, "/metrics");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.headers.at("content-type"), "text/plain; version=0.0.4; charset=utf-8");
  const auto types = check_exposition(r.body);
  EXPECT_EQ(types.at("gpustream_gpu_power_watts"), "gauge");
  EXPECT_EQ(types.at("gpustream_gpu_energy_joules_total"), "counter");
  EXPECT_EQ(types.at("gpustream_probe_samples_total"), "counter");
  EXPECT_EQ(types.at("gpustream_server_slow_clients_disconnected_total"), "counter");
  const auto has = [&](const std::string& line) {
    return r.body.find(line + "\n") != std::string::npos;
  };
  const std::string l0 =
      R"({device="sim-gpu0",vendor="simulated",probe="sim",name="Simulated GPU 0"})";
  EXPECT_TRUE(has("gpustream_gpu_power_watts" + l0 + " 123.25")) << r.body;
  EXPECT_TRUE(has("gpustream_gpu_utilization_ratio" + l0 + " 0.425"));
  EXPECT_TRUE(has("gpustream_gpu_memory_used_bytes" + l0 + " 1073741824"));
  EXPECT_TRUE(has("gpustream_gpu_temperature_celsius" + l0 + " 61"));
  EXPECT_TRUE(has("gpustream_gpu_clock_graphics_hertz" + l0 + " 1.5e+09"));
  EXPECT_TRUE(has("gpustream_gpu_energy_joules_total" + l0 + " 5000.5"));
  EXPECT_TRUE(has(R"(gpustream_gpu_power_watts{device="sim-gpu1",vendor="simulated",probe="sim",)"
                  R"(name="Odd \"GPU\" \\ name\nline"} 123.25)"));
  EXPECT_TRUE(has(R"(gpustream_probe_sample_latency_seconds{probe="sim",quantile="0.99"} 0.003)"));
  EXPECT_TRUE(has(R"(gpustream_probe_failures_total{probe="sim"} 3)"));
  EXPECT_TRUE(has(R"(gpustream_probe_up{probe="sim"} 1)"));
  EXPECT_TRUE(has(R"(gpustream_host_memory_total_bytes{probe="sim"} 17179869184)"));
  EXPECT_TRUE(has(R"(gpustream_server_connections{transport="http"} 1)"));
  // Absent metrics are left out, never written as 0.
  EXPECT_EQ(r.body.find("gpustream_gpu_fan_speed_rpm"), std::string::npos);
  EXPECT_EQ(r.body.find("gpustream_gpu_power_limit_watts"), std::string::npos);
  EXPECT_EQ(r.body.find("gpustream_host_swap_total_bytes"), std::string::npos);
  EXPECT_TRUE(f.stop());
}

TEST(TransportHttp, ApiServesTheLatestSnapshotsDevicesAndStats) {
  Fixture f;
  f.start({}, one_probe_stats);
  f.publish("a", 1);
  f.publish("b", 2);
  f.publish("a", 2);
  f.run_for(5ms);
  auto r = http_request(f, "/api/v1/snapshot");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.headers.at("content-type"), "application/json");
  auto v = json::parse(r.body);
  EXPECT_EQ(v.at("schema"), "gpustream/1");
  const auto& snaps = v.at("snapshots").as_array();
  ASSERT_EQ(snaps.size(), 2u);
  EXPECT_EQ(snaps[0].at("probe"), "a");
  EXPECT_EQ(snaps[0].at("sequence").to_number<int>(), 3);
  EXPECT_EQ(snaps[1].at("sequence").to_number<int>(), 2);
  EXPECT_FALSE(snaps[0].as_object().contains("type"));

  r = http_request(f, "/api/v1/devices");
  ASSERT_EQ(r.status, 200);
  v = json::parse(r.body);
  const auto& devs = v.at("devices").as_array();
  ASSERT_EQ(devs.size(), 4u);
  EXPECT_EQ(devs[0].at("id"), "a-gpu0");
  EXPECT_EQ(devs[0].at("probe"), "a");
  EXPECT_EQ(devs[3].at("id"), "b-gpu1");

  r = http_request(f, "/api/v1/stats");
  ASSERT_EQ(r.status, 200);
  v = json::parse(r.body);
  EXPECT_EQ(v.at("probes").as_array().at(0).at("samples").to_number<int>(), 42);
  EXPECT_EQ(v.at("server").at("snapshots_received").to_number<int>(), 3);

  r = http_request(f, "/healthz");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "ok\n");
  r = http_request(f, "/");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.headers.at("content-type"), "text/html; charset=utf-8");
  EXPECT_NE(r.body.find("<html"), std::string::npos);
  EXPECT_EQ(http_request(f, "/nope").status, 404);
  EXPECT_EQ(http_request(f, "/metrics", {}, "POST").status, 405);
  EXPECT_EQ(http_request(f, "/ws").status, 426);
  EXPECT_TRUE(f.stop());
}

TEST(TransportHttp, AnOversizedRequestBodyIsRefused) {
  Fixture f;
  ServerOptions o;
  o.limits.max_message_bytes = 1024;
  f.start(o);
  EXPECT_EQ(http_request(f, "/metrics", {}, "POST", std::string(5000, 'x')).status, 413);
  EXPECT_EQ(f.server->counters().messages_rejected, 1u);
  EXPECT_EQ(http_request(f, "/healthz").status, 200);
  EXPECT_TRUE(f.stop());
}

TEST(TransportHttp, RequestsForAnotherHostAreRefused) {
  Fixture f;
  ServerOptions o;
  o.allowed_hosts = {"gpu-box.lan"};
  f.start(o);
  const auto port = std::to_string(f.http_port());
  const auto status = [&](const std::string& host) {
    return http_request(f, "/api/v1/devices", {{"Host", host}}).status;
  };
  EXPECT_EQ(status("evil.example.com:" + port), 403);  // DNS rebinding
  EXPECT_EQ(status("evil.example.com"), 403);
  EXPECT_EQ(status("127.0.0.1:1"), 403);  // not our port
  EXPECT_EQ(status(""), 403);
  EXPECT_EQ(status("127.0.0.1:" + port), 200);
  EXPECT_EQ(status("localhost:" + port), 200);
  EXPECT_EQ(status("LocalHost.:" + port), 200);
  EXPECT_EQ(status("[::1]:" + port), 200);
  EXPECT_EQ(status("gpu-box.lan:" + port), 200);
  EXPECT_EQ(f.server->counters().requests_forbidden, 4u);

  Client::Options ws;
  ws.host = "evil.example.com:" + port;
  auto c = Client::ws(f, ws);
  c->connect();
  ASSERT_TRUE(f.run_until([&] { return c->ended(); }));
  EXPECT_EQ(c->refused_status(), 403);
  EXPECT_TRUE(f.stop());
}

TEST(TransportHttp, WebSocketUpgradesFromAnotherOriginAreRefused) {
  Fixture f;
  ServerOptions o;
  o.allowed_origins = {"https://dash.example.org"};
  f.start(o);
  const auto port = std::to_string(f.http_port());
  const auto try_origin = [&](std::optional<std::string> origin) {
    Client::Options co;
    if (origin) co.headers["Origin"] = *origin;
    auto c = Client::ws(f, co);
    c->connect();
    EXPECT_TRUE(f.run_until([&] { return c->count("hello") == 1 || c->ended(); }));
    return c->count("hello") == 1 ? 101 : c->refused_status();
  };
  EXPECT_EQ(try_origin("http://evil.example.com"), 403);
  EXPECT_EQ(try_origin("http://127.0.0.1:1"), 403);
  EXPECT_EQ(try_origin("null"), 403);
  EXPECT_EQ(try_origin("http://127.0.0.1:" + port), 101);
  EXPECT_EQ(try_origin("http://localhost:" + port), 101);
  EXPECT_EQ(try_origin("https://dash.example.org"), 101);
  EXPECT_EQ(try_origin(std::nullopt), 101);  // not a browser
  EXPECT_EQ(f.server->counters().requests_forbidden, 3u);
  EXPECT_TRUE(f.stop());
}

TEST(TransportHttp, ATokenIsRequiredEverywhereButHealthz) {
  Fixture f;
  ServerOptions o;
  o.token = "s3cret/+";
  f.start(o);
  EXPECT_EQ(http_request(f, "/metrics").status, 401);
  EXPECT_EQ(http_request(f, "/metrics", {{"Authorization", "Bearer wrong"}}).status, 401);
  EXPECT_EQ(http_request(f, "/metrics", {{"Authorization", "Bearer s3cret/+"}}).status, 200);
  EXPECT_EQ(http_request(f, "/metrics?token=s3cret%2F%2B").status, 200);
  EXPECT_EQ(http_request(f, "/?token=s3cret").status, 401);
  EXPECT_EQ(http_request(f, "/").status, 401);
  EXPECT_EQ(http_request(f, "/healthz").status, 200);

  Client::Options no_token;
  auto w1 = Client::ws(f, no_token);
  w1->connect();
  Client::Options with_token;
  with_token.target = "/ws?token=s3cret%2F%2B";
  auto w2 = Client::ws(f, with_token);
  w2->connect();
  ASSERT_TRUE(f.run_until([&] { return w1->ended() && w2->count("hello") == 1; }));
  EXPECT_EQ(w1->refused_status(), 401);

  auto t_wrong = Client::tcp(f);
  auto t_right = Client::tcp(f);
  t_wrong->send(R"({"type":"auth","token":"guess"})");
  t_right->send(R"({"type":"auth","token":"s3cret/+"})");
  t_wrong->connect();
  t_right->connect();
  ASSERT_TRUE(f.run_until([&] { return t_wrong->ended() && t_right->count("hello") == 1; }));
  EXPECT_EQ(t_wrong->count("hello"), 0u);
  EXPECT_EQ(t_wrong->of_type("error").at(0).at("code"), "unauthorized");
  f.publish();
  ASSERT_TRUE(
      f.run_until([&] { return t_right->count("snapshot") == 1 && w2->count("snapshot") == 1; }));
  EXPECT_EQ(f.server->counters().requests_unauthorized, 6u);
  EXPECT_TRUE(f.stop());
}

// SIGHUP's rotation (Server::set_token): the old token is refused from then on, the new one
// accepted, and a client authorized with the old one stays connected and keeps receiving. A
// server started without a token cannot be given one (a restart), nor a token made empty.
TEST(TransportHttp, ARotatedTokenIsRequiredFromThenOnAndConnectedClientsStay) {
  Fixture f;
  ServerOptions o;
  o.token = "old-token";
  f.start(o);
  auto t_old = Client::tcp(f);
  t_old->send(R"({"type":"auth","token":"old-token"})");
  t_old->connect();
  ASSERT_TRUE(f.run_until([&] { return t_old->count("hello") == 1; }));

  EXPECT_FALSE(f.server->set_token(""));
  EXPECT_TRUE(f.server->set_token("new-token"));
  EXPECT_EQ(http_request(f, "/metrics", {{"Authorization", "Bearer old-token"}}).status, 401);
  EXPECT_EQ(http_request(f, "/metrics", {{"Authorization", "Bearer new-token"}}).status, 200);
  auto t_late = Client::tcp(f);
  t_late->send(R"({"type":"auth","token":"old-token"})");
  t_late->connect();
  ASSERT_TRUE(f.run_until([&] { return t_late->ended(); }));
  EXPECT_EQ(t_late->of_type("error").at(0).at("code"), "unauthorized");
  f.publish();
  ASSERT_TRUE(f.run_until([&] { return t_old->count("snapshot") == 1; }));
  EXPECT_FALSE(t_old->ended());
  EXPECT_TRUE(f.stop());

  Fixture open;
  open.start();
  EXPECT_FALSE(open.server->set_token("a-token"));
  EXPECT_EQ(http_request(open, "/metrics").status, 200);
  EXPECT_TRUE(open.stop());
}

// /api/v1/fit on `gpustream serve`: this machine's devices with the `fit` message's entries,
// every one that fits (no limit), under the rules of every /api route.
TEST(TransportHttp, FitAnswersWithTheFitMessagesEntries) {
  Fixture f;
  f.start();
  f.publish("sim", 3);  // 3 devices, 7 GiB free each (8 total - 1 used: derived)
  f.run_for(5ms);
  auto r = http_request(f, "/api/v1/fit?bytes=0");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.headers.at("content-type"), "application/json");
  auto v = json::parse(r.body).as_object();
  std::set<std::string> keys;
  for (const auto& kv : v) keys.insert(std::string(kv.key()));
  EXPECT_EQ(keys, (std::set<std::string>{"schema", "bytes", "fits", "excluded"}));
  EXPECT_TRUE(v.at("excluded").as_array().empty());
  EXPECT_EQ(v.at("schema"), "gpustream/1");
  EXPECT_EQ(v.at("bytes").to_number<std::uint64_t>(), 0U);
  const auto fits = v.at("fits").as_array();
  ASSERT_EQ(fits.size(), 3U);
  for (const auto& e : fits) {
    keys.clear();
    for (const auto& kv : e.as_object()) keys.insert(std::string(kv.key()));
    EXPECT_EQ(keys, (std::set<std::string>{"node", "device", "name", "probe", "vendor",
                                           "free_bytes", "source", "state", "age_seconds"}));
    EXPECT_EQ(e.at("node"), "");  // this machine's own device
    EXPECT_EQ(e.at("free_bytes").to_number<std::uint64_t>(), 7ULL << 30);
    EXPECT_EQ(e.at("source"), "derived");
    EXPECT_EQ(e.at("state"), "up");
    EXPECT_TRUE(e.at("age_seconds").is_double());
  }
  // The same devices, in the same order, as the protocol's fit_result.
  auto c = connected_tcp(f);
  c->send(R"({"type":"fit","bytes":0})");
  ASSERT_TRUE(f.run_until([&] { return c->count("fit_result") == 1; }));
  const auto proto = c->of_type("fit_result").at(0).at("fits").as_array();
  ASSERT_EQ(proto.size(), fits.size());
  for (std::size_t i = 0; i < fits.size(); ++i) {
    auto a = fits[i].as_object();
    auto b = proto[i].as_object();
    a.erase("age_seconds");  // computed at each answer
    b.erase("age_seconds");
    EXPECT_EQ(a, b) << i;
  }
  // Nothing fits the largest N: an empty list, not an error.
  r = http_request(f, "/api/v1/fit?bytes=18446744073709551615");
  ASSERT_EQ(r.status, 200);
  EXPECT_TRUE(json::parse(r.body).at("fits").as_array().empty());
  EXPECT_EQ(json::parse(r.body).at("bytes").to_number<std::uint64_t>(), UINT64_MAX);
  r = http_request(f, "/api/v1/fit?bytes=7516192768&x=1");  // exactly 7 GiB: all 3
  EXPECT_EQ(json::parse(r.body).at("fits").as_array().size(), 3U);
  r = http_request(f, "/api/v1/fit?bytes=7516192769");  // 1 byte more: none
  EXPECT_TRUE(json::parse(r.body).at("fits").as_array().empty());

  // Anything but a whole number of bytes from 0 to 2^64 - 1: 400 with a JSON error.
  for (const char* bad :
       {"/api/v1/fit", "/api/v1/fit?bytes=", "/api/v1/fit?bytes=lots", "/api/v1/fit?bytes=-1",
        "/api/v1/fit?bytes=1.5", "/api/v1/fit?bytes=1e9", "/api/v1/fit?bytes=%2B1",
        "/api/v1/fit?bytes=%201", "/api/v1/fit?bytes=1x", "/api/v1/fit?bytes=18446744073709551616",
        "/api/v1/fit?size=1"}) {
    r = http_request(f, bad);
    EXPECT_EQ(r.status, 400) << bad;
    EXPECT_EQ(r.headers.at("content-type"), "application/json") << bad;
    const auto err = json::parse(r.body);
    EXPECT_NE(std::string(err.at("error").as_string()).find("?bytes=N"), std::string::npos);
  }
  EXPECT_EQ(http_request(f, "/api/v1/fit?bytes=1", {}, "POST").status, 405);
  EXPECT_TRUE(f.stop());
}

// /api/v1/fit's exclusions and health rule: ?exclude=ID,ID and ?fatal_event_window_s=S, each
// excluded device listed with its reason; bad or oversized parameters are a 400 naming them.
TEST(TransportHttp, FitLeavesOutExcludedAndSickDevicesAndSaysWhy) {
  Fixture f;
  f.start();
  f.publish("sim", 3);  // sim-gpu0..2, 7 GiB free each
  GpuEvent xid;
  xid.time_unix_ns = wall_now_ns();
  xid.probe = "sim";
  xid.device_id = "sim-gpu1";
  xid.kind = EventKind::xid;
  xid.data = 79;
  f.channel.events().publish(xid);
  f.run_for(5ms);
  const auto devices = [](const json::value& list) {
    std::vector<std::string> out;
    for (const auto& e : list.as_array()) out.emplace_back(e.at("device").as_string());
    return out;
  };
  auto r = http_request(f, "/api/v1/fit?bytes=0&exclude=sim-gpu2,nobody");
  ASSERT_EQ(r.status, 200) << r.body;
  auto v = json::parse(r.body);
  EXPECT_EQ(devices(v.at("fits")), std::vector<std::string>{"sim-gpu0"});
  EXPECT_EQ(devices(v.at("excluded")), (std::vector<std::string>{"sim-gpu1", "sim-gpu2"}));
  const auto& sick = v.at("excluded").at(0);
  EXPECT_EQ(sick.at("reason"), "fatal_event");
  EXPECT_NE(std::string(sick.at("detail").as_string()).find("xid 79 0 s ago"), std::string::npos)
      << sick;
  EXPECT_EQ(v.at("excluded").at(1).at("reason"), "excluded");
  EXPECT_EQ(sick.at("free_bytes").to_number<std::uint64_t>(), 7ULL << 30);
  // The health rule off: the sick GPU is offered again.
  r = http_request(f, "/api/v1/fit?bytes=0&fatal_event_window_s=0");
  v = json::parse(r.body);
  EXPECT_EQ(devices(v.at("fits")).size(), 3U);
  EXPECT_TRUE(v.at("excluded").as_array().empty());

  std::string many = "/api/v1/fit?bytes=0&exclude=";
  for (std::size_t i = 0; i <= kFitMaxExclude; ++i) many += "d" + std::to_string(i) + ",";
  for (const std::string& bad :
       {std::string("/api/v1/fit?bytes=0&fatal_event_window_s=-1"),
        std::string("/api/v1/fit?bytes=0&fatal_event_window_s=604801"),
        std::string("/api/v1/fit?bytes=0&fatal_event_window_s=soon"),
        std::string("/api/v1/fit?bytes=0&exclude=") + std::string(kMaxNameLength + 1, 'x'), many}) {
    r = http_request(f, bad);
    EXPECT_EQ(r.status, 400) << bad;
    const auto err = json::parse(r.body);
    const std::string what(err.at("error").as_string());
    EXPECT_TRUE(what.starts_with("exclude") || what.starts_with("fatal_event_window_s")) << what;
  }
  EXPECT_TRUE(f.stop());
}

TEST(TransportHttp, FitFollowsTheTokenAndHostRulesAndAFitSource) {
  Fixture f;
  ServerOptions o;
  o.token = "s3cret";
  o.allowed_hosts = {"gpu-box.lan"};
  std::uint64_t asked = 0;
  o.fit_source = [&asked](std::uint64_t bytes) {  // what `gpustream fleet` sets
    asked = bytes;
    std::vector<FitEntry> out(300);
    for (std::size_t i = 0; i < out.size(); ++i) {
      out[i].node = "node-" + std::to_string(i);
      out[i].device = "GPU-" + std::to_string(i);
      out[i].free_bytes = (1000 - i) << 30;
      out[i].state = "up";
    }
    return out;
  };
  f.start(o);
  const auto port = std::to_string(f.http_port());
  const std::map<std::string, std::string> auth{{"Authorization", "Bearer s3cret"}};
  EXPECT_EQ(http_request(f, "/api/v1/fit?bytes=1").status, 401);
  EXPECT_EQ(http_request(f, "/api/v1/fit?bytes=lots").status, 401);  // the token comes first
  EXPECT_EQ(http_request(f, "/api/v1/fit?bytes=1", {{"Authorization", "Bearer nope"}}).status, 401);
  auto evil = auth;
  evil["Host"] = "evil.example.com:" + port;
  EXPECT_EQ(http_request(f, "/api/v1/fit?bytes=1", evil).status, 403);
  EXPECT_EQ(asked, 0U);  // refused before the planner is asked
  auto lan = auth;
  lan["Host"] = "gpu-box.lan:" + port;
  auto r = http_request(f, "/api/v1/fit?bytes=123", lan);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(asked, 123U);
  // Every entry of the source, no limit (a fit_result stops at 256).
  const auto fits = json::parse(r.body).at("fits").as_array();
  ASSERT_EQ(fits.size(), 300U);
  EXPECT_EQ(fits[1].at("node"), "node-1");
  r = http_request(f, "/api/v1/fit?token=s3cret&bytes=5");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(asked, 5U);
  EXPECT_EQ(f.server->counters().requests_unauthorized, 3U);
  EXPECT_EQ(f.server->counters().requests_forbidden, 1U);
  EXPECT_TRUE(f.stop());
}

// --expect-gpus N (issue #28): /healthz is 503 while fewer than N GPUs are readable, and says
// how many are readable and expected; /metrics carries both counts for the alert rules.
TEST(TransportHttp, HealthzAnswers503WhileFewerGpusThanExpectedAreReadable) {
  Fixture f;
  ServerOptions o;
  o.expect_gpus = 2;
  auto state = ProbeState::available;
  f.start(o, [&state] {
    ProbeStats s;
    s.probe = "sim";
    s.state = state;
    return std::vector<ProbeStats>{s};
  });
  // Nothing sampled yet: no GPU is readable.
  auto r = http_request(f, "/healthz");
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_EQ(r.body, "unhealthy: 0 GPU(s) readable, 2 expected (--expect-gpus)\n");

  f.publish("sim", 1);
  f.run_for(5ms);
  r = http_request(f, "/healthz");
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_EQ(r.body, "unhealthy: 1 GPU(s) readable, 2 expected (--expect-gpus)\n");

  f.publish("sim", 2);
  f.run_for(5ms);
  r = http_request(f, "/healthz");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, "ok: 2 GPU(s) readable, 2 expected (--expect-gpus)\n");
  r = http_request(f, "/metrics");
  EXPECT_NE(r.body.find("\ngpustream_gpus_readable 2\n"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("\ngpustream_gpus_expected 2\n"), std::string::npos) << r.body;

  // The probe stops sampling (unavailable): its last snapshot is no longer readable GPUs.
  state = ProbeState::unavailable;
  r = http_request(f, "/healthz");
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_EQ(r.body, "unhealthy: 0 GPU(s) readable, 2 expected (--expect-gpus)\n");
  r = http_request(f, "/metrics");
  EXPECT_NE(r.body.find("\ngpustream_gpus_readable 0\n"), std::string::npos) << r.body;
  EXPECT_TRUE(f.stop());
}

// A device whose every value is absent (a stale node's copy) is not a readable GPU.
TEST(TransportHttp, HealthzDoesNotCountADeviceWithNoValue) {
  Fixture f;
  ServerOptions o;
  o.expect_gpus = 1;
  f.start(o);
  auto snap = make_snapshot("sim", 1);
  for (std::size_t i = 0; i < kMetricCount; ++i)
    snap.devices[0].metrics.set_absent(static_cast<Metric>(i), Absence::stale, Source::none);
  f.channel.publish(std::move(snap));
  f.run_for(5ms);
  const auto r = http_request(f, "/healthz");
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_EQ(r.body, "unhealthy: 0 GPU(s) readable, 1 expected (--expect-gpus)\n");
  EXPECT_TRUE(f.stop());
}

// Without --expect-gpus, /healthz stays "ok" whatever the GPUs (a fleet view, a dev box).
TEST(TransportHttp, HealthzWithoutExpectGpusIsOkWithNoGpu) {
  Fixture f;
  f.start();
  const auto r = http_request(f, "/healthz");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "ok\n");
  EXPECT_TRUE(f.stop());
}

}  // namespace
}  // namespace gpustream::transport::test
