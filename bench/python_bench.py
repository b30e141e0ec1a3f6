#!/usr/bin/env python3
"""What the Python module costs, as ratios against C++ baselines in the same process.

    PYTHONPATH=build/python /usr/bin/python3 bench/python_bench.py [--n 20000] [--quick]

1. Delivery: N copies of a real simulated snapshot (2 GPUs) are published into a channel;
   measured from the first publish until the subscriber has received the N-th:
     - C++ baseline: a queue subscriber popping on its own C++ thread (the same structure as a
       Python subscription, without Python);
     - Python callback: subscribe(callback, policy="lossless", capacity=N), the callback on the
       module's delivery thread with the GIL;
     - Python stream: `for snap in stream` on the main thread.
   Reported per snapshot as CPU time of the whole process (publisher, io thread and consumer:
   time.process_time) and as wall time, each with its ratio to the baseline. On a loaded
   machine read the CPU figures: wall time then mostly measures waiting for a core.
2. Windows: `with telemetry.window("w"): pass` on a running Telemetry (simulated probe), per
   begin+end pair, against the same adapter calls made from C++ in a loop (CPU and wall).

Each figure is the median of --repeat runs. docs/benchmarks.md ("Python module") has figures.
"""
import argparse
import statistics
import threading
import time

import gpustream
from gpustream import _gpustream


def prototype():
    with gpustream.Telemetry(probes=["simulated"], simulate=2, interval=0.05) as t:
        return t.wait_for_first_samples(10)[0]


def deliver_callback(proto, n):
    ch = _gpustream._BenchChannel()
    done = threading.Event()
    count = [0]

    def cb(snap):
        count[0] += 1
        if count[0] == n:
            done.set()

    sub = ch.subscribe(cb, policy="lossless", capacity=n)
    t0 = time.perf_counter()
    ch.publish(proto, n)
    if not done.wait(120):
        raise SystemExit(f"callback received {count[0]} of {n}")
    elapsed = time.perf_counter() - t0
    assert sub.lost == 0
    sub.close()
    ch.close()
    return elapsed


def deliver_stream(proto, n):
    ch = _gpustream._BenchChannel()
    stream = ch.stream(policy="lossless", capacity=n, timeout=30)
    t0 = time.perf_counter()
    threading.Thread(target=ch.publish, args=(proto, n)).start()
    got = 0
    for _ in stream:
        got += 1
        if got == n:
            break
    elapsed = time.perf_counter() - t0
    if got != n:
        raise SystemExit(f"stream received {got} of {n}")
    ch.close()
    return elapsed


def deliver_cpp(proto, n):
    ch = _gpustream._BenchChannel()
    elapsed = ch.cpp_subscriber(proto, n)
    ch.close()
    return elapsed


def windows(t, n):
    t0 = time.perf_counter()
    for _ in range(n):
        with t.window("w"):
            pass
    return time.perf_counter() - t0


def timed(f):
    """(wall, cpu) seconds of f(); f's own wall measure is ignored (both measured here)."""
    c0, w0 = time.process_time(), time.perf_counter()
    f()
    return time.perf_counter() - w0, time.process_time() - c0


def median(f, repeat):
    runs = [timed(f) for _ in range(repeat)]
    return (statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs))


def line(label, value, base, unit, scale):
    (w, c), (bw, bc) = value, base
    ratio = "" if value is base else f"  ({c / bc:4.1f}x CPU, {w / bw:4.1f}x wall vs baseline)"
    return f"  {label:<32} {c * scale:9.1f} {unit} CPU {w * scale:9.1f} {unit} wall{ratio}"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=20000, help="snapshots per delivery run")
    p.add_argument("--windows", type=int, default=2000, help="windows per window run")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--quick", action="store_true", help="tiny runs (ctest: it still works)")
    a = p.parse_args()
    if a.quick:
        a.n, a.windows, a.repeat = 200, 20, 1

    proto = prototype()
    cpp = median(lambda: deliver_cpp(proto, a.n), a.repeat)
    cb = median(lambda: deliver_callback(proto, a.n), a.repeat)
    st = median(lambda: deliver_stream(proto, a.n), a.repeat)
    print(f"delivery of {a.n} snapshots (2 GPUs each), per snapshot, median of {a.repeat}:")
    print(line("C++ queue subscriber (baseline)", cpp, cpp, "ns", 1e9 / a.n))
    print(line("Python callback", cb, cpp, "ns", 1e9 / a.n))
    print(line("Python stream iterator", st, cpp, "ns", 1e9 / a.n))

    with gpustream.Telemetry(probes=["simulated"], simulate=2, interval=0.05) as t:
        t.wait_for_first_samples(10)
        wc = median(lambda: t._bench_windows(a.windows), a.repeat)
        wp = median(lambda: windows(t, a.windows), a.repeat)
    print(f"window begin+end, per window, {a.windows} windows, median of {a.repeat}:")
    print(line("C++ adapter calls (baseline)", wc, wc, "us", 1e6 / a.windows))
    print(line("Python `with t.window()`", wp, wc, "us", 1e6 / a.windows))

if __name__ == "__main__":
    main()
