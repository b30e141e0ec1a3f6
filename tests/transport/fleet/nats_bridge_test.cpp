// NatsBridge against a real nats-server (Debian `nats-server`, started here on 127.0.0.1 with a
// free port) and a real libnats subscriber on `gpustream.>`. Built only when the bridge is
// (GPUSTREAM_HAS_NATS); then a missing nats-server FAILS these tests (scripts/deps.sh test).
#if defined(GPUSTREAM_HAS_NATS)

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include <gtest/gtest.h>
#include <nats/nats.h>

#include <boost/asio/io_context.hpp>
#include <boost/json.hpp>

#include "gpustream/channel.hpp"
#include "gpustream/json.hpp"
#include "gpustream/log.hpp"
#include "gpustream/transport/fleet.hpp"
#include "gpustream/transport/fleet_codec.hpp"
#include "gpustream/transport/nats_bridge.hpp"
#include "support/temp_tree.hpp"
#include "transport/fleet/nats_server.hpp"
#include "transport/harness.hpp"

namespace gpustream::transport::test {
namespace {

using nats::free_port;
using nats::kWait;
using nats::wait_for;
using NatsServer = nats::Server;

/// A libnats subscriber on `gpustream.>` that reconnects by itself.
class Subscriber {
 public:
  explicit Subscriber(const std::string& url) {
    natsOptions* o = nullptr;
    natsOptions_Create(&o);
    natsOptions_SetURL(o, url.c_str());
    natsOptions_SetMaxReconnect(o, -1);
    natsOptions_SetReconnectWait(o, 20);
    if (natsConnection_Connect(&nc_, o) == NATS_OK &&
        natsConnection_SubscribeSync(&sub_, nc_, "gpustream.>") == NATS_OK)
      ok_ = natsConnection_Flush(nc_) == NATS_OK;
    natsOptions_Destroy(o);
  }
  ~Subscriber() {
    natsSubscription_Destroy(sub_);
    natsConnection_Destroy(nc_);
  }
  bool ok() const { return ok_; }
  bool connected() const { return natsConnection_Status(nc_) == NATS_CONN_STATUS_CONNECTED; }
  bool flush() { return natsConnection_FlushTimeout(nc_, 1000) == NATS_OK; }

  struct Received {
    std::string subject;
    GpuSnapshot snapshot;
    std::string node;  // the payload's node
    std::size_t bytes = 0;
    bool full = false;  // compact: a full message (not a delta)
  };
  /// The next message, decoded; nothing on timeout.
  std::optional<Received> next() {
    natsMsg* m = nullptr;
    if (natsSubscription_NextMsg(&m, sub_, kWait.count()) != NATS_OK) return std::nullopt;
    Received r;
    r.subject = natsMsg_GetSubject(m);
    const std::string_view data(natsMsg_GetData(m),
                                static_cast<std::size_t>(natsMsg_GetDataLength(m)));
    r.bytes = data.size();
    if (data.substr(0, 4) == kBusMagic) {
      r.full = parse_bus_header(data).full;
      auto d = decoder_.decode(data);  // the bridge's first message of a stream is a full one
      if (d) r.snapshot = std::move(d->snapshot);
    } else {
      r.snapshot = snapshot_from_json_string(data);
    }
    natsMsg_Destroy(m);
    r.node = std::exchange(r.snapshot.node, {});  // compared with the published (node-less) one
    return r;
  }

 private:
  natsConnection* nc_ = nullptr;
  natsSubscription* sub_ = nullptr;
  bool ok_ = false;
  BusDecoder decoder_;
};

/// The log from `info` on (the "back" lines are info), readable while the bridge logs.
struct BridgeLogCapture : nats::LogCapture {
  BridgeLogCapture() : nats::LogCapture(spdlog::level::info) {}
};

NatsBridgeOptions options_for(const std::string& url) {
  NatsBridgeOptions o;
  o.url = url;
  o.host = "test.host";  // sanitized to test_host
  o.reconnect_wait = std::chrono::milliseconds(20);
  o.connect_timeout = std::chrono::milliseconds(500);
  return o;
}

TEST(NatsBridge, SanitizesSubjectTokens) {
  EXPECT_EQ(sanitize_subject_token("gpu-box_01"), "gpu-box_01");
  EXPECT_EQ(sanitize_subject_token("a.b c*>"), "a_b_c__");
  EXPECT_EQ(sanitize_subject_token(""), "_");
  const auto host = default_host_token();
  EXPECT_FALSE(host.empty());
  EXPECT_EQ(host, sanitize_subject_token(host));

  boost::asio::io_context io;
  SnapshotChannel channel(io.get_executor());
  NatsBridgeOptions o;
  o.host = "box.lan";
  o.subject_prefix = "fleet.gpu stream";
  NatsBridge bridge(channel, o);
  EXPECT_EQ(bridge.subject_for("nvidia"), "fleet.gpu_stream.box_lan.nvidia");
  EXPECT_EQ(bridge.subject_for("a.b"), "fleet.gpu_stream.box_lan.a_b");
  EXPECT_EQ(bridge.subject_wildcard(), "fleet.gpu_stream.box_lan.*");
}

TEST(NatsBridge, PublishesEachSnapshotOnItsSubject) {
  NatsServer server(free_port());
  ASSERT_TRUE(server.start());
  Subscriber sub(server.url());
  ASSERT_TRUE(sub.ok());

  boost::asio::io_context io;
  SnapshotChannel channel(io.get_executor());
  NatsBridge bridge(channel, options_for(server.url()));
  bridge.start();
  bridge.start();  // idempotent
  ASSERT_TRUE(wait_for([&] { return bridge.stats().connected; }));

  const auto a = channel.publish(make_snapshot("sim", 2, 1, true));
  const auto b = channel.publish(make_snapshot("nv.idia", 1));
  const auto c = channel.publish(make_snapshot("sim", 3));
  for (const auto& [want, subject] :
       {std::pair{a, "gpustream.test_host.sim"}, std::pair{b, "gpustream.test_host.nv_idia"},
        std::pair{c, "gpustream.test_host.sim"}}) {
    const auto got = sub.next();
    ASSERT_TRUE(got) << "no message for sequence " << want->sequence;
    EXPECT_EQ(got->subject, subject);
    EXPECT_EQ(got->node, "test_host");
    EXPECT_EQ(got->snapshot, *want);
  }
  bridge.stop();
  bridge.stop();  // idempotent
  EXPECT_FALSE(bridge.running());
  const auto st = bridge.stats();
  EXPECT_EQ(st.published, 3u);
  EXPECT_EQ(st.publish_errors, 0u);
  EXPECT_FALSE(st.connected);
  EXPECT_EQ(channel.subscriber_count(), 0u);

  // Started again, it publishes again.
  bridge.start();
  ASSERT_TRUE(wait_for([&] { return bridge.stats().connected; }));
  const auto d = channel.publish(make_snapshot("sim", 1));
  const auto got = sub.next();
  ASSERT_TRUE(got);
  EXPECT_EQ(got->snapshot, *d);
}

TEST(NatsBridge, ReconnectsAfterTheServerRestarts) {
  const auto port = free_port();
  auto server = std::make_unique<NatsServer>(port);
  ASSERT_TRUE(server->start());
  Subscriber sub(server->url());
  ASSERT_TRUE(sub.ok());
  boost::asio::io_context io;
  SnapshotChannel channel(io.get_executor());
  NatsBridge bridge(channel, options_for(server->url()));
  bridge.start();
  ASSERT_TRUE(wait_for([&] { return bridge.stats().connected; }));
  const auto first = channel.publish(make_snapshot("sim"));
  auto got = sub.next();
  ASSERT_TRUE(got);
  EXPECT_EQ(got->snapshot, *first);

  server->stop();
  ASSERT_TRUE(wait_for([&] { return !bridge.stats().connected; }));
  for (int i = 0; i < 5; ++i) channel.publish(make_snapshot("sim"));  // while it is away

  server = std::make_unique<NatsServer>(port);
  ASSERT_TRUE(server->start());
  ASSERT_TRUE(wait_for([&] { return bridge.stats().connected && sub.connected(); }));
  ASSERT_TRUE(sub.flush());
  const auto later = channel.publish(make_snapshot("sim", 4));
  // What was kept in the reconnect buffer may arrive first (or not at all: at most once).
  bool seen = false;
  while (!seen && (got = sub.next())) {
    EXPECT_EQ(got->subject, "gpustream.test_host.sim");
    seen = got->snapshot.sequence == later->sequence;
    if (seen) {
      EXPECT_EQ(got->snapshot, *later);
    }
  }
  EXPECT_TRUE(seen) << "the snapshot published after the restart never arrived";
  EXPECT_GE(bridge.stats().reconnects, 1u);
}

TEST(NatsBridge, NothingListeningIsLoggedOnceAndNeverBlocksTheChannel) {
  BridgeLogCapture logs;
  boost::asio::io_context io;
  SnapshotChannel channel(io.get_executor());
  auto o = options_for("nats://127.0.0.1:" + std::to_string(free_port()));
  o.queue_capacity = 4;
  NatsBridge bridge(channel, o);
  bridge.start();
  constexpr int kCount = 200;
  for (int i = 0; i < kCount; ++i) channel.publish(make_snapshot("sim"));  // returns: no wait
  // Every snapshot is accounted for: handed to the reconnect buffer, or dropped.
  ASSERT_TRUE(wait_for([&] {
    const auto s = bridge.stats();
    return s.published + s.dropped + s.publish_errors == kCount;
  }));
  EXPECT_FALSE(bridge.stats().connected);
  ASSERT_TRUE(wait_for([&] { return logs.count("cannot connect to " + o.url) > 0; }));
  EXPECT_EQ(bridge.stats().outages, 1u);  // one, however many attempts
  EXPECT_GT(bridge.stats().disconnected_for.count(), 0);
  bridge.stop();  // returns although nothing ever answered
  EXPECT_EQ(logs.count("cannot connect to " + o.url), 1u) << logs.text();
  EXPECT_FALSE(bridge.stats().connected);
}

TEST(NatsBridge, ConnectsWhenTheServerComesUpLater) {
  const auto port = free_port();
  NatsServer server(port);
  boost::asio::io_context io;
  SnapshotChannel channel(io.get_executor());
  NatsBridge bridge(channel, options_for(server.url()));
  bridge.start();  // nothing listens yet
  ASSERT_TRUE(server.start());
  Subscriber sub(server.url());
  ASSERT_TRUE(sub.ok());
  ASSERT_TRUE(wait_for([&] { return bridge.stats().connected; }));
  const auto s = channel.publish(make_snapshot("sim"));
  std::optional<Subscriber::Received> got;
  while ((got = sub.next()) && got->snapshot.sequence != s->sequence) {}
  ASSERT_TRUE(got) << "the snapshot published once connected never arrived";
  EXPECT_EQ(got->subject, "gpustream.test_host.sim");
  EXPECT_EQ(got->snapshot, *s);
}

// A refusal is named in NATS's own words, once, and is not "no server answers". libnats closes
// a connection after the same authorization error twice: the bridge opens a new one, so it
// connects once the server accepts its password (here: the server restarted with it).
TEST(NatsBridge, ARefusedPasswordIsNamedOnceAndTheBridgeConnectsOnceItIsAccepted) {
  gpustream::test::TempTree dir;
  const auto port = free_port();
  const auto config = [&](const char* password) {
    return dir.file("nats.conf", "listen: 127.0.0.1:" + std::to_string(port) +
                                     "\nauthorization { users = [ { user: agent, password: \"" +
                                     password + "\" } ] }\n");
  };
  NatsServer server(port, {}, config("right-one"));
  ASSERT_TRUE(server.start());
  BridgeLogCapture logs;
  boost::asio::io_context io;
  SnapshotChannel channel(io.get_executor());
  auto o = options_for(server.url());
  o.auth.user = "agent";
  o.auth.password = "the-wrong-one";
  NatsBridge bridge(channel, o);
  bridge.start();
  ASSERT_TRUE(wait_for([&] { return logs.count("Authorization Violation") > 0; })) << logs.text();
  // Closed by libnats: publishing fails (while it retries, it would buffer instead).
  ASSERT_TRUE(wait_for([&] {
    channel.publish(make_snapshot("sim"));
    return bridge.stats().publish_errors > 0;
  }));
  EXPECT_FALSE(bridge.stats().connected);
  EXPECT_EQ(logs.count("no server answers"), 0u) << logs.text();
  EXPECT_EQ(logs.text().find("the-wrong-one"), std::string::npos) << "a secret in the log";

  server.stop();
  config("the-wrong-one");  // now the right one
  ASSERT_TRUE(server.start());
  ASSERT_TRUE(wait_for([&] { return bridge.stats().connected; })) << logs.text();
  bridge.stop();
  EXPECT_EQ(logs.count("Authorization Violation"), 1u) << logs.text();
}

// set_auth() (a SIGHUP reload): an inconsistent auth is refused at once (with its reason); the
// credentials in use are `unchanged`; credentials the server refuses leave the current
// connection in place (publishing goes on); good ones replace it, and are the ones used from
// then on (the server restarted without the old user: it reconnects).
TEST(NatsBridge, NewCredentialsReplaceTheConnectionOnlyOnceTheyConnect) {
  gpustream::test::TempTree dir;
  const auto port = free_port();
  const auto config = [&](bool with_old) {
    return dir.file("nats.conf", "listen: 127.0.0.1:" + std::to_string(port) +
                                     "\nauthorization { users = [ { user: sub, password: sub }, " +
                                     (with_old ? "{ user: old, password: old-pw }, " : "") +
                                     "{ user: new, password: new-pw } ] }\n");
  };
  auto server = std::make_unique<NatsServer>(port, std::string{}, config(true));
  ASSERT_TRUE(server->start());
  const std::string sub_url = "nats://sub:sub@127.0.0.1:" + std::to_string(port);
  Subscriber sub(sub_url);
  ASSERT_TRUE(sub.ok());
  BridgeLogCapture logs;
  boost::asio::io_context io;
  SnapshotChannel channel(io.get_executor());
  auto o = options_for(server->url());
  o.kv_bucket.clear();
  o.auth.user = "old";
  o.auth.password = "old-pw";
  NatsBridge bridge(channel, o);
  bridge.start();
  ASSERT_TRUE(wait_for([&] { return bridge.stats().connected; }));
  const auto delivered = [&] {
    const auto s = channel.publish(make_snapshot("sim"));
    std::optional<Subscriber::Received> got;
    while ((got = sub.next()) && got->snapshot.sequence != s->sequence) {}
    return got.has_value();
  };
  ASSERT_TRUE(delivered());

  NatsAuth inconsistent;
  inconsistent.user = "new";  // no password
  std::string error;
  EXPECT_EQ(bridge.set_auth(inconsistent, &error), NatsAuthChange::refused);
  EXPECT_NE(error.find("password"), std::string::npos) << error;
  EXPECT_EQ(bridge.set_auth(o.auth), NatsAuthChange::unchanged);

  NatsAuth wrong;
  wrong.user = "new";
  wrong.password = "not-it";
  EXPECT_EQ(bridge.set_auth(wrong), NatsAuthChange::reconnecting);
  ASSERT_TRUE(wait_for([&] { return logs.count("the new credentials do not connect") > 0; }))
      << logs.text();
  EXPECT_NE(logs.text().find("Authorization Violation"), std::string::npos) << logs.text();
  EXPECT_TRUE(bridge.stats().connected);
  EXPECT_TRUE(delivered()) << "the old connection was not kept";

  NatsAuth good;
  good.user = "new";
  good.password = "new-pw";
  EXPECT_EQ(bridge.set_auth(good), NatsAuthChange::reconnecting);
  EXPECT_EQ(bridge.set_auth(good), NatsAuthChange::unchanged);
  ASSERT_TRUE(wait_for([&] { return logs.count("with the new credentials") > 0; })) << logs.text();
  EXPECT_TRUE(delivered());

  server->stop();  // back without the old user: only the new credentials connect
  server = std::make_unique<NatsServer>(port, std::string{}, config(false));
  ASSERT_TRUE(server->start());
  ASSERT_TRUE(wait_for([&] { return bridge.stats().connected && sub.connected(); })) << logs.text();
  ASSERT_TRUE(sub.flush());
  EXPECT_TRUE(delivered());
  bridge.stop();
  for (const char* secret : {"old-pw", "new-pw", "not-it"})
    EXPECT_EQ(logs.text().find(secret), std::string::npos) << "a secret in the log";
}

/// Puts `value` under `key` in `bucket` (created in memory, history 1, when missing).
class Bucket {
 public:
  Bucket(const std::string& url, const char* bucket) {
    natsStatus s = natsConnection_ConnectTo(&nc_, url.c_str());
    if (s == NATS_OK) s = natsConnection_JetStream(&js_, nc_, nullptr);
    if (s == NATS_OK) {
      kvConfig cfg;
      kvConfig_Init(&cfg);
      cfg.Bucket = bucket;
      cfg.History = 1;
      cfg.StorageType = js_MemoryStorage;
      cfg.MaxValueSize = 4 << 20;
      s = js_CreateKeyValue(&kv_, js_, &cfg);
    }
    ok_ = s == NATS_OK;
  }
  ~Bucket() {
    if (kv_) kvStore_Destroy(kv_);
    if (js_) jsCtx_Destroy(js_);
    if (nc_) natsConnection_Destroy(nc_);
  }
  bool ok() const { return ok_; }
  bool put(const std::string& key, const std::string& value) {
    uint64_t rev = 0;
    return kvStore_Put(&rev, kv_, key.c_str(), value.data(), static_cast<int>(value.size())) ==
           NATS_OK;
  }
  bool erase(const std::string& key) { return kvStore_Delete(kv_, key.c_str()) == NATS_OK; }
  /// The value under `key`; nothing when absent.
  std::optional<std::string> get(const std::string& key) {
    kvEntry* e = nullptr;
    if (kvStore_Get(&e, kv_, key.c_str()) != NATS_OK) return std::nullopt;
    std::string v(static_cast<const char*>(kvEntry_Value(e)),
                  static_cast<std::size_t>(kvEntry_ValueLen(e)));
    kvEntry_Destroy(e);
    return v;
  }
  /// Whether `bucket` exists on the server at `url` (binds it, never creates it).
  static bool exists(const std::string& url, const char* bucket) {
    natsConnection* nc = nullptr;
    jsCtx* js = nullptr;
    kvStore* kv = nullptr;
    natsStatus s = natsConnection_ConnectTo(&nc, url.c_str());
    if (s == NATS_OK) s = natsConnection_JetStream(&js, nc, nullptr);
    if (s == NATS_OK) s = js_KeyValue(&kv, js, bucket);
    if (kv) kvStore_Destroy(kv);
    if (js) jsCtx_Destroy(js);
    if (nc) natsConnection_Destroy(nc);
    return s == NATS_OK;
  }

 private:
  natsConnection* nc_ = nullptr;
  jsCtx* js_ = nullptr;
  kvStore* kv_ = nullptr;
  bool ok_ = false;
};

/// A nats-server config with JetStream (`store`) and two users: `admin` (everything) and
/// `node1` (password pw1) with the minimal set of an agent (docs/security.md "NATS
/// permissions"): publish its subjects, its own key and the one JetStream API call, subscribe
/// its own inbox.
std::string permissions_config(gpustream::test::TempTree& dir, unsigned short port,
                               const std::string& bucket) {
  return dir.file("perm.conf",
                  "listen: 127.0.0.1:" + std::to_string(port) + "\njetstream { store_dir: \"" +
                      dir.path("js") +
                      "\" }\n"
                      "authorization { users = [\n"
                      "  { user: admin, password: admin }\n"
                      "  { user: node1, password: pw1, permissions: {\n"
                      "      publish: { allow: [\"gpustream.node1.>\", \"$KV." +
                      bucket + ".node1\", \"$JS.API.STREAM.INFO.KV_" + bucket +
                      "\"] }\n"
                      "      subscribe: { allow: [\"_INBOX_gpustream.node1.>\"] } } }\n"
                      "] }\n");
}

// The agent's replies come to _INBOX_gpustream.<node> by default, so the minimal permission set
// (subscribe only its own inbox) is enough to keep its state in the bucket; with libnats's
// `_INBOX` it is not (the server refuses the subscription).
TEST(NatsBridge, ItsRepliesComeToItsOwnInboxSoTheMinimalPermissionsSuffice) {
  gpustream::test::TempTree dir;
  const auto port = free_port();
  constexpr const char* kName = "perm_nodes";
  NatsServer server(port, {}, permissions_config(dir, port, kName));
  ASSERT_TRUE(server.start());
  const std::string admin_url = "nats://admin:admin@127.0.0.1:" + std::to_string(port);
  Bucket bucket(admin_url, kName);  // created by an admin: an agent may not
  ASSERT_TRUE(bucket.ok());

  const auto run = [&](const std::string& inbox_prefix) {
    boost::asio::io_context io;
    SnapshotChannel channel(io.get_executor());
    auto o = options_for(server.url());
    o.host = "node1";
    o.kv_bucket = kName;
    o.full_every = 1;
    o.auth.user = "node1";
    o.auth.password = "pw1";
    o.auth.inbox_prefix = inbox_prefix;
    NatsBridge bridge(channel, o);
    EXPECT_EQ(bridge.options().auth.inbox_prefix,
              inbox_prefix.empty() ? "_INBOX_gpustream.node1" : inbox_prefix);
    bridge.start();
    EXPECT_TRUE(wait_for([&] { return bridge.stats().connected; }));
    EXPECT_TRUE(wait_for([&] {
      channel.publish(make_snapshot("sim"));
      const auto st = bridge.stats();
      return st.kv_puts + st.kv_errors > 0;
    }));
    bridge.stop();
    return bridge.stats();
  };
  const auto own = run("");
  EXPECT_GE(own.kv_puts, 1u);
  EXPECT_EQ(own.kv_errors, 0u);
  const auto shared = run("_INBOX");
  EXPECT_EQ(shared.kv_puts, 0u);
  EXPECT_GE(shared.kv_errors, 1u);
}

// The agent never creates the bucket (whoever creates a stream chooses its config: a republish
// rule would turn its puts into another node's messages). While it is missing, the bus goes on,
// the failure is logged once saying who creates it, and the binding is retried at most once a
// reconnect_wait; once it exists, the state is put.
TEST(NatsBridge, NeverCreatesTheBucketAndPutsItsStateOnceItExists) {
  gpustream::test::TempTree store;
  const auto port = free_port();
  NatsServer server(port, store.path("js"));
  ASSERT_TRUE(server.start());
  Subscriber sub(server.url());
  ASSERT_TRUE(sub.ok());
  constexpr const char* kName = "agent_made_none";
  BridgeLogCapture logs;
  boost::asio::io_context io;
  SnapshotChannel channel(io.get_executor());
  auto o = options_for(server.url());
  o.kv_bucket = kName;
  o.reconnect_wait = std::chrono::milliseconds(50);
  NatsBridge bridge(channel, o);
  const auto started = std::chrono::steady_clock::now();
  bridge.start();
  ASSERT_TRUE(wait_for([&] { return bridge.stats().connected; }));
  // Until 3 failed attempts: the bus messages go on meanwhile.
  for (int i = 0; bridge.stats().kv_errors < 3; ++i) {
    const auto s = channel.publish(make_snapshot("sim"));
    const auto got = sub.next();
    ASSERT_TRUE(got) << "a bus message was lost while the bucket is missing (" << i << ")";
    EXPECT_EQ(got->snapshot, *s);
  }
  const auto elapsed = std::chrono::steady_clock::now() - started;
  const auto errors = bridge.stats().kv_errors;
  EXPECT_FALSE(Bucket::exists(server.url(), kName)) << "the agent created the bucket";
  // At most one attempt a reconnect_wait (a slower machine makes fewer, never more).
  EXPECT_LE(errors, static_cast<std::uint64_t>(elapsed / o.reconnect_wait) + 1);
  EXPECT_EQ(bridge.stats().kv_puts, 0u);
  EXPECT_EQ(logs.count("does not exist; an agent never creates it"), 1u) << logs.text();
  EXPECT_EQ(logs.count("docs/fleet.md"), 1u) << logs.text();

  Bucket bucket(server.url(), kName);  // the fleet view (or an admin) creates it
  ASSERT_TRUE(bucket.ok());
  ASSERT_TRUE(wait_for([&] {
    channel.publish(make_snapshot("sim"));
    return bridge.stats().kv_puts > 0;
  }));
  const auto state = bucket.get("test_host");
  ASSERT_TRUE(state) << "no key test_host in the bucket";
  EXPECT_EQ(decode_node_state(*state).size(), 1u);  // one probe: its last full message
  EXPECT_EQ(
      logs.count("in the key-value bucket '" + std::string(kName) + "' on " + o.url + " again"), 1u)
      << logs.text();
  bridge.stop();
  EXPECT_EQ(logs.count("does not exist"), 1u) << logs.text();
}

// After the server restarts (a bucket in memory is gone with it), the agent says once that it
// lost the server and that it is back, publishes a full message per probe at once (not after
// full_every), and puts its state again as soon as the bucket is back.
TEST(NatsBridge, AfterAServerRestartItSendsFullsAtOnceAndPutsItsStateWhenTheBucketIsBack) {
  gpustream::test::TempTree store;
  const auto port = free_port();
  auto server = std::make_unique<NatsServer>(port, store.path("js1"));
  ASSERT_TRUE(server->start());
  constexpr const char* kName = "restart_nodes";
  auto bucket = std::make_unique<Bucket>(server->url(), kName);
  ASSERT_TRUE(bucket->ok());
  Subscriber sub(server->url());
  ASSERT_TRUE(sub.ok());
  BridgeLogCapture logs;
  boost::asio::io_context io;
  SnapshotChannel channel(io.get_executor());
  auto o = options_for(server->url());
  o.kv_bucket = kName;
  o.full_every = 100000;  // without the reconnect rule, one full message only
  o.reconnect_wait = std::chrono::milliseconds(50);
  NatsBridge bridge(channel, o);
  bridge.start();
  ASSERT_TRUE(wait_for([&] { return bridge.stats().connected; }));
  for (const bool full : {true, false, false}) {
    channel.publish(make_snapshot("sim"));
    const auto got = sub.next();
    ASSERT_TRUE(got);
    EXPECT_EQ(got->full, full);
  }
  ASSERT_TRUE(wait_for([&] { return bridge.stats().kv_puts > 0; }));
  const auto puts_before = bridge.stats().kv_puts;

  bucket.reset();
  server->stop();
  ASSERT_TRUE(wait_for([&] { return !bridge.stats().connected; }));
  server = std::make_unique<NatsServer>(port, store.path("js2"));  // an empty store: no bucket
  ASSERT_TRUE(server->start());
  ASSERT_TRUE(wait_for([&] { return bridge.stats().connected && sub.connected(); }));
  ASSERT_TRUE(sub.flush());
  // The first message published after the reconnect is a full one.
  const auto after = channel.publish(make_snapshot("sim", 2));
  std::optional<Subscriber::Received> got;
  while ((got = sub.next()) && got->snapshot.sequence != after->sequence) {}
  ASSERT_TRUE(got) << "the snapshot published after the restart never arrived";
  EXPECT_TRUE(got->full) << "a delta after a reconnect: a new consumer waits full_every for it";
  ASSERT_TRUE(wait_for([&] { return logs.count("does not exist") > 0; })) << logs.text();
  EXPECT_EQ(bridge.stats().kv_puts, puts_before);

  bucket = std::make_unique<Bucket>(server->url(), kName);  // recreated (by the fleet view)
  ASSERT_TRUE(bucket->ok());
  // Put at once when it is back: no new full message is needed (none is published here).
  ASSERT_TRUE(wait_for([&] { return bridge.stats().kv_puts > puts_before; }));
  const auto state = bucket->get("test_host");
  ASSERT_TRUE(state);
  EXPECT_EQ(decode_node_state(*state).size(), 1u);
  EXPECT_EQ(bridge.stats().outages, 1u);  // one restart: one outage, however many attempts
  EXPECT_TRUE(bridge.stats().connected);
  EXPECT_EQ(bridge.stats().disconnected_for.count(), 0);
  bridge.stop();
  EXPECT_EQ(logs.count("lost the connection to " + o.url), 1u) << logs.text();
  EXPECT_EQ(logs.count("reconnected to " + o.url), 1u) << logs.text();
  EXPECT_EQ(logs.count("does not exist"), 1u) << logs.text();
  EXPECT_GE(bridge.stats().reconnects, 1u);
}

// An agent is unhealthy once it has not been connected for longer than the bound, and says how
// long; its counters are Prometheus families and JSON members (the numbers here are made up).
TEST(NatsBridge, HealthMetricsAndStatsSayTheState) {
  NatsBridgeStats s;
  s.connected = true;
  EXPECT_FALSE(nats_health_error(s, std::chrono::seconds(10)));
  s.connected = false;
  s.disconnected_for = std::chrono::milliseconds(10000);
  EXPECT_FALSE(nats_health_error(s, std::chrono::seconds(10)));  // at the bound: still healthy
  s.disconnected_for = std::chrono::milliseconds(12345);
  const auto why = nats_health_error(s, std::chrono::seconds(10));
  ASSERT_TRUE(why);
  EXPECT_EQ(*why, "NATS disconnected for 12.345 s (more than 10.000 s)");

  s.outages = 2;
  s.reconnects = 3;
  s.published = 40;
  s.bytes = 5000;
  s.publish_errors = 6;
  s.dropped = 7;
  s.kv_puts = 8;
  s.kv_errors = 9;
  const auto text = nats_bridge_metrics(s);
  for (const char* line :
       {"gpustream_nats_connected 0\n", "gpustream_nats_disconnected_seconds 12.345",
        "gpustream_nats_outages_total 2\n", "gpustream_nats_reconnects_total 3\n",
        "gpustream_nats_published_total 40\n", "gpustream_nats_published_bytes_total 5000\n",
        "gpustream_nats_publish_errors_total 6\n", "gpustream_nats_dropped_total 7\n",
        "gpustream_nats_kv_puts_total 8\n", "gpustream_nats_kv_write_failures_total 9\n",
        "# TYPE gpustream_nats_outages_total counter\n", "# TYPE gpustream_nats_connected gauge\n"})
    EXPECT_NE(text.find(line), std::string::npos) << line << " not in\n" << text;
  const auto doc = boost::json::parse("{" + nats_bridge_stats_json(s) + "}").as_object();
  EXPECT_EQ(doc.at("connected"), false);
  EXPECT_EQ(doc.at("disconnected_ms"), 12345);
  EXPECT_EQ(doc.at("outages"), 2);
  EXPECT_EQ(doc.at("published_bytes"), 5000);
  EXPECT_EQ(doc.at("kv_write_failures"), 9);
}

/// A new FleetView reads the whole bucket in the background after start() returns, in one pass
/// (a key-value watcher) or key by key: the same nodes either way; a deleted key is no node;
/// garbage and an oversized state are refused (counted) without stopping the read; max_nodes bounds
/// it; an empty bucket ends at once.
TEST(FleetViewBucket, ANewViewReadsEveryNodeOfTheBucketInOnePass) {
  gpustream::test::TempTree store;
  const auto port = free_port();
  NatsServer server(port, store.path("js"));
  ASSERT_TRUE(server.start());
  constexpr const char* kName = "fleet_test_nodes";
  Bucket bucket(server.url(), kName);
  ASSERT_TRUE(bucket.ok());
  const auto fleet_options = [&](bool watch, std::size_t max_nodes) {
    FleetOptions o;
    o.url = server.url();
    o.kv_bucket = kName;
    o.kv_watch = watch;
    o.max_nodes = max_nodes;
    o.limits.max_message_bytes = 4096;  // so that an oversized state fits a NATS message
    o.stale_after = std::chrono::hours(1);
    o.gone_after = std::chrono::hours(2);
    return o;
  };
  const auto read = [&](bool watch, std::size_t max_nodes = 100000) {
    boost::asio::io_context io;
    SnapshotChannel channel(io.get_executor());
    FleetView view(io.get_executor(), channel, fleet_options(watch, max_nodes));
    view.start();
    EXPECT_TRUE(view.wait_for_bucket(std::chrono::seconds(30)));
    std::vector<std::string> names;
    for (const auto& n : view.nodes()) names.push_back(n.name);
    const auto st = view.stats();
    view.stop();
    return std::make_pair(names, st);
  };
  // An empty bucket: nothing, and no wait for a timeout.
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(read(true).first.empty());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(4));

  constexpr int kNodes = 40;
  std::vector<std::string> expected;
  for (int i = 0; i < kNodes; ++i) {
    const std::string node = "node-" + std::to_string(100 + i);
    BusEncoder enc(node, "gpustream/test");
    enc.encode(make_snapshot("sim", 2));
    ASSERT_TRUE(bucket.put(node, encode_node_state(enc.last_fulls())));
    expected.push_back(node);
  }
  ASSERT_TRUE(bucket.put("node-gone", "x"));
  ASSERT_TRUE(bucket.erase("node-gone"));
  ASSERT_TRUE(bucket.put("node-garbage", "GSK1 1\n5\nhello"));
  // The worst state: past the bound of 64 messages of max_message_bytes each (plus framing).
  ASSERT_TRUE(bucket.put("node-huge", "GSK1 1\n" + std::string(64 * (4096 + 32) + 1, 'x')));

  for (const bool watch : {true, false}) {
    const auto [names, st] = read(watch);
    EXPECT_EQ(names, expected) << (watch ? "watcher" : "key by key");
    EXPECT_EQ(st.kv_nodes, static_cast<std::uint64_t>(kNodes));
    EXPECT_EQ(st.rejected, 2U);  // the garbage and the oversized state
  }
  // Bounded by max_nodes: the first 10 keys read, the rest shows as it publishes.
  EXPECT_EQ(read(true, 10).first.size(), 10U);
}

/// A bucket full of deflate bombs (4 keys × 64 full messages, each a few kilobytes declaring
/// 8 MiB once inflated): the view's start() does not wait for it, the bombs go through each
/// node's budget (inflated bytes and decode CPU time) so most are refused unread, and a node
/// that publishes on the bus meanwhile is shown. (How long the first version took to listen
/// — 63 s — is measured by the integration test, not here: no timed assertion.)
TEST(FleetViewBucket, ABucketOfBombsIsReadInTheBackgroundUnderEachNodesBudget) {
  gpustream::test::TempTree store;
  const auto port = free_port();
  NatsServer server(port, store.path("js"));
  ASSERT_TRUE(server.start());
  constexpr const char* kName = "fleet_test_bombs";
  Bucket bucket(server.url(), kName);
  ASSERT_TRUE(bucket.ok());
  // One bomb encoded once; its header rewritten for each node and probe (the body is the same).
  GpuSnapshot bomb = make_snapshot("sim", 1);
  bomb.devices[0].name = std::string((std::size_t{8} << 20) - 4096, 'a');
  // Compressed whatever its ratio (the agent's encoder would send it plain), as an attacker would.
  const std::string one =
      BusEncoder("bomb", "gpustream/test", {.max_inflation_ratio = 1'000'000}).encode(bomb);
  BusLimits loose;
  loose.max_inflation_ratio = 1'000'000;
  const auto h = parse_bus_header(one, loose);
  const std::string body = one.substr(one.find('\n') + 1);
  constexpr int kKeys = 4, kBombs = 64;
  for (int k = 0; k < kKeys; ++k) {
    const std::string node = "bomber-" + std::to_string(k);
    std::map<std::string, std::string> fulls;
    for (int i = 0; i < kBombs; ++i) {
      const std::string probe = "p" + std::to_string(i);
      fulls[probe] = "GSB1 f z " + node + " " + probe + " 1 1 1 " + std::to_string(h.body_bytes) +
                     " gpustream/test\n" + body;
    }
    ASSERT_TRUE(bucket.put(node, encode_node_state(fulls)));
  }
  boost::asio::io_context io;
  SnapshotChannel channel(io.get_executor());
  FleetOptions o;
  o.url = server.url();
  o.kv_bucket = kName;
  o.stale_after = std::chrono::hours(1);
  o.gone_after = std::chrono::hours(2);
  // start() returns before the bucket is read: the end of the read waits for it (a view that
  // read the bucket inside start() would find start_returned false after 30 s).
  std::mutex m;
  std::condition_variable cv;
  bool start_returned = false;
  std::optional<bool> read_after_start;
  o.on_bucket_read = [&](std::uint64_t, std::chrono::milliseconds) {
    std::unique_lock lock(m);
    cv.wait_for(lock, std::chrono::seconds(30), [&] { return start_returned; });
    read_after_start = start_returned;
    cv.notify_all();
  };
  FleetView view(io.get_executor(), channel, o);
  view.start();
  {
    std::lock_guard lock(m);
    start_returned = true;
  }
  cv.notify_all();
  // A node that publishes meanwhile is decoded like any other.
  natsConnection* nc = nullptr;
  ASSERT_EQ(natsConnection_ConnectTo(&nc, server.url().c_str()), NATS_OK);
  BusEncoder good("good", "gpustream/test");
  const auto has_good = [&] {
    for (const auto& n : view.nodes())
      if (n.name == "good") return true;
    return false;
  };
  ASSERT_TRUE(wait_for([&] {
    const auto& m = good.encode(make_snapshot("sim", 2));
    natsConnection_Publish(nc, "gpustream.good.sim", m.data(), static_cast<int>(m.size()));
    return has_good();
  }));
  natsConnection_Destroy(nc);
  ASSERT_TRUE(view.wait_for_bucket(std::chrono::seconds(60)));
  {
    std::unique_lock lock(m);
    cv.wait_for(lock, std::chrono::seconds(30), [&] { return read_after_start.has_value(); });
    EXPECT_EQ(read_after_start, std::optional<bool>(true));
  }
  const auto st = view.stats();
  // Each node may decode what its burst and refill allow (a few bombs), never most of them:
  // the rest is refused by its budget (budget_bytes, budget_cpu), or before it by the codec's
  // bound on the inflation ratio (inflation): here, every one of them, from its header.
  std::uint64_t refused = 0;
  for (const auto r : st.refused) refused += r;
  EXPECT_GE(refused, static_cast<std::uint64_t>(kKeys * kBombs / 2)) << refused;
  EXPECT_EQ(st.refused[static_cast<std::size_t>(FleetRefusal::inflation)],
            static_cast<std::uint64_t>(kKeys * kBombs));
  EXPECT_EQ(st.pending, 0U);
  view.stop();
}

}  // namespace
}  // namespace gpustream::transport::test

#endif  // GPUSTREAM_HAS_NATS
