// The fleet's bus encoding against today's (the gpustream/1 JSON the NATS bridge published):
// bytes per GPU-sample and encode/decode time, over 100 consecutive snapshots of the simulated
// probe with 8 GPUs (the bench of issue 19), in the same process.
//
//   build-dir/bench/fleet_codec_bench --benchmark_min_time=0.5
//
// Counters: bytes_per_gpu_sample (the bus cost: mean message bytes / 8), ratio_vs_json.
// main() first checks that every compact message decodes to the very snapshot it was made from.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>

#include "gpustream/json.hpp"
#include "gpustream/probes/simulated_probe.hpp"
#include "gpustream/transport/fleet_codec.hpp"

namespace {

using namespace gpustream;
using gpustream::transport::BusDecoder;
using gpustream::transport::BusEncoder;
using gpustream::transport::BusEncoderOptions;

constexpr int kGpus = 8;
constexpr int kTicks = 100;

/// 100 one-second ticks of an 8-GPU simulated node (driven clocks: one second apart).
const std::vector<GpuSnapshot>& ticks() {
  static const std::vector<GpuSnapshot> all = [] {
    boost::asio::io_context io;
    boost::asio::thread_pool pool(1);
    std::int64_t t = 1'000'000'000;
    SimulatedProbeOptions o;
    o.devices = kGpus;
    o.monotonic_clock = [&t] { return t; };
    o.wall_clock = [&t] { return 1'764'000'000'000'000'000 + t; };
    auto probe = make_simulated_probe({io.get_executor(), pool.get_executor()}, o);
    auto guard = boost::asio::make_work_guard(io);  // the sample completes through the pool
    std::vector<GpuSnapshot> out;
    for (int i = 0; i < kTicks; ++i) {
      probe->async_sample([&](boost::system::error_code, GpuSnapshot s) {
        for (auto& d : s.devices) derive_metrics(d);  // as Telemetry publishes it
        s.sequence = static_cast<std::uint64_t>(i) + 1;
        s.node = "bench-node-0001";
        out.push_back(std::move(s));
      });
      while (out.size() <= static_cast<std::size_t>(i)) io.run_one();
      t += 1'000'000'000;
    }
    pool.join();
    return out;
  }();
  return all;
}

std::size_t json_bytes() {
  std::size_t n = 0;
  for (const auto& s : ticks()) n += to_json_string(s).size();
  return n;
}

void BM_BusJson(benchmark::State& state) {
  std::string out;
  std::size_t bytes = 0, msgs = 0;
  for (auto _ : state) {
    for (const auto& s : ticks()) {
      out.clear();
      append_json(out, s);
      bytes += out.size();
      ++msgs;
    }
  }
  state.counters["bytes_per_gpu_sample"] = double(bytes) / double(msgs) / kGpus;
  state.counters["ratio_vs_json"] = 1.0;
  state.SetItemsProcessed(static_cast<std::int64_t>(msgs));
}
BENCHMARK(BM_BusJson)->Unit(benchmark::kMicrosecond);

/// Arg 0: full_every; arg 1: deflate on/off.
void BM_BusCompact(benchmark::State& state) {
  const BusEncoderOptions o{static_cast<std::uint32_t>(state.range(0)), state.range(1) != 0, 6};
  std::size_t bytes = 0, msgs = 0;
  for (auto _ : state) {
    BusEncoder enc("bench-node-0001", {}, o);
    for (const auto& s : ticks()) {
      bytes += enc.encode(s).size();
      ++msgs;
    }
  }
  const double per = double(bytes) / double(msgs);
  state.counters["bytes_per_gpu_sample"] = per / kGpus;
  state.counters["ratio_vs_json"] = per / (double(json_bytes()) / kTicks);
  state.SetItemsProcessed(static_cast<std::int64_t>(msgs));
}
BENCHMARK(BM_BusCompact)
    ->Args({1, 1})
    ->Args({10, 0})
    ->Args({10, 1})
    ->Args({30, 1})
    ->Unit(benchmark::kMicrosecond);

void BM_BusDecodeJson(benchmark::State& state) {
  std::vector<std::string> msgs;
  for (const auto& s : ticks()) msgs.push_back(to_json_string(s));
  for (auto _ : state)
    for (const auto& m : msgs) benchmark::DoNotOptimize(snapshot_from_json_string(m));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * kTicks);
}
BENCHMARK(BM_BusDecodeJson)->Unit(benchmark::kMicrosecond);

void BM_BusDecodeCompact(benchmark::State& state) {
  BusEncoder enc("bench-node-0001", {}, {10, true, 6});
  std::vector<std::string> msgs;
  for (const auto& s : ticks()) msgs.push_back(enc.encode(s));
  for (auto _ : state) {
    BusDecoder dec;
    for (const auto& m : msgs) benchmark::DoNotOptimize(dec.decode(m));
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * kTicks);
}
BENCHMARK(BM_BusDecodeCompact)->Unit(benchmark::kMicrosecond);

}  // namespace

int main(int argc, char** argv) {
  if (ticks().size() != kTicks || ticks()[0].devices.size() != kGpus) {
    std::fprintf(stderr, "fleet_codec_bench: the simulated probe gave no 8-GPU snapshots\n");
    return 1;
  }
  BusEncoder enc("bench-node-0001");
  BusDecoder dec;
  for (const auto& s : ticks()) {
    const auto d = dec.decode(enc.encode(s));
    if (!d || !(d->snapshot == s)) {
      std::fprintf(stderr, "fleet_codec_bench: a compact message does not round-trip\n");
      return 1;
    }
  }
  std::printf("today's JSON: %.0f bytes per 8-GPU snapshot (%.0f per GPU-sample)\n",
              double(json_bytes()) / kTicks, double(json_bytes()) / kTicks / kGpus);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
