// gpustream/shared_optional.hpp — an optional whose value lives in one shared, immutable heap
// block: copying it shares the block (a reference count), writing through it copies the block
// first when another owner still holds it (copy-on-write).
//
// The model uses it for a ProcessSample's rarely-set, rarely-changing placement (container,
// Slurm job, Kubernetes pod): an unset one costs a pointer instead of the whole std::optional,
// and a snapshot's copy (the channel's, the fleet decoder's base) shares what is set instead of
// copying its strings. It reads and writes as std::optional<T> does (has_value, `*`, `->`,
// value(), value_or, reset, emplace, assignment from T, std::nullopt or std::optional<T>,
// comparison by value, conversion to std::optional<T>); what does not carry over is a
// `std::optional<T>&` bound to it.
//
// Thread safety: as std::shared_ptr<const T>. Distinct SharedOptional objects may be copied,
// assigned and destroyed from any thread even when they share a block; one object is not safe to
// write from one thread while another thread reads or writes it. A const one (a snapshot shared
// as shared_ptr<const GpuSnapshot>) is only read, so any number of threads may read it.
//
// A reference obtained from a non-const access (`*o`, `o->`, value(), emplace) writes into a
// block this object alone owns until the object is next copied: do not keep it across a copy.
#pragma once

#include <atomic>
#include <concepts>
#include <cstddef>
#include <optional>
#include <type_traits>
#include <utility>

namespace gpustream {

template <typename T>
class SharedOptional {
 public:
  using value_type = T;

  SharedOptional() noexcept = default;
  // Implicit, as std::optional's: `p.container = c;`, `p.slurm = std::nullopt;`, `f(job)`.
  SharedOptional(std::nullopt_t) noexcept {}
  SharedOptional(const T& v) : b_(new Block{1, v}) {}
  SharedOptional(T&& v) : b_(new Block{1, std::move(v)}) {}
  SharedOptional(const std::optional<T>& o) : b_(o ? new Block{1, *o} : nullptr) {}
  SharedOptional(std::optional<T>&& o) : b_(o ? new Block{1, std::move(*o)} : nullptr) {}
  template <typename... Args>
  explicit SharedOptional(std::in_place_t, Args&&... args)
      : b_(new Block{1, T(std::forward<Args>(args)...)}) {}

  SharedOptional(const SharedOptional& o) noexcept : b_(o.b_) {
    if (b_) b_->refs.fetch_add(1, std::memory_order_relaxed);
  }
  SharedOptional(SharedOptional&& o) noexcept : b_(std::exchange(o.b_, nullptr)) {}
  SharedOptional& operator=(const SharedOptional& o) noexcept {
    if (this != &o) SharedOptional(o).swap(*this);
    return *this;
  }
  SharedOptional& operator=(SharedOptional&& o) noexcept {
    SharedOptional(std::move(o)).swap(*this);
    return *this;
  }
  SharedOptional& operator=(std::nullopt_t) noexcept {
    reset();
    return *this;
  }
  SharedOptional& operator=(const T& v) {
    SharedOptional(v).swap(*this);
    return *this;
  }
  SharedOptional& operator=(T&& v) {
    SharedOptional(std::move(v)).swap(*this);
    return *this;
  }
  SharedOptional& operator=(const std::optional<T>& o) {
    SharedOptional(o).swap(*this);
    return *this;
  }
  SharedOptional& operator=(std::optional<T>&& o) {
    SharedOptional(std::move(o)).swap(*this);
    return *this;
  }
  ~SharedOptional() { release(); }

  bool has_value() const noexcept { return b_ != nullptr; }
  explicit operator bool() const noexcept { return has_value(); }

  /// Reading: the shared value. Undefined when unset (as std::optional's).
  const T& operator*() const& noexcept { return b_->value; }
  const T* operator->() const noexcept { return &b_->value; }
  /// Writing: the value, copied first when another SharedOptional shares it.
  T& operator*() & { return own(); }
  T* operator->() { return &own(); }
  T operator*() && { return take(); }

  const T& value() const& {
    if (!b_) throw std::bad_optional_access();
    return b_->value;
  }
  T& value() & {
    if (!b_) throw std::bad_optional_access();
    return own();
  }
  T value() && {
    if (!b_) throw std::bad_optional_access();
    return take();
  }
  template <typename U>
  T value_or(U&& fallback) const& {
    return b_ ? b_->value : static_cast<T>(std::forward<U>(fallback));
  }

  void reset() noexcept {
    release();
    b_ = nullptr;
  }
  template <typename... Args>
  T& emplace(Args&&... args) {
    SharedOptional(std::in_place, std::forward<Args>(args)...).swap(*this);
    return b_->value;
  }
  void swap(SharedOptional& o) noexcept { std::swap(b_, o.b_); }

  /// A copy of the value as a std::optional.
  operator std::optional<T>() const { return b_ ? std::optional<T>(b_->value) : std::nullopt; }

  /// Whether this and `o` hold the same block (not merely equal values).
  bool shares_with(const SharedOptional& o) const noexcept { return b_ && b_ == o.b_; }
  /// How many SharedOptional hold this one's block (0 when unset); a snapshot, racy when others
  /// copy or drop theirs meanwhile.
  long use_count() const noexcept {
    return b_ ? static_cast<long>(b_->refs.load(std::memory_order_relaxed)) : 0;
  }
  /// Bytes of the heap block when set (what a copy of it would allocate, without the value's own
  /// heap), 0 when unset.
  std::size_t block_bytes() const noexcept { return b_ ? sizeof(Block) : 0; }

  /// Equal by value: both unset, or both set with equal values.
  friend bool operator==(const SharedOptional& a, const SharedOptional& b) {
    if (a.b_ == b.b_) return true;
    if (!a.b_ || !b.b_) return false;
    return a.b_->value == b.b_->value;
  }
  friend bool operator==(const SharedOptional& a, std::nullopt_t) noexcept { return !a.b_; }
  template <typename U>
  friend bool operator==(const SharedOptional& a, const std::optional<U>& b) {
    if (!a.b_ || !b) return !a.b_ && !b;
    return a.b_->value == *b;
  }
  template <typename U>
  requires(!std::is_same_v<std::remove_cvref_t<U>, SharedOptional> &&
           !std::is_same_v<std::remove_cvref_t<U>, std::nullopt_t> &&
           std::equality_comparable_with<T, U>) friend bool
  operator==(const SharedOptional& a, const U& v) {
    return a.b_ && a.b_->value == v;
  }

 private:
  struct Block {
    std::atomic<std::size_t> refs;
    T value;
  };

  // The value for writing: this object's alone (a copy of the block when it is shared).
  T& own() {
    if (b_->refs.load(std::memory_order_acquire) != 1) {
      auto* mine = new Block{1, b_->value};
      release();
      b_ = mine;
    }
    return b_->value;
  }
  // The value moved out when this object owns it alone, else copied.
  T take() {
    if (b_->refs.load(std::memory_order_acquire) == 1) return std::move(b_->value);
    return b_->value;
  }
  void release() noexcept {
    if (!b_) return;
    // The last owner frees without a read-modify-write: nobody else can reach the block.
    if (b_->refs.load(std::memory_order_acquire) == 1 ||
        b_->refs.fetch_sub(1, std::memory_order_acq_rel) == 1)
      delete b_;
  }

  Block* b_ = nullptr;
};

}  // namespace gpustream
