// TLS on the listeners (ServerOptions::tls) against the project's own client (RemoteSubscriber
// over wss:// and tls://) and raw sockets: streaming over both transports, a plaintext client
// told to use TLS and closed, a silent or half-done handshake closed at the handshake timeout,
// a wrong CA and a wrong host name refused with OpenSSL's words, mutual TLS, reload_tls, and the
// certificate checks at start. The certificates are made at test time (tls_pki.hpp).
#include <algorithm>
#include <ctime>

#include <gtest/gtest.h>
#include <boost/asio/read.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>

#include "gpustream/transport/prometheus.hpp"
#include "gpustream/transport/remote_subscriber.hpp"
#include "transport/harness.hpp"
#include "transport/tls_pki.hpp"

namespace gpustream::transport::test {
namespace {

namespace asio = boost::asio;
using boost::system::error_code;
using tcp = asio::ip::tcp;

std::uint64_t failures(const ServerCounters& c, TlsFailure f) {
  return c.tls_handshake_failures[static_cast<std::size_t>(f)];
}

/// A CA, a server certificate for 127.0.0.1 and localhost signed by it, and the options.
struct TlsSetup {
  TestPki pki;
  TestPki::Issued ca = pki.ca("gpustream test CA");
  TestPki::Issued server =
      pki.leaf(ca, {.cn = "gpu-box", .sans = "IP:127.0.0.1,DNS:localhost"}, "server");

  ServerOptions options(std::chrono::milliseconds handshake = std::chrono::milliseconds{10000}) {
    ServerOptions o;
    o.tls = TlsFiles{server.cert_file, server.key_file, {}};
    o.limits.handshake_timeout = handshake;
    return o;
  }
};

/// What a RemoteSubscriber saw.
struct Seen {
  std::vector<SnapshotPtr> snapshots;
  std::vector<RemoteStatus> statuses;
  bool connected() const {
    return std::any_of(statuses.begin(), statuses.end(), [](const RemoteStatus& s) {
      return s.state == RemoteStatus::State::connected;
    });
  }
  /// The reason of the first failed attempt ("" while none failed).
  std::string refused() const {
    for (const auto& s : statuses)
      if (s.state == RemoteStatus::State::disconnected) return s.reason;
    return {};
  }
};

std::unique_ptr<RemoteSubscriber> subscribe(Fixture& f, RemoteSubscriberOptions o, Seen& seen) {
  o.reconnect_initial = std::chrono::milliseconds(20);
  o.reconnect_max = std::chrono::milliseconds(100);
  auto sub = std::make_unique<RemoteSubscriber>(f.io.get_executor(), std::move(o));
  sub->on_snapshot([&seen](const SnapshotPtr& s) { seen.snapshots.push_back(s); });
  sub->on_status([&seen](const RemoteStatus& s) { seen.statuses.push_back(s); });
  sub->start();
  return sub;
}

std::string wss(Fixture& f, const std::string& host = "127.0.0.1") {
  return "wss://" + host + ":" + std::to_string(f.http_port()) + "/ws";
}
std::string tls(Fixture& f) { return "tls://127.0.0.1:" + std::to_string(f.tcp_port()); }

/// A raw TCP client on the fixture's io_context: sends `bytes`, keeps what comes back until the
/// server closes.
struct Raw {
  explicit Raw(Fixture& f, unsigned short port, const std::string& bytes) : socket(f.io) {
    socket.connect(tcp::endpoint(asio::ip::address_v4::loopback(), port));
    if (!bytes.empty()) asio::write(socket, asio::buffer(bytes));
    read();
  }
  void read() {
    socket.async_read_some(asio::buffer(chunk), [this](error_code ec, std::size_t n) {
      got.append(chunk.data(), n);
      if (ec) {
        ended = true;
        socket.close(ec);  // as curl does once the answer is read
        return;
      }
      read();
    });
  }
  tcp::socket socket;
  std::array<char, 4096> chunk{};
  std::string got;
  bool ended = false;
};

TEST(TransportTls, WssAndTlsClientsStreamSnapshotsVerifiedAgainstTheCa) {
  TlsSetup t;
  Fixture f;
  f.start(t.options());
  Seen over_ws, over_tcp;
  auto a = subscribe(f, {.url = wss(f), .tls_ca_file = t.ca.cert_file}, over_ws);
  auto b = subscribe(f, {.url = tls(f), .tls_ca_file = t.ca.cert_file}, over_tcp);
  ASSERT_TRUE(f.run_until([&] { return over_ws.connected() && over_tcp.connected(); }))
      << over_ws.refused() << " / " << over_tcp.refused();
  const auto published = f.publish("sim", 2, 3);
  ASSERT_TRUE(
      f.run_until([&] { return !over_ws.snapshots.empty() && !over_tcp.snapshots.empty(); }));
  EXPECT_EQ(*over_ws.snapshots[0], *published);
  EXPECT_EQ(*over_tcp.snapshots[0], *published);
  const auto c = f.server->counters();
  EXPECT_TRUE(c.tls);
  EXPECT_EQ(c.tls_handshakes, 2u);
  for (std::size_t i = 0; i < kTlsFailureReasons; ++i)
    EXPECT_EQ(c.tls_handshake_failures[i], 0u) << to_string(static_cast<TlsFailure>(i));
  // The host name is verified too: "localhost" is in the certificate.
  Seen by_name;
  auto d = subscribe(f, {.url = wss(f, "localhost"), .tls_ca_file = t.ca.cert_file}, by_name);
  EXPECT_TRUE(f.run_until([&] { return by_name.connected(); })) << by_name.refused();
}

TEST(TransportTls, AStoppingServerEndsATlsTcpStreamWithACloseNotify) {
  TlsSetup t;
  Fixture f;
  f.start(t.options());
  auto context = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_client);
  context->load_verify_file(t.ca.cert_file);
  context->set_verify_mode(asio::ssl::verify_peer);
  asio::ssl::stream<tcp::socket> client(f.io, *context);
  client.next_layer().connect(tcp::endpoint(asio::ip::address_v4::loopback(), f.tcp_port()));
  std::optional<error_code> handshake;
  client.async_handshake(asio::ssl::stream_base::client,
                         [&](error_code ec) { handshake = ec; });  // the server runs on f.io too
  ASSERT_TRUE(f.run_until([&] { return handshake.has_value(); }));
  ASSERT_FALSE(*handshake) << handshake->message();
  std::string got;
  std::array<char, 4096> chunk{};
  std::optional<error_code> end;
  std::function<void()> read = [&] {
    client.async_read_some(asio::buffer(chunk), [&](error_code ec, std::size_t n) {
      got.append(chunk.data(), n);
      if (ec) {
        end = ec;
        return;
      }
      read();
    });
  };
  read();
  ASSERT_TRUE(f.run_until([&] { return got.find('\n') != std::string::npos; }));
  EXPECT_EQ(got.rfind(R"({"type":"hello")", 0), 0u) << got;
  ASSERT_TRUE(f.stop());
  ASSERT_TRUE(f.run_until([&] { return end.has_value(); }));
  // A clean TLS end is EOF; a connection cut without close_notify is "stream truncated".
  EXPECT_EQ(*end, asio::error::eof) << end->message();
}

TEST(TransportTls, APlaintextHttpClientIsToldToUseHttpsAndClosed) {
  TlsSetup t;
  Fixture f;
  f.start(t.options());
  Raw http(
      f, f.http_port(),
      "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(f.http_port()) + "\r\n\r\n");
  ASSERT_TRUE(f.run_until([&] { return http.ended; }));
  EXPECT_EQ(http.got.rfind("HTTP/1.1 400 Bad Request\r\n", 0), 0u) << http.got;
  EXPECT_NE(http.got.find("This port speaks TLS: use https://"), std::string::npos);
  EXPECT_EQ(http.got.find("gpustream_"), std::string::npos) << "no metrics in plaintext";
  EXPECT_EQ(failures(f.server->counters(), TlsFailure::plaintext), 1u);
  ASSERT_TRUE(f.run_until([&] { return f.server->counters().http_open == 0; }));
}

TEST(TransportTls, APlaintextTcpClientGetsAnErrorLineAndIsClosed) {
  TlsSetup t;
  Fixture f;
  f.start(t.options());
  auto plain = Client::tcp(f);  // the harness's plaintext JSON-lines client
  plain->connect();
  ASSERT_TRUE(f.run_until([&] { return plain->connected(); }));
  plain->send(R"({"type":"subscribe"})");
  ASSERT_TRUE(f.run_until([&] { return plain->ended(); }));
  ASSERT_EQ(plain->count("error"), 1u);
  EXPECT_EQ(plain->of_type("error")[0].at("message").as_string(),
            "this port speaks TLS: connect with tls://HOST:PORT");
  EXPECT_EQ(plain->count("hello"), 0u);
  EXPECT_EQ(failures(f.server->counters(), TlsFailure::plaintext), 1u);
  ASSERT_TRUE(f.run_until([&] { return f.server->counters().tcp_open == 0; }));
}

TEST(TransportTls, ASilentOrHalfDoneHandshakeIsClosedAtTheHandshakeTimeout) {
  TlsSetup t;
  Fixture f;
  f.start(t.options(std::chrono::milliseconds{200}));
  Raw silent(f, f.http_port(), "");
  // A TLS record header announcing a ClientHello that never comes.
  Raw half(f, f.tcp_port(), std::string("\x16\x03\x01\x02\x00\x01\x00\x01\xfc", 9));
  ASSERT_TRUE(f.run_until([&] { return silent.ended && half.ended; }));
  EXPECT_EQ(silent.got, "");
  const auto c = f.server->counters();
  EXPECT_EQ(failures(c, TlsFailure::timeout), 2u);
  ASSERT_TRUE(f.run_until([&] {
    const auto now = f.server->counters();
    return now.http_open == 0 && now.tcp_open == 0;
  })) << "the slots are given back";
}

TEST(TransportTls, SilentHandshakesGiveWayWhenHttpIsFull) {
  TlsSetup t;
  Fixture f;
  auto o = t.options();  // 10 s to handshake: the silent clients would hold their slots
  o.limits.max_http_connections = 2;
  f.start(o);
  Raw a(f, f.http_port(), ""), b(f, f.http_port(), "");
  ASSERT_TRUE(f.run_until([&] { return f.server->counters().http_open == 2; }));
  Seen seen;
  auto sub = subscribe(f, {.url = wss(f), .tls_ca_file = t.ca.cert_file}, seen);
  ASSERT_TRUE(f.run_until([&] { return seen.connected(); })) << seen.refused();
  EXPECT_TRUE(a.ended || b.ended);
  EXPECT_GE(f.server->counters().idle_closed, 1u);
}

TEST(TransportTls, AnUntrustedCertificateIsRefusedWithTheVerificationError) {
  TlsSetup t;
  auto other_ca = t.pki.ca("another CA");
  Fixture f;
  f.start(t.options());
  Seen seen;
  auto sub = subscribe(f, {.url = wss(f), .tls_ca_file = other_ca.cert_file}, seen);
  ASSERT_TRUE(f.run_until([&] { return !seen.refused().empty(); }));
  EXPECT_NE(seen.refused().find("certificate verify failed: unable to get local issuer "
                                "certificate"),
            std::string::npos)
      << seen.refused();
  EXPECT_FALSE(seen.connected());
  ASSERT_TRUE(
      f.run_until([&] { return failures(f.server->counters(), TlsFailure::peer_refused) >= 1; }));
}

TEST(TransportTls, AWrongHostNameIsRefused) {
  TlsSetup t;
  auto named = t.pki.leaf(t.ca, {.cn = "gpu-box", .sans = "DNS:gpu-box.example"}, "named");
  Fixture f;
  auto o = t.options();
  o.tls = TlsFiles{named.cert_file, named.key_file, {}};
  f.start(o);
  Seen seen;
  auto sub = subscribe(f, {.url = tls(f), .tls_ca_file = t.ca.cert_file}, seen);
  ASSERT_TRUE(f.run_until([&] { return !seen.refused().empty(); }));
  EXPECT_NE(seen.refused().find("certificate verify failed: IP address mismatch"),
            std::string::npos)
      << seen.refused();
  EXPECT_FALSE(seen.connected());
}

TEST(TransportTls, MutualTlsAdmitsOnlyClientsWithACertificateFromTheClientCa) {
  TlsSetup t;
  auto clients_ca = t.pki.ca("clients CA");
  auto good = t.pki.leaf(clients_ca, {.cn = "node1"}, "node1");
  auto rogue_ca = t.pki.ca("rogue CA");
  auto rogue = t.pki.leaf(rogue_ca, {.cn = "rogue"}, "rogue");
  Fixture f;
  auto o = t.options();
  o.tls->client_ca_file = clients_ca.cert_file;
  f.start(o);

  Seen without, wrong, with;
  auto a = subscribe(f, {.url = tls(f), .tls_ca_file = t.ca.cert_file}, without);
  auto b = subscribe(f,
                     {.url = wss(f),
                      .tls_ca_file = t.ca.cert_file,
                      .tls_cert_file = rogue.cert_file,
                      .tls_key_file = rogue.key_file},
                     wrong);
  auto c = subscribe(f,
                     {.url = wss(f),
                      .tls_ca_file = t.ca.cert_file,
                      .tls_cert_file = good.cert_file,
                      .tls_key_file = good.key_file},
                     with);
  ASSERT_TRUE(f.run_until([&] {
    return !without.refused().empty() && !wrong.refused().empty() && with.connected();
  })) << without.refused()
      << " / " << wrong.refused() << " / " << with.refused();
  EXPECT_FALSE(without.connected());
  EXPECT_FALSE(wrong.connected());
  EXPECT_GE(failures(f.server->counters(), TlsFailure::client_certificate), 2u);
  const auto published = f.publish();
  ASSERT_TRUE(f.run_until([&] { return !with.snapshots.empty(); }));
  EXPECT_EQ(*with.snapshots[0], *published);
}

TEST(TransportTls, ReloadServesNewCertificatesToNewConnectionsAndKeepsOpenOnes) {
  TlsSetup t;
  auto ca2 = t.pki.ca("second CA");
  auto second = t.pki.leaf(ca2, {.cn = "gpu-box", .sans = "IP:127.0.0.1"}, "second");
  Fixture f;
  f.start(t.options());
  Seen before;
  auto old_client = subscribe(f, {.url = tls(f), .tls_ca_file = t.ca.cert_file}, before);
  ASSERT_TRUE(f.run_until([&] { return before.connected(); })) << before.refused();

  EXPECT_EQ(f.server->reload_tls(TlsFiles{second.cert_file, second.key_file, {}}), "");
  // A reload that fails keeps what is in use.
  const auto broken = f.server->reload_tls(
      TlsFiles{second.cert_file, t.pki.write("broken.key", "not a key\n"), {}});
  EXPECT_NE(broken.find("broken.key: not an unencrypted PEM private key"), std::string::npos)
      << broken;

  Seen trusts_new, trusts_old;
  auto n = subscribe(f, {.url = wss(f), .tls_ca_file = ca2.cert_file}, trusts_new);
  auto o = subscribe(f, {.url = wss(f), .tls_ca_file = t.ca.cert_file}, trusts_old);
  ASSERT_TRUE(f.run_until([&] { return trusts_new.connected() && !trusts_old.refused().empty(); }))
      << trusts_new.refused();
  EXPECT_FALSE(trusts_old.connected());
  // The connection opened before the reload still streams.
  const auto published = f.publish();
  ASSERT_TRUE(f.run_until([&] { return !before.snapshots.empty(); }));
  EXPECT_EQ(*before.snapshots[0], *published);
  EXPECT_EQ(before.statuses.back().state, RemoteStatus::State::connected);
  const auto c = f.server->counters();
  EXPECT_EQ(c.tls_reloads, 1u);
  EXPECT_EQ(c.tls_reload_failures, 1u);
}

TEST(TransportTls, AServerWithoutTlsRefusesToReloadIt) {
  Fixture f;
  f.start();
  EXPECT_NE(f.server->reload_tls().find("started without TLS"), std::string::npos);
  EXPECT_FALSE(f.server->counters().tls);
}

TEST(TransportTls, StartRefusesUnreadableOrMismatchedFilesNamingThem) {
  TlsSetup t;
  auto other = t.pki.leaf(t.ca, {.cn = "other", .sans = "IP:127.0.0.1"}, "other");
  const auto start_error = [](const TlsFiles& files) -> std::string {
    Fixture f;
    ServerOptions o;
    o.tls = files;
    try {
      f.start(o);
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return "";
  };
  const auto missing = (t.pki.dir() / "missing.crt").string();
  EXPECT_EQ(start_error({missing, t.server.key_file, {}}),
            "--tls-cert " + missing + ": No such file or directory");
  const auto junk = t.pki.write("junk.crt", "hello\n");
  EXPECT_NE(start_error({junk, t.server.key_file, {}}).find(junk + ": not a PEM certificate"),
            std::string::npos);
  EXPECT_NE(
      start_error({t.server.cert_file, other.key_file, {}})
          .find(other.key_file + " does not belong to the certificate in " + t.server.cert_file),
      std::string::npos);
  EXPECT_NE(start_error({t.server.cert_file, t.server.key_file, junk})
                .find("--tls-client-ca " + junk + ": no PEM certificate in it"),
            std::string::npos);
}

TEST(TransportTls, AnExpiredCertificateStartsAndItsExpiryIsExported) {
  TlsSetup t;
  auto expired = t.pki.leaf(t.ca,
                            {.cn = "old",
                             .sans = "IP:127.0.0.1",
                             .not_before_seconds = -86400 * 2,
                             .not_after_seconds = -86400},
                            "expired");
  Fixture f;
  auto o = t.options();
  o.tls = TlsFiles{expired.cert_file, expired.key_file, {}};
  f.start(o);  // warned about in the log, not refused: the operator decides
  const auto c = f.server->counters();
  EXPECT_GT(c.tls_certificate_not_after, 0);
  EXPECT_LT(c.tls_certificate_not_after, static_cast<std::int64_t>(std::time(nullptr)));
  Seen seen;
  auto sub = subscribe(f, {.url = tls(f), .tls_ca_file = t.ca.cert_file}, seen);
  ASSERT_TRUE(f.run_until([&] { return !seen.refused().empty(); }));
  EXPECT_NE(seen.refused().find("certificate has expired"), std::string::npos) << seen.refused();

  const auto text = render_prometheus({}, {}, &c, {});
  EXPECT_NE(text.find("gpustream_tls_handshakes_total 0\n"), std::string::npos);
  EXPECT_NE(text.find("gpustream_tls_handshake_failures_total{reason=\"plaintext\"} 0\n"),
            std::string::npos);
  EXPECT_NE(text.find("gpustream_tls_certificate_expiry_timestamp_seconds "), std::string::npos);
  EXPECT_NE(text.find("gpustream_tls_reloads_total{result=\"failed\"} 0\n"), std::string::npos);
}

TEST(TransportTls, APlaintextServerExportsNoTlsFamilies) {
  Fixture f;
  f.start();
  const auto c = f.server->counters();
  EXPECT_EQ(render_prometheus({}, {}, &c, {}).find("gpustream_tls_"), std::string::npos);
}

}  // namespace
}  // namespace gpustream::transport::test
