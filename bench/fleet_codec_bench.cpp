// The fleet's bus encoding against today's (the gpustream/1 JSON the NATS bridge published):
// bytes per GPU-sample and encode/decode time, over 100 consecutive snapshots of the simulated
// probe with 8 GPUs (the bench of issue 19), in the same process.
//
//   build-dir/bench/fleet_codec_bench --benchmark_min_time=0.5
//
// Counters: bytes_per_gpu_sample (the bus cost: mean message bytes / 8), ratio_vs_json.
// BM_BusBodyDeflate and BM_BusBodyInflate compare the bus bodies' deflater and inflater
// (libdeflate, fleet/bus_deflate.hpp) with Boost.Beast's zlib port, the baseline, in one run.
// main() first checks that every compact message decodes to the very snapshot it was made from.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/beast/zlib/deflate_stream.hpp>
#include <boost/beast/zlib/error.hpp>
#include <boost/beast/zlib/inflate_stream.hpp>

#include "fleet/bus_deflate.hpp"
#include "gpustream/json.hpp"
#include "gpustream/probes/simulated_probe.hpp"
#include "gpustream/transport/fleet_codec.hpp"
#include "support/beast_deflate.hpp"

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

/// The 100 plain bodies the encoder compresses (a full every 10, deltas between): what the bus
/// deflates and inflates, for the body-level benchmarks below.
const std::vector<std::string>& bus_bodies() {
  static const std::vector<std::string> all = [] {
    BusEncoder enc("bench-node-0001", {}, {10, false, 6});
    std::vector<std::string> out;
    for (const auto& s : ticks()) {
      const std::string& m = enc.encode(s);
      out.push_back(m.substr(m.find('\n') + 1));
    }
    return out;
  }();
  return all;
}

std::string beast_deflate_body(std::string_view in, int level) {
  boost::system::error_code ec;  // a stream per body, as the bus encoder did before session 15
  return ::gpustream::test::beast_deflate(in, level, ec);
}

/// Session 15: one body's deflate; arg 0: 0 Beast's zlib port (a deflate_stream per body, the
/// encoder before), 1 libdeflate (bus_deflate_into, the encoder now); arg 1: the level (the
/// encoder's default is 6). Counters: compressed_bytes, the mean compressed body; body_bytes,
/// the mean plain one.
void BM_BusBodyDeflate(benchmark::State& state) {
  const bool libdeflate = state.range(0) != 0;
  const int level = static_cast<int>(state.range(1));
  std::string out;
  std::size_t bytes = 0, bodies = 0;
  for (auto _ : state) {
    for (const auto& b : bus_bodies()) {
      if (libdeflate) {
        out.clear();
        gpustream::transport::bus_deflate_into(out, b, level);
      } else {
        out = beast_deflate_body(b, level);
      }
      bytes += out.size();
      ++bodies;
    }
  }
  std::size_t plain = 0;
  for (const auto& b : bus_bodies()) plain += b.size();
  state.counters["compressed_bytes"] = double(bytes) / double(bodies);
  state.counters["body_bytes"] = double(plain) / double(bus_bodies().size());
  state.SetItemsProcessed(static_cast<std::int64_t>(bodies));
}
BENCHMARK(BM_BusBodyDeflate)
    ->Args({0, 6})
    ->Args({1, 6})
    ->Args({0, 1})
    ->Args({1, 1})
    ->Args({1, 4})
    ->Args({0, 9})
    ->Args({1, 9})
    ->Unit(benchmark::kMicrosecond);

/// Session 15: one body's inflate, the same 100 bodies deflated by Beast at level 6 (what both
/// inflaters can read). Arg 0: Beast's inflate_stream reused per thread, with the padded input
/// and spare output byte its quirks need (the decoder before), arg 1: libdeflate into a buffer
/// of exactly the declared size (bus_inflate_exact, the decoder now).
void BM_BusBodyInflate(benchmark::State& state) {
  namespace zlib = boost::beast::zlib;
  const bool libdeflate = state.range(0) != 0;
  std::vector<std::string> packed;
  for (const auto& b : bus_bodies()) packed.push_back(beast_deflate_body(b, 6));
  zlib::inflate_stream is;
  std::string padded, out;
  std::size_t ok = 0, bodies = 0;
  for (auto _ : state) {
    for (std::size_t i = 0; i < packed.size(); ++i) {
      const std::size_t expected = bus_bodies()[i].size();
      if (libdeflate) {
        ok += gpustream::transport::bus_inflate_exact(packed[i], expected, out) ==
              gpustream::transport::BusInflateResult::ok;
      } else {
        padded.assign(packed[i]);
        padded += '\0';
        out.assign(expected + 1, '\0');
        is.reset(15);
        zlib::z_params zs;
        zs.next_in = padded.data();
        zs.avail_in = padded.size();
        zs.next_out = out.data();
        zs.avail_out = out.size();
        boost::system::error_code ec;
        is.write(zs, zlib::Flush::finish, ec);
        ok += ec == zlib::error::end_of_stream && zs.total_out == expected;
      }
      ++bodies;
    }
  }
  if (ok != bodies) state.SkipWithError("a body did not inflate");
  state.SetItemsProcessed(static_cast<std::int64_t>(bodies));
}
BENCHMARK(BM_BusBodyInflate)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

/// Issue #27: a tiny delta against a big base (arg: devices in the base, 8 GPUs' worth of
/// metrics each). Each delta sets one device's power: the cost is applying the patch to the kept
/// base plus converting the whole base to a snapshot (before #27 the base was copied too).
/// Time is per delta; the full message is decoded outside the timed part.
void BM_BusDeltaOnBigBase(benchmark::State& state) {
  const int devices = static_cast<int>(state.range(0));
  constexpr int kDeltas = 50;
  GpuSnapshot s = ticks()[0];
  s.devices.clear();
  for (int i = 0; i < devices; ++i) {
    DeviceSample d = ticks()[static_cast<std::size_t>(i) % kTicks].devices[i % kGpus];
    d.id = "dev-" + std::to_string(i);
    d.index = i;
    s.devices.push_back(std::move(d));
  }
  BusEncoder enc("bench-node-0001", {}, {1'000'000, true, 6});
  const std::string full = enc.encode(s);
  std::vector<std::string> deltas;
  for (int k = 0; k < kDeltas; ++k) {
    s.devices[static_cast<std::size_t>(k) % s.devices.size()].metrics.set(
        Metric::power_watts, 100.0 + k, Source::simulated);
    ++s.sequence;
    deltas.push_back(enc.encode(s));
  }
  std::size_t decoded = 0;
  for (auto _ : state) {
    state.PauseTiming();
    BusDecoder dec;
    if (!dec.decode(full)) state.SkipWithError("the big full did not decode");
    state.ResumeTiming();
    for (const auto& m : deltas) decoded += dec.decode(m) ? 1 : 0;
  }
  if (decoded != static_cast<std::size_t>(state.iterations()) * kDeltas)
    state.SkipWithError("a delta did not decode");
  state.counters["base_bytes"] = double(to_json_string(s).size());
  state.counters["delta_bytes"] = double(deltas.back().size());
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * kDeltas);
}
BENCHMARK(BM_BusDeltaOnBigBase)->Arg(1000)->Unit(benchmark::kMillisecond);

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
