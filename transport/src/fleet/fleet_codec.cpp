// The compact bus encoding: header line, JSON diff against the last full, raw deflate.
#include "gpustream/transport/fleet_codec.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>
#include <memory>
#include <new>
#include <random>
#include <stdexcept>
#include <vector>

#include <boost/json.hpp>

#include "fleet/bus_deflate.hpp"
#include "gpustream/detail/json_patch.hpp"
#include "gpustream/json.hpp"
#include "gpustream/transport/protocol.hpp"

namespace gpustream::transport {
namespace json = boost::json;

namespace {

constexpr std::size_t kMaxNodeName = 64;
constexpr std::size_t kMaxHeaderBytes = 512;

bool token_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-';
}

std::string token_of(std::string_view s) {
  if (s.empty()) return "_";
  std::string out(s.substr(0, kMaxNodeName));
  for (auto& c : out)
    if (!token_char(c)) c = '_';
  return out;
}

std::uint64_t random_epoch() {
  std::random_device rd;
  const std::uint64_t e = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  return e == 0 ? 1 : e;
}

/// Inflates `in`, expecting exactly `expected` bytes (<= the limits, the inflation ratio's
/// included: parse_bus_header checked) into `out`, a buffer of exactly `expected` bytes: a stream
/// that goes on past them is stopped there, so a bomb costs one pass over `expected` bytes.
/// libdeflate's whole-buffer decompressor (fleet/bus_deflate.hpp), the thread's own, reused.
std::string_view inflate_exact(std::string_view in, std::size_t expected, std::string& out) {
  switch (bus_inflate_exact(in, expected, out)) {
    case BusInflateResult::ok:
      return out;
    case BusInflateResult::past:
      throw BusError(
          "bus message: the body inflates past the declared " + std::to_string(expected) + " bytes",
          BusRefusal::inflation);
    case BusInflateResult::bad_data:
      throw BusError("bus message: bad deflate body: not a valid raw deflate stream");
    case BusInflateResult::short_body:
      break;
  }
  throw BusError("bus message: the body does not inflate to the declared " +
                 std::to_string(expected) + " bytes");
}

std::uint64_t parse_u64(std::string_view s, const char* what) {
  std::uint64_t v = 0;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || r.ec != std::errc() || r.ptr != s.data() + s.size())
    throw BusError(std::string("bus message: bad ") + what);
  return v;
}

std::uint64_t parse_hex(std::string_view s) {
  std::uint64_t v = 0;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v, 16);
  if (s.empty() || r.ec != std::errc() || r.ptr != s.data() + s.size())
    throw BusError("bus message: bad epoch");
  return v;
}

void append_header(std::string& out, const BusHeader& h) {
  out += kBusMagic;
  out += h.full ? " f " : " d ";
  out += h.compressed ? "z " : "p ";
  out += h.node;
  out += ' ';
  out += h.probe;
  out += ' ';
  char hex[17];
  const auto r = std::to_chars(hex, hex + sizeof(hex), h.epoch, 16);
  out.append(hex, r.ptr);
  for (const std::uint64_t v : {h.seq, h.base, static_cast<std::uint64_t>(h.body_bytes)}) {
    out += ' ';
    out += std::to_string(v);
  }
  out += ' ';
  out += h.agent;
  out += '\n';
}

json::value parse_body(std::string_view text, json::storage_ptr sp) {
  try {
    return parse_json(text, std::move(sp));
  } catch (const JsonError& e) {
    throw BusError(std::string("bus message: body: ") + e.what());
  }
}

}  // namespace

std::optional<std::string> node_name_error(std::string_view name) {
  if (name.empty()) return "a node name cannot be empty";
  if (name.size() > kMaxNodeName)
    return "a node name has at most " + std::to_string(kMaxNodeName) + " characters";
  for (const char c : name)
    if (!token_char(c))
      return "a node name is made of letters, digits, '_' and '-' (a NATS subject token): '" +
             std::string(name) + "'";
  return std::nullopt;
}

std::string default_node_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "unknown";
  return token_of(name);
}

BusHeader parse_bus_header(std::string_view message, const BusLimits& limits) {
  if (message.size() > limits.max_message_bytes)
    throw BusError("bus message: " + std::to_string(message.size()) + " bytes, more than the " +
                       std::to_string(limits.max_message_bytes) + " allowed",
                   BusRefusal::too_large);
  const auto eol = message.substr(0, kMaxHeaderBytes).find('\n');
  if (eol == std::string_view::npos) throw BusError("bus message: no header line");
  std::string_view line = message.substr(0, eol);
  std::vector<std::string_view> f;
  while (!line.empty() && f.size() < 11) {
    const auto sp = line.find(' ');
    f.push_back(line.substr(0, sp));
    line = sp == std::string_view::npos ? std::string_view{} : line.substr(sp + 1);
  }
  if (f.size() != 10 || !line.empty() || f[0] != kBusMagic)
    throw BusError("bus message: not a " + std::string(kBusMagic) + " header");
  BusHeader h;
  if (f[1] != "f" && f[1] != "d") throw BusError("bus message: bad kind");
  if (f[2] != "z" && f[2] != "p") throw BusError("bus message: bad body form");
  h.full = f[1] == "f";
  h.compressed = f[2] == "z";
  if (auto err = node_name_error(f[3])) throw BusError("bus message: " + *err);
  if (node_name_error(f[4])) throw BusError("bus message: bad probe token");
  h.node = std::string(f[3]);
  h.probe = std::string(f[4]);
  h.epoch = parse_hex(f[5]);
  h.seq = parse_u64(f[6], "seq");
  h.base = parse_u64(f[7], "base");
  h.body_bytes = parse_u64(f[8], "body size");
  if (f[9].empty() || f[9].size() > 64) throw BusError("bus message: bad agent");
  h.agent = std::string(f[9]);
  if (h.body_bytes > limits.max_body_bytes)
    throw BusError("bus message: a body of " + std::to_string(h.body_bytes) +
                       " bytes, more than the " + std::to_string(limits.max_body_bytes) +
                       " allowed",
                   BusRefusal::too_large);
  if (h.compressed) {
    const std::size_t packed = message.size() - eol - 1;
    const std::size_t bound =
        limits.max_inflation_ratio != 0 && packed > SIZE_MAX / limits.max_inflation_ratio
            ? SIZE_MAX
            : packed * limits.max_inflation_ratio;
    if (h.body_bytes > bound)
      throw BusError("bus message: a body of " + std::to_string(packed) +
                         " compressed bytes declared to inflate to " +
                         std::to_string(h.body_bytes) + ", more than " +
                         std::to_string(limits.max_inflation_ratio) + " times as many",
                     BusRefusal::inflation);
  }
  if (h.full ? h.base != h.seq : h.base >= h.seq) throw BusError("bus message: bad base");
  return h;
}

// ---- diff and patch ----

std::optional<json::value> json_diff(const json::value& from, const json::value& to) {
  if (from == to) return std::nullopt;
  if (from.is_object() && to.is_object()) {
    json::object p;
    const auto& a = from.get_object();
    const auto& b = to.get_object();
    for (const auto& kv : b) {
      const auto* old = a.if_contains(kv.key());
      if (!old) {
        p[kv.key()] = json::array{kv.value()};
      } else if (auto d = json_diff(*old, kv.value())) {
        p[kv.key()] = std::move(*d);
      }
    }
    for (const auto& kv : a)
      if (!b.contains(kv.key())) p[kv.key()] = nullptr;
    return json::value(std::move(p));
  }
  if (from.is_array() && to.is_array() && from.get_array().size() == to.get_array().size()) {
    json::object p;
    const auto& a = from.get_array();
    const auto& b = to.get_array();
    for (std::size_t i = 0; i < a.size(); ++i)
      if (auto d = json_diff(a[i], b[i])) p[std::to_string(i)] = std::move(*d);
    return json::value(std::move(p));
  }
  return json::value(json::array{to});
}

namespace {

/// What an in-place patch changed, to undo it: the old value of each replaced slot, each key
/// inserted, each key removed with its value. Undone in reverse order, each entry finds the
/// document as it was right after it was made. Pointers stay valid because a patch changes an
/// object's keys (which may move its members) before it replaces or descends into any of them,
/// and a container's own address only moves when its parent's keys change.
class PatchUndo {
 public:
  PatchUndo() = default;
  PatchUndo(const PatchUndo&) = delete;
  PatchUndo& operator=(const PatchUndo&) = delete;
  ~PatchUndo() { undo(); }

  // The old values are move-constructed: they keep the document's storage, so moving them out
  // and back is a pointer move (an assignment between storages would copy).
  void replaced(json::value& slot) {
    room();
    log_.push_back({Kind::replaced, &slot, nullptr, {}, json::value(std::move(slot))});
  }
  void inserted(json::object& parent, std::string_view key) {
    room();
    log_.push_back({Kind::inserted, nullptr, &parent, std::string(key), {}});
  }
  /// Records then removes `key` (present) from `parent`.
  void erase(json::object& parent, json::object::iterator at) {
    room();
    log_.push_back({Kind::erased, nullptr, &parent, std::string(at->key()),
                    json::value(std::move(at->value()))});
    parent.stable_erase(at);
  }
  /// Restores the document (equal as a value; a removed key comes back last). False if that
  /// failed (out of memory re-inserting a key): the document is then not the base any more.
  bool undo() noexcept {
    bool ok = true;
    for (; !log_.empty(); log_.pop_back()) {
      auto& e = log_.back();
      try {
        switch (e.kind) {
          case Kind::replaced:
            *e.slot = std::move(e.old);
            break;
          case Kind::inserted:
            e.parent->erase(e.key);
            break;
          case Kind::erased:
            e.parent->emplace(e.key, std::move(e.old));
            break;
        }
      } catch (...) {
        ok = false;
      }
    }
    return ok;
  }

 private:
  /// Room for one more entry first: a push_back that fails after moving the old value out would
  /// lose it (the braced entry is built before the vector grows).
  void room() {
    if (log_.size() == log_.capacity()) log_.reserve(2 * log_.size() + 8);
  }
  enum class Kind { replaced, inserted, erased };
  struct Entry {
    Kind kind;
    json::value* slot;
    json::object* parent;
    std::string key;
    json::value old;
  };
  std::vector<Entry> log_;
};

void apply_one(json::value& target, const json::value& patch, PatchUndo* undo);

const json::value& replacement(const json::value& p) {
  if (p.get_array().size() != 1) throw BusError("bus patch: a replacement holds one value");
  return p.get_array()[0];
}

void replace(json::value& slot, const json::value& with, PatchUndo* undo) {
  if (undo) undo->replaced(slot);
  slot = with;
}

void apply_entry(json::value& slot, const json::value& p, PatchUndo* undo) {
  if (p.is_array()) {
    replace(slot, replacement(p), undo);
  } else if (p.is_object()) {
    apply_one(slot, p, undo);
  } else {
    throw BusError("bus patch: expected [value], null or an object");
  }
}

void apply_object(json::object& o, const json::object& p, PatchUndo* undo) {
  // Keys removed and added first: they may move the object's members, so nothing may point into
  // it yet. Then replacements and nested patches of the keys present.
  std::vector<bool> added(p.size(), false);
  std::size_t n = 0;
  for (const auto& kv : p) {
    const std::size_t i = n++;
    if (kv.value().is_null()) {
      const auto at = o.find(kv.key());
      if (at == o.end()) continue;
      if (undo)
        undo->erase(o, at);
      else
        o.stable_erase(at);
    } else if (kv.value().is_array() && !o.contains(kv.key())) {
      const json::value& v = replacement(kv.value());
      if (undo) undo->inserted(o, kv.key());  // first: undoing an insertion that failed is a no-op
      o.emplace(kv.key(), v);
      added[i] = true;
    }
  }
  n = 0;
  for (const auto& kv : p) {
    const std::size_t i = n++;
    if (added[i] || kv.value().is_null()) continue;
    auto* slot = o.if_contains(kv.key());
    if (!slot && !kv.value().is_array())
      throw BusError("bus patch: no key '" + std::string(kv.key()) + "' to patch");
    if (!slot) throw BusError("bus patch: a key both removed and replaced");
    apply_entry(*slot, kv.value(), undo);
  }
}

void apply_one(json::value& target, const json::value& patch, PatchUndo* undo) {
  const auto& p = patch.get_object();
  if (auto* o = target.if_object()) {
    apply_object(*o, p, undo);
  } else if (auto* a = target.if_array()) {
    for (const auto& kv : p) {
      std::size_t i = 0;
      const auto k = kv.key();
      const auto r = std::from_chars(k.data(), k.data() + k.size(), i);
      if (k.empty() || r.ec != std::errc() || r.ptr != k.data() + k.size() || i >= a->size())
        throw BusError("bus patch: bad array index '" + std::string(k) + "'");
      apply_entry((*a)[i], kv.value(), undo);
    }
  } else {
    throw BusError("bus patch: patches a scalar");
  }
}

/// Refuses a snapshot document with more devices or processes than `l` allows (before it is
/// converted: O(devices)).
void check_counts(const json::value& doc, const BusLimits& l) {
  const auto* o = doc.if_object();
  if (!o) return;  // the conversion says what is wrong
  std::size_t processes = 0;
  auto count = [&processes](const json::value& owner) {
    if (const auto* ow = owner.if_object())
      if (const auto* p = ow->if_contains("processes"); p && p->is_array())
        processes += p->get_array().size();
  };
  if (const auto* d = o->if_contains("devices"); d && d->is_array()) {
    const auto& devices = d->get_array();
    if (devices.size() > l.max_devices)
      throw BusError("bus message: a snapshot of " + std::to_string(devices.size()) +
                         " devices, more than the " + std::to_string(l.max_devices) + " allowed",
                     BusRefusal::too_many_devices);
    for (const auto& dev : devices) count(dev);
  }
  if (const auto* h = o->if_contains("host")) count(*h);
  if (processes > l.max_processes)
    throw BusError("bus message: a snapshot of " + std::to_string(processes) +
                       " processes, more than the " + std::to_string(l.max_processes) + " allowed",
                   BusRefusal::too_many_devices);
}

/// check_counts for a snapshot (a delta patched onto a kept snapshot).
void check_snapshot_counts(const GpuSnapshot& s, const BusLimits& l) {
  if (s.devices.size() > l.max_devices)
    throw BusError("bus message: a snapshot of " + std::to_string(s.devices.size()) +
                       " devices, more than the " + std::to_string(l.max_devices) + " allowed",
                   BusRefusal::too_many_devices);
  std::size_t processes = s.host ? s.host->processes.size() : 0;
  for (const auto& d : s.devices) processes += d.processes.size();
  if (processes > l.max_processes)
    throw BusError("bus message: a snapshot of " + std::to_string(processes) +
                       " processes, more than the " + std::to_string(l.max_processes) + " allowed",
                   BusRefusal::too_many_devices);
}

/// A patch that replaces the device list with more devices than allowed is refused before
/// they are read (as check_counts refuses a full's before it is converted).
void check_patch_devices(const json::object& patch, const BusLimits& l) {
  const auto* d = patch.if_contains("devices");
  if (!d || !d->is_array() || d->get_array().size() != 1) return;
  if (const auto* list = d->get_array()[0].if_array(); list && list->size() > l.max_devices)
    throw BusError("bus message: a snapshot of " + std::to_string(list->size()) +
                       " devices, more than the " + std::to_string(l.max_devices) + " allowed",
                   BusRefusal::too_many_devices);
}

/// Whether `s` written out is `text`, byte for byte: then a patch made against `text`'s
/// document applies to `s` itself (gpustream/detail/json_patch.hpp).
bool writes_as(const GpuSnapshot& s, std::string_view text) {
  thread_local std::string written;
  written.clear();
  append_json(written, s);
  const bool same = written == text;
  if (written.capacity() > (std::size_t{1} << 20)) std::string().swap(written);
  return same;
}

}  // namespace

void json_patch(json::value& doc, const json::value& patch) {
  if (!patch.is_object()) throw BusError("bus patch: expected an object");
  apply_one(doc, patch, nullptr);
}

// ---- encoder ----

BusEncoder::BusEncoder(std::string node, std::string agent, BusEncoderOptions options)
    : node_(std::move(node)),
      agent_(agent.empty() ? std::string(kServerName) : std::move(agent)),
      options_(options),
      epoch_(random_epoch()) {
  if (auto err = node_name_error(node_)) throw std::invalid_argument(*err);
  // The agent field is one header token: keep "gpustream/0.1.0" readable, nothing else.
  if (agent_.size() > 64) agent_.resize(64);
  for (auto& c : agent_)
    if (!token_char(c) && c != '/' && c != '.' && c != '+') c = '_';
  options_.full_every = std::max<std::uint32_t>(options_.full_every, 1);
  options_.level = std::clamp(options_.level, 1, 9);
}

const std::string& BusEncoder::encode(const GpuSnapshot& s) {
  GpuSnapshot copy_node;  // only when the node must change (rare: the caller usually sets it)
  const GpuSnapshot* snap = &s;
  if (s.node != node_) {
    copy_node = s;
    copy_node.node = node_;
    snap = &copy_node;
  }
  const std::string probe = token_of(snap->probe);
  auto& st = streams_[probe];
  body_.clear();
  append_json(body_, *snap);
  ++st.seq;
  BusHeader h;
  h.node = node_;
  h.probe = probe;
  h.epoch = epoch_;
  h.seq = st.seq;
  h.agent = agent_;
  h.compressed = options_.compress;
  const bool full = st.base == 0 || (st.seq - st.base) >= options_.full_every;
  json::value doc = parse_json(body_);
  if (full) {
    h.full = true;
    h.base = st.seq;
    st.base = st.seq;
    st.base_doc = std::move(doc);
  } else {
    h.base = st.base;
    auto d = json_diff(st.base_doc, doc);
    body_ = d ? json::serialize(*d) : std::string("{}");
  }
  h.body_bytes = body_.size();
  if (options_.compress) {
    packed_.clear();
    bus_deflate_into(packed_, body_, options_.level);
    // A body that deflates past the decoders' inflation ratio would be refused: it goes plain.
    const std::size_t ratio = std::max<std::size_t>(options_.max_inflation_ratio, 1);
    h.compressed = packed_.size() >= (body_.size() + ratio - 1) / ratio;
  }
  out_.clear();
  append_header(out_, h);
  out_ += h.compressed ? packed_ : body_;
  last_full_ = full;
  if (full) fulls_[probe] = out_;
  return out_;
}

// ---- decoder ----

namespace {

constexpr std::size_t kScratchBlock = 256 * 1024;  // the scratch arena's first block, kept
constexpr std::size_t kScratchNext = 64 * 1024;    // its later blocks (freed at each reset)
constexpr std::size_t kArenaMinNext = 1024;        // a base arena's later blocks, at least

}  // namespace

namespace detail {

/// A bump allocator for JSON documents: blocks from the heap, handed out in order, freed all at
/// once (deallocate is a no-op). `count` (may be null) is charged every block's bytes while the
/// arena holds it, so the decoder's byte bound is exact: the base documents' arenas charge the
/// stream's count; the scratch arena none (it is the decoder's, reset after each message).
class BusArena final : public json::memory_resource {
 public:
  BusArena(std::shared_ptr<std::size_t> count, std::size_t first, std::size_t next)
      : count_(std::move(count)), first_(first), next_(next) {}
  BusArena(const BusArena&) = delete;
  BusArena& operator=(const BusArena&) = delete;
  ~BusArena() override {
    free_after(nullptr);
    head_ = cur_ = nullptr;
  }
  /// Bytes handed out (alignment included) since the last reset.
  std::size_t used() const noexcept { return used_; }
  /// Forgets what was handed out (the values in it must be gone) and frees every block but the
  /// first.
  void reset() noexcept {
    if (!head_) return;
    free_after(head_);
    cur_ = head_;
    pos_ = sizeof(Block);
    used_ = 0;
  }

 private:
  struct alignas(std::max_align_t) Block {
    Block* next = nullptr;
    std::size_t size = 0;
  };
  void* do_allocate(std::size_t n, std::size_t align) override {
    std::size_t at = 0;  // the offset in cur_ where it goes
    const auto fits = [&] {
      if (!cur_) return false;
      const auto addr = reinterpret_cast<std::uintptr_t>(cur_) + pos_;
      at = pos_ + (align - addr % align) % align;
      return at <= cur_->size && n <= cur_->size - at;
    };
    if (!fits()) {
      grow(n + align);
      if (!fits()) throw std::bad_alloc();
    }
    used_ += at + n - pos_;
    pos_ = at + n;
    return reinterpret_cast<char*>(cur_) + at;
  }
  void do_deallocate(void*, std::size_t, std::size_t) override {}
  bool do_is_equal(const json::memory_resource& o) const noexcept override { return this == &o; }

  void grow(std::size_t need) {
    const std::size_t size = std::max(need + sizeof(Block), head_ ? next_ : first_);
    auto* b = ::new (::operator new(size, std::align_val_t(alignof(Block)))) Block{nullptr, size};
    if (cur_)
      cur_->next = b;
    else
      head_ = b;
    cur_ = b;
    pos_ = sizeof(Block);
    if (count_) *count_ += size;
  }
  /// Frees the blocks after `keep` (all of them when null).
  void free_after(Block* keep) noexcept {
    Block* b = keep ? keep->next : head_;
    if (keep) keep->next = nullptr;
    while (b) {
      Block* next = b->next;
      if (count_) *count_ -= b->size;
      ::operator delete(static_cast<void*>(b), std::align_val_t(alignof(Block)));
      b = next;
    }
  }

  std::shared_ptr<std::size_t> count_;
  std::size_t first_;
  std::size_t next_;
  Block* head_ = nullptr;
  Block* cur_ = nullptr;
  std::size_t pos_ = 0;
  std::size_t used_ = 0;
};

}  // namespace detail

namespace {

/// A kept stream's bookkeeping beyond its document: map and eviction-order nodes, the resource.
constexpr std::size_t kStreamOverhead = 256;

}  // namespace

void BusDecoder::touch(Streams::iterator it) {
  auto& st = it->second;
  if (st.tick != 0) by_tick_.erase(st.tick);
  st.tick = ++next_tick_;
  by_tick_.emplace(st.tick, &it->first);
}

void BusDecoder::erase(Streams::iterator it) {
  if (it->second.tick != 0) by_tick_.erase(it->second.tick);
  state_bytes_ -= it->second.bytes;
  streams_.erase(it);
}

BusDecoder::BusDecoder(BusLimits limits)
    : limits_(limits),
      scratch_(std::make_unique<detail::BusArena>(nullptr, kScratchBlock, kScratchNext)) {}
BusDecoder::~BusDecoder() = default;
BusDecoder::BusDecoder(BusDecoder&&) noexcept = default;
BusDecoder& BusDecoder::operator=(BusDecoder&&) noexcept = default;

namespace {

/// `doc` copied into an arena of its own whose first block is `first` bytes, charged to `count`.
json::value in_own_arena(const json::value& doc, std::size_t first,
                         const std::shared_ptr<std::size_t>& count) {
  return json::value(doc, json::make_shared_resource<detail::BusArena>(
                              count, first, std::max(kArenaMinNext, first / 8)));
}

}  // namespace

BusDecoder::Streams::iterator BusDecoder::keep(const Key& key, Streams::iterator it,
                                               const json::value& doc,
                                               std::unique_ptr<const GpuSnapshot> snapshot) {
  auto count = std::make_shared<std::size_t>(0);
  json::value stored;
  if (snapshot) {
    // The snapshot itself (what it allocates, as approx_bytes counts it); no document.
    *count = approx_bytes(*snapshot);
  } else {
    // One block of what it took in the scratch arena, and a little room for patches.
    const std::size_t used = scratch_->used();
    stored = in_own_arena(doc, used + used / 16 + 256, count);
  }
  const std::size_t fixed = key.first.size() + key.second.size() + sizeof(Stream) + kStreamOverhead;
  const std::size_t bytes = *count + fixed;
  if (it != streams_.end()) erase(it);  // its old base goes first; the stream rebuilds below
  if (bytes > limits_.max_state_bytes) {
    ++counters_.evicted;
    return streams_.end();
  }
  // The stalest first (the count bound is the caller's: a new stream over it is refused).
  while (!by_tick_.empty() && state_bytes_ + bytes > limits_.max_state_bytes) {
    erase(streams_.find(*by_tick_.begin()->second));
    ++counters_.evicted;
  }
  // Moved in by construction: an assignment would copy it into the default resource.
  it = streams_.emplace(key, Stream{.base_doc = std::move(stored)}).first;
  it->second.base_snapshot = std::move(snapshot);
  it->second.kept_bytes = *count;
  it->second.doc_bytes = std::move(count);
  it->second.fixed_bytes = fixed;
  it->second.bytes = bytes;
  state_bytes_ += bytes;
  return it;
}

void BusDecoder::compact(Streams::iterator it, bool now) {
  auto& st = it->second;
  if (*st.doc_bytes == st.kept_bytes) return;
  if (!now && *st.doc_bytes <= 2 * st.kept_bytes + kArenaMinNext) return;
  // One block of the size it was kept with (what it holds is the same document, so it fits
  // with room to spare: the bytes return to what they were at keep()).
  auto count = std::make_shared<std::size_t>(0);
  json::value fresh = in_own_arena(st.base_doc, st.kept_bytes, count);
  // Move-constructed (an assignment between two resources would copy into the old arena): the
  // old document goes, and with it its arena.
  std::destroy_at(&st.base_doc);
  std::construct_at(&st.base_doc, std::move(fresh));
  st.kept_bytes = *count;
  st.doc_bytes = std::move(count);
}

void BusDecoder::recount(Streams::iterator it) {
  auto& st = it->second;
  const std::size_t now = *st.doc_bytes + st.fixed_bytes;
  state_bytes_ = state_bytes_ - st.bytes + now;
  st.bytes = now;
  if (now > limits_.max_state_bytes) {
    erase(it);
    ++counters_.evicted;
    return;
  }
  while (state_bytes_ > limits_.max_state_bytes) {
    auto stalest = streams_.find(*by_tick_.begin()->second);
    if (stalest == it) stalest = streams_.find(*std::next(by_tick_.begin())->second);
    erase(stalest);
    ++counters_.evicted;
  }
}

std::size_t BusDecoder::cost_bytes(const BusHeader& h) const {
  std::size_t cost = h.body_bytes;
  if (!h.full) {
    const auto it = streams_.find(Key(h.node, h.probe));
    if (it != streams_.end() && it->second.epoch == h.epoch && it->second.base == h.base)
      cost += it->second.bytes;
  }
  return cost;
}

std::optional<BusDecoder::Decoded> BusDecoder::decode(std::string_view message) {
  // The message's parsed documents are gone when decode_counted returns (or throws).
  struct ResetScratch {
    detail::BusArena& arena;
    ~ResetScratch() { arena.reset(); }
  } reset{*scratch_};
  try {
    return decode_counted(message);
  } catch (const BusError& e) {
    switch (e.reason()) {
      case BusRefusal::malformed:
        ++counters_.malformed;
        break;
      case BusRefusal::too_large:
        ++counters_.too_large;
        break;
      case BusRefusal::inflation:
        ++counters_.inflation;
        break;
      case BusRefusal::too_many_devices:
        ++counters_.too_many_devices;
        break;
      case BusRefusal::too_many_streams:
        ++counters_.too_many_streams;
        break;
    }
    throw;
  }
}

std::optional<BusDecoder::Decoded> BusDecoder::decode_counted(std::string_view message) {
  BusHeader h = parse_bus_header(message, limits_);
  const auto key = std::make_pair(h.node, h.probe);
  auto it = streams_.find(key);
  // The sequence rule (the file comment), from the header alone: what it drops costs nothing more.
  bool resync = false;
  // A drop of `it`'s stream, or a full taken anyway after resync_after drops in a row.
  const auto drop = [&](std::uint64_t& counter) {
    auto& st = it->second;
    if (h.full && st.dropped >= limits_.resync_after) return false;
    ++counter;
    if (st.dropped < UINT32_MAX) ++st.dropped;
    return true;
  };
  if (it != streams_.end() && it->second.epoch == h.epoch) {
    auto& st = it->second;
    const bool old = h.seq <= st.last_seq;
    const bool jump = !old && h.seq - st.last_seq > limits_.seq_window;
    if (old || jump) {
      if (drop(old ? counters_.stale : counters_.jumps)) return std::nullopt;
      resync = true;
    } else if (!h.full && st.base != h.base) {
      ++counters_.waiting;  // a delta of a full this decoder missed: the next full rebuilds
      return std::nullopt;
    }
  } else if (it != streams_.end() && std::find(it->second.retired.begin(), it->second.retired.end(),
                                               h.epoch) != it->second.retired.end()) {
    // An epoch this stream has left (the agent restarted since): late or replayed, it is old.
    if (drop(counters_.stale)) return std::nullopt;
    resync = true;
  } else if (!h.full) {
    ++counters_.waiting;
    return std::nullopt;
  }

  const auto body_at = message.find('\n') + 1;
  const std::string_view raw = message.substr(body_at);
  thread_local std::string inflated;  // reused: no allocation per message
  struct ShrinkInflated {
    ~ShrinkInflated() {
      if (inflated.capacity() > (std::size_t{1} << 20)) std::string().swap(inflated);
    }
  } shrink_out;
  std::string_view body = raw;
  if (h.compressed) {
    body = inflate_exact(raw, h.body_bytes, inflated);
  } else if (raw.size() != h.body_bytes) {
    throw BusError("bus message: the body is not the declared " + std::to_string(h.body_bytes) +
                   " bytes");
  }

  Decoded out;
  out.header = std::move(h);
  const auto to_snapshot = [&out](const json::value& doc) {
    try {
      out.snapshot = snapshot_from_json(doc);
    } catch (const JsonError& e) {
      throw BusError(std::string("bus message: snapshot: ") + e.what());
    }
  };
  if (!out.header.full && it->second.base_snapshot) {
    // Onto a copy of the kept snapshot: only what the patch names is read, and a refused
    // patch leaves the base as it was (it was never touched).
    auto& st = it->second;
    const json::value patch = parse_body(body, json::storage_ptr(scratch_.get()));
    if (!patch.is_object()) throw BusError("bus patch: expected an object");
    check_patch_devices(patch.get_object(), limits_);
    out.snapshot = *st.base_snapshot;
    try {
      gpustream::detail::patch_snapshot(out.snapshot, patch.get_object());
    } catch (const JsonError& e) {
      throw BusError(std::string("bus patch: ") + e.what());
    }
    check_snapshot_counts(out.snapshot, limits_);
    out.snapshot.node = out.header.node;  // the header names the node; the body must agree
    st.last_seq = out.header.seq;
    st.dropped = 0;
    st.newest_ns = std::max(st.newest_ns, out.snapshot.time_unix_ns);
    touch(it);
    return out;
  }
  if (!out.header.full) {
    // In place on the kept base, undone whatever happens (a patch that fails half-way too).
    auto& st = it->second;
    bool restored = false;
    {
      const json::value patch = parse_body(body, json::storage_ptr(scratch_.get()));
      if (!patch.is_object()) throw BusError("bus patch: expected an object");
      PatchUndo undo;
      try {
        apply_one(st.base_doc, patch, &undo);
        check_counts(st.base_doc, limits_);
        to_snapshot(st.base_doc);
        out.snapshot.node = out.header.node;
      } catch (...) {
        if (undo.undo()) {
          compact(it, true);  // the refused patch's copies go too
          recount(it);
        } else
          erase(it);  // no base is better than a wrong one
        throw;
      }
      restored = undo.undo();
    }
    if (!restored) {
      erase(it);
      return out;
    }
    st.last_seq = out.header.seq;
    st.dropped = 0;
    st.newest_ns = std::max(st.newest_ns, out.snapshot.time_unix_ns);
    touch(it);
    compact(it);
    recount(it);
    return out;
  }

  const json::value doc = parse_body(body, json::storage_ptr(scratch_.get()));
  check_counts(doc, limits_);
  to_snapshot(doc);
  // A document as this release writes it is kept as its snapshot (deltas patch a copy of it);
  // any other (another producer's spelling, keys this reader ignores) as the document.
  std::unique_ptr<const GpuSnapshot> base;
  if (writes_as(out.snapshot, body)) base = std::make_unique<const GpuSnapshot>(out.snapshot);
  out.snapshot.node = out.header.node;  // the header names the node; the body must agree
  std::int64_t newest_ns = it != streams_.end() ? it->second.newest_ns : INT64_MIN;
  if (resync) {
    // Taken anyway only when newer than anything the stream took, and not dated far ahead: a
    // replay, however often repeated, never is (its values would be shown as current).
    const auto t = out.snapshot.time_unix_ns;
    const auto now = wall_now_ns();
    if (t <= newest_ns || t > now + std::min(limits_.resync_max_future_ns, INT64_MAX - now)) {
      auto& st = it->second;
      ++(out.header.epoch == st.epoch && out.header.seq > st.last_seq ? counters_.jumps
                                                                      : counters_.stale);
      if (st.dropped < UINT32_MAX) ++st.dropped;
      return std::nullopt;
    }
  }
  newest_ns = std::max(newest_ns, out.snapshot.time_unix_ns);
  if (it == streams_.end() && streams_.size() >= limits_.max_streams)
    throw BusError("bus message: more than " + std::to_string(limits_.max_streams) + " streams",
                   BusRefusal::too_many_streams);
  if (resync) ++counters_.resyncs;
  // The epochs the stream has left, carried over (a new epoch retires the current one).
  std::array<std::uint64_t, kRetiredEpochs> retired{};
  if (it != streams_.end()) {
    retired = it->second.retired;
    if (it->second.epoch != out.header.epoch) {
      std::move_backward(retired.begin(), retired.end() - 1, retired.end());
      retired[0] = it->second.epoch;
    }
  }
  it = keep(key, it, doc, std::move(base));
  if (it == streams_.end())
    return out;  // decoded, but too big to keep: its deltas wait for a full that fits
  it->second.retired = retired;
  it->second.newest_ns = newest_ns;
  it->second.epoch = out.header.epoch;
  it->second.base = out.header.seq;
  it->second.last_seq = out.header.seq;
  touch(it);
  return out;
}

std::string encode_node_state(const std::map<std::string, std::string>& fulls) {
  std::string out = "GSK1 " + std::to_string(fulls.size()) + "\n";
  for (const auto& kv : fulls) {
    out += std::to_string(kv.second.size());
    out += '\n';
    out += kv.second;
  }
  return out;
}

std::vector<std::string_view> decode_node_state(std::string_view state, const BusLimits& limits) {
  constexpr std::size_t kMaxProbes = 64;
  auto line = [&state]() {
    const auto eol = state.substr(0, 32).find('\n');
    if (eol == std::string_view::npos) throw BusError("node state: bad line");
    const auto l = state.substr(0, eol);
    state.remove_prefix(eol + 1);
    return l;
  };
  const auto head = line();
  if (head.substr(0, 5) != "GSK1 ") throw BusError("node state: not GSK1");
  const auto count = parse_u64(head.substr(5), "count");
  if (count > kMaxProbes) throw BusError("node state: too many messages");
  std::vector<std::string_view> out;
  for (std::uint64_t i = 0; i < count; ++i) {
    const auto n = parse_u64(line(), "length");
    if (n > limits.max_message_bytes || n > state.size())
      throw BusError("node state: a message longer than allowed or than the state");
    out.push_back(state.substr(0, n));
    state.remove_prefix(n);
  }
  if (!state.empty()) throw BusError("node state: trailing bytes");
  return out;
}

void BusDecoder::forget(std::string_view node) {
  for (auto it = streams_.lower_bound(std::make_pair(std::string(node), std::string()));
       it != streams_.end() && it->first.first == node;)
    erase(it++);
}

}  // namespace gpustream::transport
