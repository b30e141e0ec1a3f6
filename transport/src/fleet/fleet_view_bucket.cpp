// FleetView's key-value bucket, on its own thread (kv_thread): created when it is missing (at
// start and after each reconnect: a restarted nats-server that held it in memory has none),
// then read through the same per-publisher path as the bus (fleet_view_impl.hpp).
#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "fleet/fleet_view_impl.hpp"
#include "fleet/nats_auth_apply.hpp"

namespace gpustream::transport {

namespace {

/// Messages in one node state at most (decode_node_state's own bound).
constexpr std::size_t kMaxNodeStateMessages = 64;

std::string seconds_text(std::chrono::milliseconds ms) {
  if (ms.count() % 1000 == 0) return std::to_string(ms.count() / 1000) + "s";
  return std::to_string(ms.count()) + "ms";
}

std::string_view storage_name(jsStorageType t) { return t == js_MemoryStorage ? "memory" : "file"; }

}  // namespace

/// At start: the bucket (created if missing), read; then, each time NATS comes back, the same
/// again (the nodes already up are left to the bus); and a new identity (set_auth()) when one
/// is given. Until stop().
void FleetView::Impl::run_bucket() {
  const bool bucket = !options.kv_bucket.empty();
  if (bucket) see_to_bucket(false);
  finish_kv();
  while (true) {
    bool again = false;
    std::optional<NatsAuth> identity;
    std::set<std::pair<std::string, std::string>> bases;
    {
      std::unique_lock lock(kv_mu);
      kv_cv.wait(lock,
                 [this] { return stopping || kv_again || new_auth || !bases_wanted.empty(); });
      if (stopping) return;
      again = std::exchange(kv_again, false);
      identity = std::exchange(new_auth, std::nullopt);
      bases.swap(bases_wanted);
    }
    if (identity) {
      change_identity(*identity);
      again = true;  // another user may see another bucket (or be allowed to create it)
    }
    if (again && bucket) see_to_bucket(true);
    if (!bases.empty() && bucket) fetch_bases(bases);
  }
}

/// On the worker: `probe`'s stream of `node` got a delta of a full this view never got (sent
/// while it was disconnected, or dropped as a slow consumer). Without help it waits for the
/// agent's next full (up to full_every messages); but the agent puts its last fulls in the
/// bucket after each full (and at once after it reconnects), so kv_thread fetches the node's
/// state from there. Each stream at most once a reconnect_wait (a publisher sending deltas of
/// unknown bases costs at most that one read of its own key); at most kMaxBasesWanted waiting.
void FleetView::Impl::want_base(const std::string& node, const std::string& probe) {
  if (options.kv_bucket.empty()) return;
  const auto now = std::chrono::steady_clock::now();
  const auto key = std::make_pair(node, probe);
  std::lock_guard lock(kv_mu);
  if (stopping || bases_wanted.size() >= kMaxBasesWanted) return;
  if (bases_fetched.size() >= kMaxBasesWanted)  // the old ones go: at most one interval's worth
    std::erase_if(bases_fetched,
                  [&](const auto& e) { return now - e.second >= options.reconnect_wait; });
  if (bases_fetched.size() >= kMaxBasesWanted) return;
  const auto [it, fresh] = bases_fetched.try_emplace(key, now);
  if (!fresh) {
    if (now - it->second < options.reconnect_wait) return;
    it->second = now;
  }
  bases_wanted.insert(key);
  kv_cv.notify_all();
}

/// On kv_thread: the state of each node in `wanted` read from the bucket, only the messages of
/// the streams that wait for their base taken (the others' fulls, which this view has, would be
/// dropped as old), through the same per-publisher path as the bus. Read with a watcher of that
/// one key (its last value, then the end of the initial values), not kvStore_Get: the view's
/// documented NATS permissions are the watcher's (docs/fleet.md), a get would need $JS.API.
/// DIRECT.GET as well, and without it each fetch would wait connect_timeout for no answer.
void FleetView::Impl::fetch_bases(const std::set<std::pair<std::string, std::string>>& wanted) {
  if (!connected()) return;  // the next delta of each asks again (after a reconnect_wait)
  jsCtx* js = nullptr;
  jsOptions jo;
  jsOptions_Init(&jo);
  jo.Wait = options.connect_timeout.count();
  kvStore* kv = nullptr;
  if (natsConnection_JetStream(&js, nc, &jo) == NATS_OK &&
      js_KeyValue(&kv, js, options.kv_bucket.c_str()) == NATS_OK) {
    for (auto it = wanted.begin(); it != wanted.end() && !stopping;) {
      const std::string node = it->first;
      std::set<std::string> probes;
      for (; it != wanted.end() && it->first == node; ++it) probes.insert(it->second);
      if (node_name_error(node)) continue;  // not a key (a subject token is one: not reached)
      kvWatchOptions wo;
      kvWatchOptions_Init(&wo);
      wo.IgnoreDeletes = true;
      kvWatcher* w = nullptr;
      if (kvStore_Watch(&w, kv, node.c_str(), &wo) != NATS_OK) continue;
      {
        std::lock_guard lock(kv_mu);
        watcher = w;
        if (stopping) kvWatcher_Stop(w);
      }
      kvEntry* e = nullptr;
      // None (yet: the agent has not put it since the bucket came back): its next patch asks
      // again after a reconnect_wait.
      if (kvWatcher_Next(&e, w, options.connect_timeout.count()) == NATS_OK && e) {
        const std::string_view value(static_cast<const char*>(kvEntry_Value(e)),
                                     static_cast<std::size_t>(kvEntry_ValueLen(e)));
        ++kv_base_fetches;
        load_node_state(node, value, kvEntry_Created(e), clock(), wall_now_ns(), false, &probes);
        kvEntry_Destroy(e);
      }
      {
        std::lock_guard lock(kv_mu);
        watcher = nullptr;
      }
      kvWatcher_Stop(w);
      kvWatcher_Destroy(w);
    }
  }
  if (kv) kvStore_Destroy(kv);
  if (js) jsCtx_Destroy(js);
}

std::string FleetView::Impl::admin_command() const {
  const auto ttl = options.kv_ttl.count() > 0 ? options.kv_ttl : options.gone_after;
  return fmt::format(
      "nats kv add {} --history 1 --ttl {} --storage {} --replicas {} --max-bytes {} "
      "--max-value-size {}",
      options.kv_bucket, seconds_text(ttl), to_string(options.kv_storage), options.kv_replicas,
      options.kv_max_bytes, options.limits.max_message_bytes);
}

/// A problem with the bucket, logged when it is not the one logged last (once, not once per
/// reconnect).
void FleetView::Impl::bucket_problem(const std::string& text) {
  if (stopping || text == kv_problem_logged) return;
  kv_problem_logged = text;
  logger()->warn("fleet: {}", text);
}

/// The bucket bound, created first when it is missing and kv_create; nullptr (said why, once)
/// when there is none to read.
kvStore* FleetView::Impl::bind_bucket(jsCtx* js) {
  kvStore* kv = nullptr;
  natsStatus s = js_KeyValue(&kv, js, options.kv_bucket.c_str());
  if (s == NATS_OK) {
    check_bucket_config(js);
    kv_problem_logged.clear();
    return kv;
  }
  if (s != NATS_NOT_FOUND) {
    bucket_problem(fmt::format(
        "cannot read the key-value bucket '{}': {} (does the server run with JetStream, -js, and "
        "may this user call $JS.API.STREAM.INFO.KV_{}? docs/fleet.md \"The fleet view's NATS "
        "permissions\"): nodes "
        "show as they publish",
        options.kv_bucket, nats_status_text(s), options.kv_bucket));
    return nullptr;
  }
  if (!options.kv_create) {
    bucket_problem(fmt::format(
        "there is no key-value bucket '{}' and --kv-create is off: the agents cannot keep their "
        "state (a new view shows a node only once it publishes); an admin creates it with `{}` "
        "(docs/fleet.md \"The bucket\")",
        options.kv_bucket, admin_command()));
    return nullptr;
  }
  const auto ttl = options.kv_ttl.count() > 0 ? options.kv_ttl : options.gone_after;
  kvConfig cfg;
  kvConfig_Init(&cfg);
  cfg.Bucket = options.kv_bucket.c_str();
  cfg.Description = "gpustream: the last full state of each node (docs/fleet.md)";
  cfg.History = 1;
  cfg.TTL = std::chrono::nanoseconds(ttl).count();  // libnats 3.4: the stream's max_age, in ns
  cfg.StorageType = options.kv_storage == KvStorage::memory ? js_MemoryStorage : js_FileStorage;
  cfg.Replicas = options.kv_replicas;
  cfg.MaxBytes = options.kv_max_bytes;
  cfg.MaxValueSize = static_cast<int32_t>(
      std::min<std::size_t>(options.limits.max_message_bytes, std::numeric_limits<int32_t>::max()));
  s = js_CreateKeyValue(&kv, js, &cfg);
  if (s == NATS_OK) {
    ++kv_created;
    kv_problem_logged.clear();
    logger()->warn(
        "fleet: created the key-value bucket '{}' ({} storage, {} replica(s), entries live {}, "
        "at most {} bytes) (gpustream_fleet_kv_created_total)",
        options.kv_bucket, to_string(options.kv_storage), options.kv_replicas, seconds_text(ttl),
        options.kv_max_bytes);
    return kv;
  }
  const std::string why = nats_status_text(s);
  // Created by someone else meanwhile (another view, an agent of an older version): used as is.
  kv = nullptr;
  if (js_KeyValue(&kv, js, options.kv_bucket.c_str()) == NATS_OK) {
    check_bucket_config(js);
    kv_problem_logged.clear();
    return kv;
  }
  bucket_problem(fmt::format(
      "there is no key-value bucket '{}' and this view cannot create it: {} (is it permitted "
      "$JS.API.STREAM.CREATE.KV_{}?); an admin creates it with `{}` (docs/fleet.md \"The "
      "bucket\"); until then a new view shows a node only once it publishes",
      options.kv_bucket, why, options.kv_bucket, admin_command()));
  return nullptr;
}

/// One warning naming how the existing bucket's stream differs from the view's settings (it is
/// used as it is), again only when the difference changes.
void FleetView::Impl::check_bucket_config(jsCtx* js) {
  jsStreamInfo* si = nullptr;
  jsErrCode jerr = static_cast<jsErrCode>(0);
  const std::string stream = "KV_" + options.kv_bucket;
  if (js_GetStreamInfo(&si, js, stream.c_str(), nullptr, &jerr) != NATS_OK || !si || !si->Config) {
    if (si) jsStreamInfo_Destroy(si);
    return;
  }
  const jsStreamConfig& c = *si->Config;
  const auto ttl = options.kv_ttl.count() > 0 ? options.kv_ttl : options.gone_after;
  const auto want_storage =
      options.kv_storage == KvStorage::memory ? js_MemoryStorage : js_FileStorage;
  std::string diff;
  const auto add = [&diff](const std::string& d) { diff += (diff.empty() ? "" : "; ") + d; };
  if (c.Storage != want_storage)
    add(fmt::format("storage {} (--kv-storage {})", storage_name(c.Storage),
                    to_string(options.kv_storage)));
  if (c.Replicas != options.kv_replicas)
    add(fmt::format("{} replica(s) (--kv-replicas {})", c.Replicas, options.kv_replicas));
  const auto max_age =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::nanoseconds(c.MaxAge));
  if (max_age != ttl)
    add(fmt::format("entries live {} (--kv-ttl {})",
                    c.MaxAge == 0 ? std::string("for ever") : seconds_text(max_age),
                    seconds_text(ttl)));
  if (c.MaxMsgsPerSubject != 1)
    add(fmt::format("a history of {} per key (gpustream keeps 1)", c.MaxMsgsPerSubject));
  if (c.RePublish && c.RePublish->Destination)
    add(fmt::format(
        "a republish rule to '{}' (such messages are refused by the view: reason republished)",
        std::string_view(c.RePublish->Destination).substr(0, 200)));
  jsStreamInfo_Destroy(si);
  if (diff.empty() || diff == kv_config_logged || stopping) return;
  kv_config_logged = diff;
  logger()->warn("fleet: the key-value bucket '{}' exists with another config, used as it is: {}",
                 options.kv_bucket, diff);
}

/// One node's state from the bucket: its messages go through the same per-publisher path as
/// the bus's (admission, budget, queue), heard when it was written (libnats gives nanoseconds
/// since the epoch; a coarser unit is scaled, and an unknown time counts as now). False when
/// it is unreadable (counted, logged once). `again` (a read after a reconnect): a node that is
/// up is left to the bus (its state in the bucket is no newer than what the view has).
/// `only_probes` (a fetch for missed bases): only the messages of those streams are taken.
bool FleetView::Impl::load_node_state(std::string_view key, std::string_view value,
                                      std::int64_t written_ns, Clock::time_point now,
                                      std::int64_t now_ns, bool again,
                                      const std::set<std::string>* only_probes) {
  while (written_ns > 0 && written_ns < 100'000'000'000'000'000) written_ns *= 1000;
  if (written_ns <= 0 || written_ns > now_ns) written_ns = now_ns;
  const auto age = std::chrono::nanoseconds(std::max<std::int64_t>(0, now_ns - written_ns));
  if (node_name_error(key)) {
    refuse(FleetRefusal::bad_key, "?", [&] {
      return fmt::format("the bucket's key '{}' is not a node name", key.substr(0, 64));
    });
    return false;
  }
  if (again) {
    std::lock_guard lock(mu);
    if (table.state(key) == NodeState::up) return true;
  }
  try {
    // A node state is at most 64 messages of at most limits.max_message_bytes each.
    if (value.size() > kMaxNodeStateMessages * (options.limits.max_message_bytes + 32))
      throw BusError("a node state over the size limit");
    auto mark = std::make_shared<bool>(false);
    for (const auto msg : decode_node_state(value, options.limits)) {
      if (only_probes && !only_probes->contains(parse_bus_header(msg, options.limits).probe))
        continue;
      if (!intake.wait_for_room()) return false;  // stopped
      IntakeItem item;
      item.node = std::string(key);
      item.heard = now - std::chrono::duration_cast<Clock::duration>(age);
      item.heard_unix_ns = written_ns;
      item.kv_key = mark;
      ++messages;
      bytes += msg.size();
      admit(msg, std::move(item));
    }
    return true;
  } catch (const std::exception& ex) {
    refuse(FleetRefusal::malformed, key,
           [&] { return fmt::format("its state in the bucket is unreadable: {}", ex.what()); });
    return false;
  }
}

/// The bucket in one pass: a watcher on every key delivers the last value of each, then a
/// null entry that marks the end of the initial values. Bounded: at most max_nodes entries
/// (each bounded in bytes by load_node_state); stops when nothing arrives for
/// connect_timeout, or at stop().
void FleetView::Impl::load_kv_watch(kvStore* kv, bool again) {
  kvWatchOptions wo;
  kvWatchOptions_Init(&wo);
  wo.IgnoreDeletes = true;  // a deleted or purged key is no node
  wo.Timeout = options.connect_timeout.count();
  kvWatcher* w = nullptr;
  natsStatus s = kvStore_WatchAll(&w, kv, &wo);
  if (s != NATS_OK) {
    if (!stopping)
      logger()->warn("fleet: cannot watch the bucket '{}': {}", options.kv_bucket,
                     nats_status_text(s));
    return;
  }
  {
    std::lock_guard lock(kv_mu);
    watcher = w;
    if (stopping) kvWatcher_Stop(w);
  }
  std::uint64_t seen = 0;
  while (!stopping) {
    kvEntry* e = nullptr;
    s = kvWatcher_Next(&e, w, options.connect_timeout.count());
    if (s != NATS_OK) {
      if (!stopping)
        logger()->warn("fleet: the bucket '{}' was read only in part ({} keys): {}",
                       options.kv_bucket, seen, nats_status_text(s));
      break;
    }
    if (!e) break;  // the end of the initial values
    if (seen == options.max_nodes) {
      kvEntry_Destroy(e);
      logger()->warn(
          "fleet: the bucket '{}' holds more than {} nodes (--max-nodes); the rest "
          "show as they publish",
          options.kv_bucket, options.max_nodes);
      break;
    }
    ++seen;
    const std::string_view value(static_cast<const char*>(kvEntry_Value(e)),
                                 static_cast<std::size_t>(kvEntry_ValueLen(e)));
    load_node_state(kvEntry_Key(e), value, kvEntry_Created(e), clock(), wall_now_ns(), again);
    kvEntry_Destroy(e);
  }
  std::lock_guard lock(kv_mu);
  watcher = nullptr;
  kvWatcher_Stop(w);
  kvWatcher_Destroy(w);
}

/// The bucket key by key (kvStore_Keys, then one kvStore_Get per key: a round trip each).
void FleetView::Impl::load_kv_key_by_key(kvStore* kv, bool again) {
  kvKeysList keys{};
  kvWatchOptions wo;
  kvWatchOptions_Init(&wo);
  wo.Timeout = options.connect_timeout.count();
  const natsStatus s = kvStore_Keys(&keys, kv, &wo);
  if (s != NATS_OK) {
    if (s != NATS_NOT_FOUND)
      logger()->warn("fleet: cannot list the bucket '{}': {}", options.kv_bucket,
                     nats_status_text(s));
    return;
  }
  const int count = std::min<int>(
      keys.Count, static_cast<int>(std::min<std::size_t>(options.max_nodes, INT32_MAX)));
  for (int i = 0; i < count && !stopping; ++i) {
    kvEntry* e = nullptr;
    if (kvStore_Get(&e, kv, keys.Keys[i]) != NATS_OK) continue;
    const std::string_view value(static_cast<const char*>(kvEntry_Value(e)),
                                 static_cast<std::size_t>(kvEntry_ValueLen(e)));
    load_node_state(keys.Keys[i], value, kvEntry_Created(e), clock(), wall_now_ns(), again);
    kvEntry_Destroy(e);
  }
  kvKeysList_Destroy(&keys);
}

/// The bucket bound (or created), then read; `again`: after a reconnect.
void FleetView::Impl::see_to_bucket(bool again) {
  jsCtx* js = nullptr;
  jsOptions jo;
  jsOptions_Init(&jo);
  jo.Wait = options.connect_timeout.count();
  natsStatus s = natsConnection_JetStream(&js, nc, &jo);
  kvStore* kv = s == NATS_OK ? bind_bucket(js) : nullptr;
  if (kv && !stopping) {
    if (again) ++kv_rereads;
    if (options.kv_watch)
      load_kv_watch(kv, again);
    else
      load_kv_key_by_key(kv, again);
  }
  if (kv) kvStore_Destroy(kv);
  if (js) jsCtx_Destroy(js);
}

void FleetView::Impl::finish_kv() {
  {
    std::lock_guard lock(mu);
    kv_done = true;
    st.kv_done = true;
  }
  idle_cv.notify_all();
  report_bucket();
}

bool FleetView::Impl::wait_for_bucket(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu);
  return idle_cv.wait_for(lock, timeout, [this] { return kv_done && intake.pending() == 0; });
}

}  // namespace gpustream::transport
