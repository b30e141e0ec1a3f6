// FleetView's NATS side against a real nats-server (nats_server.hpp): the bucket created when
// missing (with its settings), used as it is when it exists with another config (one warning),
// or named for an admin when the view may not create it; an outage said once with its cause,
// counted, and after it the bucket created again and the nodes kept; republished messages and
// bucket entries whose key is not their node refused. Built only with libnats.
#if defined(GPUSTREAM_HAS_NATS)

#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nats/nats.h>

#include <boost/asio/io_context.hpp>

#include "gpustream/channel.hpp"
#include "gpustream/transport/fleet.hpp"
#include "gpustream/transport/fleet_codec.hpp"
#include "support/temp_tree.hpp"
#include "transport/fleet/nats_server.hpp"
#include "transport/harness.hpp"

namespace gpustream::transport::test {
namespace {

using nats::LogCapture;
using nats::wait_for;

/// A plain libnats client: what an admin or an agent does to the server.
class Admin {
 public:
  explicit Admin(const std::string& url) {
    natsOptions* o = nullptr;
    natsOptions_Create(&o);
    natsOptions_SetURL(o, url.c_str());
    natsOptions_SetMaxReconnect(o, -1);
    natsOptions_SetReconnectWait(o, 20);
    if (natsConnection_Connect(&nc_, o) == NATS_OK)
      ok_ = natsConnection_JetStream(&js_, nc_, nullptr) == NATS_OK;
    natsOptions_Destroy(o);
  }
  ~Admin() {
    if (js_) jsCtx_Destroy(js_);
    if (nc_) natsConnection_Destroy(nc_);
  }
  bool ok() const { return ok_; }
  jsCtx* js() { return js_; }

  /// The stream behind `bucket`, or nullptr (the caller destroys it).
  jsStreamInfo* stream(const std::string& bucket) {
    jsStreamInfo* si = nullptr;
    if (js_GetStreamInfo(&si, js_, ("KV_" + bucket).c_str(), nullptr, nullptr) != NATS_OK)
      return nullptr;
    return si;
  }
  bool put(const std::string& bucket, const std::string& key, const std::string& value) {
    kvStore* kv = nullptr;
    if (js_KeyValue(&kv, js_, bucket.c_str()) != NATS_OK) return false;
    std::uint64_t rev = 0;
    const bool ok =
        kvStore_Put(&rev, kv, key.c_str(), value.data(), static_cast<int>(value.size())) == NATS_OK;
    kvStore_Destroy(kv);
    return ok;
  }
  bool publish(const std::string& subject, const std::string& data) {
    return natsConnection_Publish(nc_, subject.c_str(), data.data(),
                                  static_cast<int>(data.size())) == NATS_OK &&
           natsConnection_FlushTimeout(nc_, 2000) == NATS_OK;
  }

 private:
  natsConnection* nc_ = nullptr;
  jsCtx* js_ = nullptr;
  bool ok_ = false;
};

FleetOptions view_options(const nats::Server& server, const std::string& bucket) {
  FleetOptions o;
  o.url = server.url();
  o.kv_bucket = bucket;
  o.stale_after = std::chrono::hours(1);
  o.gone_after = std::chrono::hours(2);
  o.reconnect_wait = std::chrono::milliseconds(50);
  o.connect_timeout = std::chrono::milliseconds(2000);
  return o;
}

bool knows(const FleetView& view, const std::string& node) {
  for (const auto& n : view.nodes())
    if (n.name == node) return true;
  return false;
}

std::uint64_t refused(const FleetView& v, FleetRefusal r) {
  return v.stats().refused[static_cast<std::size_t>(r)];
}

/// One full bus message of `node` (its state in the bucket: encode_node_state of it).
std::string node_state(const std::string& node, const std::string& named = {}) {
  BusEncoder enc(named.empty() ? node : named, "gpustream/test");
  enc.encode(make_snapshot("sim", 2));
  return encode_node_state(enc.last_fulls());
}

TEST(FleetViewNats, AMissingBucketIsCreatedWithTheViewsSettings) {
  gpustream::test::TempTree store;
  nats::Server server(nats::free_port(), store.path("js"));
  ASSERT_TRUE(server.start());
  LogCapture logs;
  boost::asio::io_context io;
  SnapshotChannel channel(io.get_executor());
  auto o = view_options(server, "created_here");
  o.kv_storage = KvStorage::memory;
  o.kv_ttl = std::chrono::seconds(7);
  o.kv_max_bytes = 3 << 20;
  o.limits.max_message_bytes = 256 << 10;
  FleetView view(io.get_executor(), channel, o);
  view.start();
  ASSERT_TRUE(view.wait_for_bucket(nats::kWait));
  EXPECT_EQ(view.stats().kv_created, 1U);
  Admin admin(server.url());
  ASSERT_TRUE(admin.ok());
  jsStreamInfo* si = admin.stream("created_here");
  ASSERT_NE(si, nullptr) << logs.text();
  EXPECT_EQ(si->Config->Storage, js_MemoryStorage);
  EXPECT_EQ(si->Config->MaxAge, std::chrono::nanoseconds(std::chrono::seconds(7)).count());
  EXPECT_EQ(si->Config->MaxMsgsPerSubject, 1);
  EXPECT_EQ(si->Config->Replicas, 1);
  EXPECT_EQ(si->Config->MaxBytes, 3 << 20);
  EXPECT_EQ(si->Config->MaxMsgSize, 256 << 10);
  jsStreamInfo_Destroy(si);
  EXPECT_EQ(logs.count("created the key-value bucket 'created_here' (memory storage"), 1U)
      << logs.text();
  // What an agent then puts is read by a new view.
  ASSERT_TRUE(admin.put("created_here", "node-a", node_state("node-a")));
  view.stop();
  FleetView second(io.get_executor(), channel, o);
  second.start();
  ASSERT_TRUE(second.wait_for_bucket(nats::kWait));
  EXPECT_TRUE(knows(second, "node-a"));
  EXPECT_EQ(second.stats().kv_created, 0U);
  EXPECT_EQ(second.stats().kv_nodes, 1U);
}

TEST(FleetViewNats, WithKvCreateOffAMissingBucketIsNamedForTheAdminOnce) {
  gpustream::test::TempTree store;
  nats::Server server(nats::free_port(), store.path("js"));
  ASSERT_TRUE(server.start());
  LogCapture logs;
  boost::asio::io_context io;
  SnapshotChannel channel(io.get_executor());
  auto o = view_options(server, "not_here");
  o.kv_create = false;
  o.gone_after = std::chrono::seconds(45);
  FleetView view(io.get_executor(), channel, o);
  view.start();
  ASSERT_TRUE(view.wait_for_bucket(nats::kWait));
  Admin admin(server.url());
  ASSERT_TRUE(admin.ok());
  EXPECT_EQ(admin.stream("not_here"), nullptr) << "created although --kv-create off";
  EXPECT_EQ(view.stats().kv_created, 0U);
  EXPECT_EQ(logs.count("nats kv add not_here --history 1 --ttl 45s --storage file --replicas 1"),
            1U)
      << logs.text();
}

TEST(FleetViewNats, AnExistingBucketWithAnotherConfigIsUsedAsItIsWithOneWarning) {
  gpustream::test::TempTree store;
  nats::Server server(nats::free_port(), store.path("js"));
  ASSERT_TRUE(server.start());
  Admin admin(server.url());
  ASSERT_TRUE(admin.ok());
  // An admin's bucket: memory, history 5, entries live 60 s, and a republish rule.
  jsRePublish rp;
  jsRePublish_Init(&rp);
  rp.Source = ">";
  rp.Destination = "elsewhere.>";
  kvConfig cfg;
  kvConfig_Init(&cfg);
  cfg.Bucket = "theirs";
  cfg.History = 5;
  cfg.TTL = std::chrono::nanoseconds(std::chrono::seconds(60)).count();
  cfg.StorageType = js_MemoryStorage;
  cfg.RePublish = &rp;
  kvStore* kv = nullptr;
  ASSERT_EQ(js_CreateKeyValue(&kv, admin.js(), &cfg), NATS_OK);
  kvStore_Destroy(kv);
  ASSERT_TRUE(admin.put("theirs", "node-a", node_state("node-a")));

  LogCapture logs;
  boost::asio::io_context io;
  SnapshotChannel channel(io.get_executor());
  auto o = view_options(server, "theirs");
  o.gone_after = std::chrono::seconds(30);
  FleetView view(io.get_executor(), channel, o);
  view.start();
  ASSERT_TRUE(view.wait_for_bucket(nats::kWait));
  EXPECT_TRUE(knows(view, "node-a"));  // used as it is
  EXPECT_EQ(view.stats().kv_created, 0U);
  EXPECT_EQ(logs.count("exists with another config, used as it is"), 1U) << logs.text();
  for (const char* d : {"storage memory (--kv-storage file)", "entries live 60s (--kv-ttl 30s)",
                        "a history of 5 per key", "a republish rule to 'elsewhere.>'"})
    EXPECT_EQ(logs.count(d), 1U) << d << "\n" << logs.text();
  jsStreamInfo* si = admin.stream("theirs");
  ASSERT_NE(si, nullptr);
  EXPECT_EQ(si->Config->Storage, js_MemoryStorage);  // untouched
  jsStreamInfo_Destroy(si);
}

/// kill -9 of nats-server, then the same server again on the same port: the view says once
/// that it lost NATS (with the cause) and once that it is back, counts the outage, creates the
/// bucket again (it was in memory), keeps its nodes, and reads what is put after.
TEST(FleetViewNats, AnOutageIsSaidOnceCountedAndTheBucketIsCreatedAgain) {
  gpustream::test::TempTree store;
  nats::Server server(nats::free_port(), store.path("js"));
  ASSERT_TRUE(server.start());
  LogCapture logs;
  boost::asio::io_context io;
  SnapshotChannel channel(io.get_executor());
  auto o = view_options(server, "restarts");
  o.kv_storage = KvStorage::memory;
  FleetView view(io.get_executor(), channel, o);
  view.start();
  ASSERT_TRUE(view.wait_for_bucket(nats::kWait));
  auto metrics = view.metrics();
  {
    Admin agent(server.url());
    ASSERT_TRUE(agent.ok());
    BusEncoder enc("node-a", "gpustream/test");
    ASSERT_TRUE(wait_for([&] {
      agent.publish("gpustream.node-a.sim", enc.encode(make_snapshot("sim", 2)));
      return knows(view, "node-a");
    }));
  }
  EXPECT_TRUE(view.stats().connected);
  EXPECT_NE(metrics().find("\ngpustream_fleet_nats_connected 1\n"), std::string::npos);

  server.stop();
  ASSERT_TRUE(wait_for([&] { return !view.stats().connected; }));
  // Many reconnection attempts fail meanwhile (every 50 ms): the outage is still said once.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(view.stats().outages, 1U);
  EXPECT_EQ(logs.count("fleet: lost NATS at " + server.url()), 1U) << logs.text();
  const std::string text = metrics();
  EXPECT_NE(text.find("\ngpustream_fleet_nats_connected 0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\ngpustream_fleet_nats_outages_total 1\n"), std::string::npos) << text;

  ASSERT_TRUE(server.start());
  ASSERT_TRUE(wait_for([&] { return view.stats().kv_created == 2; })) << logs.text();
  EXPECT_TRUE(view.stats().connected);
  EXPECT_EQ(view.stats().reconnects, 1U);
  EXPECT_EQ(logs.count("fleet: NATS is back at " + server.url()), 1U) << logs.text();
  EXPECT_TRUE(knows(view, "node-a"));  // kept through the outage
  Admin admin(server.url());
  ASSERT_TRUE(admin.ok());
  jsStreamInfo* si = admin.stream("restarts");
  ASSERT_NE(si, nullptr);
  jsStreamInfo_Destroy(si);
  ASSERT_TRUE(wait_for([&] { return view.stats().kv_rereads == 1; }));
  view.stop();
  EXPECT_EQ(view.stats().outages, 1U);  // stopping is no outage
  EXPECT_EQ(logs.count("fleet: lost NATS"), 1U) << logs.text();
}

/// After a reconnect the bucket is read again: a node whose state was put there while the view
/// ran (it reads the bucket at start only, and the node never published on the bus) shows once
/// NATS is back; the bucket survived the restart (file storage), so nothing is created.
TEST(FleetViewNats, AfterAReconnectTheBucketIsReadAgain) {
  gpustream::test::TempTree store;
  nats::Server server(nats::free_port(), store.path("js"));
  ASSERT_TRUE(server.start());
  boost::asio::io_context io;
  SnapshotChannel channel(io.get_executor());
  const auto o = view_options(server, "reread");
  FleetView view(io.get_executor(), channel, o);
  view.start();
  ASSERT_TRUE(view.wait_for_bucket(nats::kWait));
  {
    Admin admin(server.url());
    ASSERT_TRUE(admin.ok());
    ASSERT_TRUE(admin.put("reread", "node-x", node_state("node-x")));
  }
  EXPECT_FALSE(knows(view, "node-x"));  // not on the bus, and the bucket was read at start
  server.stop();
  ASSERT_TRUE(wait_for([&] { return !view.stats().connected; }));
  ASSERT_TRUE(server.start());
  ASSERT_TRUE(wait_for([&] { return knows(view, "node-x"); }));
  EXPECT_EQ(view.stats().kv_rereads, 1U);
  EXPECT_EQ(view.stats().kv_created, 1U);  // at start only: the file bucket survived
}

/// The newest sample time the view shows for `node` (0: none).
std::int64_t newest_sample(const FleetView& view, const std::string& node) {
  for (const auto& n : view.nodes())
    if (n.name == node) return n.last_sample_unix_ns;
  return 0;
}

/// A delta of a full the view never got (what made integration.nats_restart fail: an agent that
/// reconnected before the view sent its one full after the reconnect while the view was still
/// disconnected, and the view then got only deltas of it until the agent's next full, 10 s
/// later) takes that full from the bucket, where the agent put it: the node shows the agent's
/// newest samples at once. Only the waiting stream's full is taken from the node's state (the
/// other probe's full in it, which the view has, is not replayed as an old message).
TEST(FleetViewNats, ADeltaOfAFullTheViewMissedTakesThatFullFromTheBucket) {
  gpustream::test::TempTree store;
  nats::Server server(nats::free_port(), store.path("js"));
  ASSERT_TRUE(server.start());
  boost::asio::io_context io;
  SnapshotChannel channel(io.get_executor());
  FleetView view(io.get_executor(), channel, view_options(server, "bases"));
  view.start();
  ASSERT_TRUE(view.wait_for_bucket(nats::kWait));
  Admin agent(server.url());
  ASSERT_TRUE(agent.ok());
  BusEncoder enc("node-b", "gpustream/test", {.full_every = 1000});  // deltas from here on
  std::int64_t t = 1'700'000'000'000'000'000;
  const auto sample = [&](const std::string& probe) {
    auto s = make_snapshot(probe, 2);
    s.time_unix_ns = t += 1'000'000'000;
    return s;
  };
  ASSERT_TRUE(agent.publish("gpustream.node-b.other", enc.encode(sample("other"))));
  ASSERT_TRUE(wait_for([&] {
    agent.publish("gpustream.node-b.sim", enc.encode(sample("sim")));
    return view.stats().snapshots >= 2;
  }));
  const auto before = view.stats();
  // The full the view misses: in the bucket (the agent puts its fulls there), not on the bus.
  enc.force_full();
  enc.encode(sample("sim"));
  ASSERT_TRUE(enc.last_was_full());
  const std::int64_t full_time = t;
  ASSERT_TRUE(agent.put("bases", "node-b", encode_node_state(enc.last_fulls())));
  ASSERT_EQ(enc.last_fulls().size(), 2U);  // sim's new full and other's, which the view has
  ASSERT_TRUE(wait_for([&] {
    const std::string delta = enc.encode(sample("sim"));
    EXPECT_FALSE(enc.last_was_full());
    agent.publish("gpustream.node-b.sim", delta);
    return newest_sample(view, "node-b") > full_time;  // a delta of the missed full applied
  })) << "waiting "
      << view.stats().waiting << ", fetches " << view.stats().kv_base_fetches;
  const auto after = view.stats();
  EXPECT_GT(after.waiting, before.waiting);  // the first delta came before its full
  EXPECT_GE(after.kv_base_fetches, 1U);
  EXPECT_EQ(refused(view, FleetRefusal::seq_stale), 0U);  // other's full was not taken again
  EXPECT_EQ(after.rejected, before.rejected);
  view.stop();
}

/// A stream whose republish rule puts what is stored on `evil.>` onto gpustream.node-b.*: the
/// message arrives on node-b's subject, with a payload naming node-b, yet it is refused
/// (republished) and node-b never shows. The node's own message on the same subject is taken.
TEST(FleetViewNats, ARepublishedMessageIsRefused) {
  gpustream::test::TempTree store;
  nats::Server server(nats::free_port(), store.path("js"));
  ASSERT_TRUE(server.start());
  Admin admin(server.url());
  ASSERT_TRUE(admin.ok());
  jsStreamConfig sc;
  jsStreamConfig_Init(&sc);
  const char* subjects[] = {"evil.>"};
  sc.Name = "EVIL";
  sc.Subjects = subjects;
  sc.SubjectsLen = 1;
  sc.Storage = js_MemoryStorage;
  jsRePublish rp;
  jsRePublish_Init(&rp);
  rp.Source = "evil.sim";
  rp.Destination = "gpustream.node-b.sim";
  sc.RePublish = &rp;
  jsStreamInfo* si = nullptr;
  ASSERT_EQ(js_AddStream(&si, admin.js(), &sc, nullptr, nullptr), NATS_OK);
  jsStreamInfo_Destroy(si);

  LogCapture logs;
  boost::asio::io_context io;
  SnapshotChannel channel(io.get_executor());
  auto o = view_options(server, "");
  o.kv_bucket.clear();
  FleetView view(io.get_executor(), channel, o);
  view.start();
  BusEncoder as_b("node-b", "gpustream/test", {.full_every = 1});
  ASSERT_TRUE(wait_for([&] {
    admin.publish("evil.sim", as_b.encode(make_snapshot("sim", 2)));
    return refused(view, FleetRefusal::republished) > 0;
  })) << logs.text();
  EXPECT_FALSE(knows(view, "node-b"));
  // Counted, then logged (on the view's worker): wait for the line, then it is there once.
  EXPECT_TRUE(wait_for([&] { return logs.count("republished by the stream 'EVIL'") > 0; }));
  EXPECT_EQ(logs.count("republished by the stream 'EVIL'"), 1U) << logs.text();
  // node-b's own message, on its own subject, is taken.
  ASSERT_TRUE(wait_for([&] {
    admin.publish("gpustream.node-b.sim", as_b.encode(make_snapshot("sim", 2)));
    return knows(view, "node-b");
  }));
  EXPECT_NE(view.metrics()().find("gpustream_fleet_messages_refused_total{reason=\"republished\"}"),
            std::string::npos);
}

/// The bucket's entries: the node is the key's. A state naming another node is refused
/// (key_mismatch), a key that is no node name too (bad_key); the good entry is read.
TEST(FleetViewNats, ABucketEntryNamingAnotherNodeThanItsKeyIsRefused) {
  gpustream::test::TempTree store;
  nats::Server server(nats::free_port(), store.path("js"));
  ASSERT_TRUE(server.start());
  LogCapture logs;
  boost::asio::io_context io;
  SnapshotChannel channel(io.get_executor());
  const auto o = view_options(server, "entries");
  {
    FleetView creator(io.get_executor(), channel, o);  // creates the bucket
    creator.start();
    ASSERT_TRUE(creator.wait_for_bucket(nats::kWait));
  }
  Admin admin(server.url());
  ASSERT_TRUE(admin.ok());
  ASSERT_TRUE(admin.put("entries", "node-a", node_state("node-a")));
  ASSERT_TRUE(admin.put("entries", "node-c", node_state("node-c", "node-b")));  // names node-b
  ASSERT_TRUE(admin.put("entries", "not.a.node", node_state("node-d")));
  FleetView view(io.get_executor(), channel, o);
  view.start();
  ASSERT_TRUE(view.wait_for_bucket(nats::kWait));
  std::vector<std::string> names;
  for (const auto& n : view.nodes()) names.push_back(n.name);
  EXPECT_EQ(names, std::vector<std::string>{"node-a"});
  EXPECT_EQ(refused(view, FleetRefusal::key_mismatch), 1U);
  EXPECT_EQ(refused(view, FleetRefusal::bad_key), 1U);
  EXPECT_EQ(refused(view, FleetRefusal::subject_mismatch), 0U);
  EXPECT_TRUE(wait_for([&] {  // counted, then logged on the view's worker
    return logs.count("(key_mismatch): its header names node 'node-b' (a bucket entry") > 0;
  }));
  EXPECT_EQ(logs.count("(key_mismatch): its header names node 'node-b' (a bucket entry"), 1U)
      << logs.text();
}

/// The fleet view's user with only what docs/fleet.md "Permissions" lists: it creates the
/// bucket, reads it (its replies on its own inbox prefix, not `_INBOX.>`) and the bus. With
/// libnats's default `_INBOX` prefix the same user cannot read the bucket.
TEST(FleetViewNats, TheViewNeedsOnlyItsDocumentedPermissions) {
  gpustream::test::TempTree store;
  const auto port = nats::free_port();
  const std::string config = store.file("nats.conf", R"(
authorization {
  users = [
    {user: admin, password: admin}
    {user: fleet, password: fleet, permissions: {
      publish: {allow: ["$JS.API.STREAM.INFO.KV_perm_nodes", "$JS.API.STREAM.CREATE.KV_perm_nodes",
                        "$JS.API.CONSUMER.CREATE.KV_perm_nodes", "$JS.API.CONSUMER.CREATE.KV_perm_nodes.>",
                        "$JS.API.CONSUMER.DELETE.KV_perm_nodes.>", "$JS.FC.KV_perm_nodes.>",
                        "$JS.API.STREAM.NAMES"]}
      subscribe: {allow: ["gpustream.>", "_INBOX_gpustream.fleet.>"]}
    }}
  ]
}
)");
  nats::Server server(port, store.path("js"), config);
  ASSERT_TRUE(server.start());
  const std::string host = "127.0.0.1:" + std::to_string(port);
  LogCapture logs;
  boost::asio::io_context io;
  SnapshotChannel channel(io.get_executor());
  auto o = view_options(server, "perm_nodes");
  o.auth.user = "fleet";
  o.auth.password = "fleet";
  {
    FleetView creator(io.get_executor(), channel, o);
    creator.start();
    ASSERT_TRUE(creator.wait_for_bucket(nats::kWait));
    EXPECT_EQ(creator.stats().kv_created, 1U) << logs.text();
  }
  Admin admin("nats://admin:admin@" + host);
  ASSERT_TRUE(admin.ok());
  ASSERT_TRUE(admin.put("perm_nodes", "node-a", node_state("node-a")));
  {
    FleetView view(io.get_executor(), channel, o);
    view.start();
    ASSERT_TRUE(view.wait_for_bucket(nats::kWait));
    EXPECT_TRUE(knows(view, "node-a")) << logs.text();
    BusEncoder b("node-b", "gpustream/test", {.full_every = 1000});
    std::int64_t t = 1'700'000'000'000'000'000;
    const auto sample = [&] {
      auto s = make_snapshot("sim", 2);
      s.time_unix_ns = t += 1'000'000'000;
      return s;
    };
    ASSERT_TRUE(wait_for([&] {
      admin.publish("gpustream.node-b.sim", b.encode(sample()));
      return knows(view, "node-b");
    }));
    // A full the view missed, fetched from the bucket (a watcher of its key) at its patches.
    b.force_full();
    b.encode(sample());
    const std::int64_t full_time = t;
    ASSERT_TRUE(admin.put("perm_nodes", "node-b", encode_node_state(b.last_fulls())));
    ASSERT_TRUE(wait_for([&] {
      admin.publish("gpustream.node-b.sim", b.encode(sample()));
      return newest_sample(view, "node-b") > full_time;
    })) << logs.text();
    EXPECT_GE(view.stats().kv_base_fetches, 1U);
  }
  EXPECT_EQ(logs.count("Permissions Violation"), 0U) << logs.text();
  // libnats's own prefix: the replies to _INBOX.* are not this user's to read.
  o.auth.inbox_prefix = "_INBOX";
  FleetView plain(io.get_executor(), channel, o);
  plain.start();
  plain.wait_for_bucket(nats::kWait);
  EXPECT_FALSE(knows(plain, "node-a"));
  EXPECT_GE(logs.count("Permissions Violation for Subscription to \"_INBOX."), 1U) << logs.text();
}

/// A view whose user may not create streams: the missing bucket is named once, with what an
/// admin runs; the bus goes on.
TEST(FleetViewNats, AViewNotPermittedToCreateTheBucketSaysWhatTheAdminRuns) {
  gpustream::test::TempTree store;
  const auto port = nats::free_port();
  const std::string config = store.file("nats.conf", R"(
authorization {
  users = [
    {user: admin, password: admin}
    {user: fleet, password: fleet, permissions: {
      publish: {allow: ["$JS.API.STREAM.INFO.KV_denied_nodes"]}
      subscribe: {allow: ["gpustream.>", "_INBOX_gpustream.fleet.>"]}
    }}
  ]
}
)");
  nats::Server server(port, store.path("js"), config);
  ASSERT_TRUE(server.start());
  LogCapture logs;
  boost::asio::io_context io;
  SnapshotChannel channel(io.get_executor());
  auto o = view_options(server, "denied_nodes");
  o.auth.user = "fleet";
  o.auth.password = "fleet";
  o.connect_timeout = std::chrono::milliseconds(500);  // the refused request's wait
  FleetView view(io.get_executor(), channel, o);
  view.start();
  ASSERT_TRUE(view.wait_for_bucket(nats::kWait));
  EXPECT_EQ(view.stats().kv_created, 0U);
  EXPECT_EQ(logs.count("this view cannot create it"), 1U) << logs.text();
  EXPECT_EQ(logs.count("`nats kv add denied_nodes --history 1 --ttl 7200s --storage file "
                       "--replicas 1 --max-bytes 1073741824 --max-value-size 1048576`"),
            1U)
      << logs.text();
  Admin admin("nats://admin:admin@127.0.0.1:" + std::to_string(port));
  ASSERT_TRUE(admin.ok());
  EXPECT_EQ(admin.stream("denied_nodes"), nullptr);
  BusEncoder a("node-a", "gpustream/test");
  ASSERT_TRUE(wait_for([&] {
    admin.publish("gpustream.node-a.sim", a.encode(make_snapshot("sim", 2)));
    return knows(view, "node-a");
  }));
}

/// set_auth(): a new identity is connected on the view's own thread and takes over the bus (the
/// nodes kept, no outage counted); the same identity again is unchanged; one that does not
/// connect leaves the current connection going (counted, said); an inconsistent one is refused.
TEST(FleetViewNats, NewCredentialsTakeOverTheBusAndABadOneKeepsTheOld) {
  gpustream::test::TempTree store;
  const auto port = nats::free_port();
  // `before` may not read the bus; `after` may.
  const std::string config = store.file("nats.conf", R"(
authorization {
  users = [
    {user: before, password: one, permissions: {subscribe: {allow: ["_INBOX_gpustream.fleet.>"]}}}
    {user: after, password: two}
  ]
}
)");
  nats::Server server(port, store.path("js"), config);
  ASSERT_TRUE(server.start());
  LogCapture logs;
  boost::asio::io_context io;
  SnapshotChannel channel(io.get_executor());
  auto o = view_options(server, "");
  o.kv_bucket.clear();
  o.auth.user = "before";
  o.auth.password = "one";
  FleetView view(io.get_executor(), channel, o);
  view.start();
  Admin agent("nats://after:two@127.0.0.1:" + std::to_string(port));
  ASSERT_TRUE(agent.ok());
  BusEncoder a("node-a", "gpustream/test", {.full_every = 1});
  ASSERT_TRUE(wait_for([&] { return logs.count("Permissions Violation for Subscription") > 0; }));
  agent.publish("gpustream.node-a.sim", a.encode(make_snapshot("sim", 2)));
  EXPECT_FALSE(knows(view, "node-a"));  // `before` may not read the bus

  NatsAuth after;
  after.user = "after";
  after.password = "two";
  EXPECT_EQ(view.set_auth(after), NatsAuthChange::reconnecting);
  ASSERT_TRUE(wait_for([&] {
    agent.publish("gpustream.node-a.sim", a.encode(make_snapshot("sim", 2)));
    return knows(view, "node-a");
  })) << logs.text();
  EXPECT_EQ(view.stats().auth_reloads, 1U);
  EXPECT_EQ(view.set_auth(after), NatsAuthChange::unchanged);

  NatsAuth wrong = after;
  wrong.password = "three";
  EXPECT_EQ(view.set_auth(wrong), NatsAuthChange::reconnecting);
  ASSERT_TRUE(wait_for([&] { return view.stats().auth_reload_failures == 1; })) << logs.text();
  EXPECT_EQ(logs.count("the new NATS credentials were not taken"), 1U) << logs.text();
  EXPECT_EQ(logs.count("three"), 0U) << "a secret in the log";
  // The connection of `after` goes on: node-b shows.
  BusEncoder b("node-b", "gpustream/test", {.full_every = 1});
  ASSERT_TRUE(wait_for([&] {
    agent.publish("gpustream.node-b.sim", b.encode(make_snapshot("sim", 2)));
    return knows(view, "node-b");
  }));
  EXPECT_TRUE(view.stats().connected);

  NatsAuth half;
  half.user = "after";  // no password
  std::string error;
  EXPECT_EQ(view.set_auth(half, &error), NatsAuthChange::refused);
  EXPECT_NE(error.find("password"), std::string::npos) << error;
  EXPECT_EQ(view.stats().auth_reloads, 1U);
  EXPECT_EQ(view.stats().outages, 0U);  // moving to a new connection is no outage
  view.stop();
  EXPECT_EQ(view.set_auth(after), NatsAuthChange::refused);
}

}  // namespace
}  // namespace gpustream::transport::test

#endif
