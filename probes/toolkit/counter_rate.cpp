#include "gpustream/probes/counter_rate.hpp"

namespace gpustream::rate {

Step CounterRate::update(std::uint64_t value, std::uint64_t base) {
  Step out;
  if (!last_) {
    last_ = Reading{value, base};
    return out;
  }
  std::uint64_t delta = 0;
  if (value >= last_->value) {
    delta = value - last_->value;
  } else if (options_.wrap_bits > 0 && options_.wrap_bits < 64 &&
             last_->value < (std::uint64_t{1} << options_.wrap_bits)) {
    delta = (std::uint64_t{1} << options_.wrap_bits) - last_->value + value;
  } else if (options_.wrap_bits == 64) {
    delta = value - last_->value;  // unsigned arithmetic is the 2^64 wrap
  } else {
    out.reset = true;
    last_ = Reading{value, base};
    return out;
  }
  if (base <= last_->base) {
    if (base < last_->base) last_ = Reading{value, base};  // the base itself restarted
    return out;
  }
  out.rate = static_cast<double>(delta) / static_cast<double>(base - last_->base);
  out.delta = delta;
  out.base_delta = base - last_->base;
  last_ = Reading{value, base};
  return out;
}

}  // namespace gpustream::rate
