#!/usr/bin/python3
"""Runs a Google Benchmark program measured by gpustream::benchmark over the simulated probe and
checks the counters of every run (ctest benchmark.counters, benchmark.example).

The simulated GPUs draw between 80 % of their idle power and their power limit (250..700 W), so
every figure has a hard bound: energy per iteration > 0, mean power <= the sum of the largest
readings <= 700 W per device, utilization 0..100 %, memory in use > 0, coverage 0..1, exact
edges. The window of a run must contain its timed loop: window_s >= real time x iterations (for
->Threads(N), Google Benchmark's real_time is the threads' mean loop time / all iterations).
"""
import argparse
import json
import math
import os
import subprocess
import sys

MAX_WATTS = 700.0  # the largest power limit of a simulated GPU
TIME_UNIT_S = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}


def fail(msg):
    print("energy_bench_check: FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def check_run(run, prefix, devices):
    name = run["name"]
    c = {k[len(prefix):]: v for k, v in run.items() if k.startswith(prefix)}
    label = run.get("label", "")
    # The simulated energy counter changes at every reading, so its update period (and the
    # coverage) cannot be measured: the counter is then absent and the label says why.
    if "coverage" not in c:
        at = label.find("absent: ")
        if at < 0 or "coverage: " not in label[at:]:
            fail(f"{name}: no {prefix}coverage and no reason in the label {label!r}")
    for key in ("energy_J", "power_mean_W", "power_max_W", "util_max_pct", "mem_peak_B",
                "exact_edges", "window_s"):
        if key not in c:
            fail(f"{name}: no counter {prefix}{key} (label: {run.get('label')!r})")
        if not math.isfinite(c[key]):
            fail(f"{name}: {prefix}{key} = {c[key]}")
    if not c["energy_J"] > 0:
        fail(f"{name}: energy per iteration {c['energy_J']} J")
    if not 0 < c["power_mean_W"] <= c["power_max_W"] * (1 + 1e-9):
        fail(f"{name}: mean power {c['power_mean_W']} W vs max {c['power_max_W']} W")
    if not c["power_max_W"] <= MAX_WATTS * devices:
        fail(f"{name}: max power {c['power_max_W']} W over {devices} device(s)")
    if not 0 <= c["util_max_pct"] <= 100:
        fail(f"{name}: max utilization {c['util_max_pct']} %")
    if not c["mem_peak_B"] > 0:
        fail(f"{name}: peak memory {c['mem_peak_B']} B")
    if "coverage" in c and not 0 <= c["coverage"] <= 1:
        fail(f"{name}: coverage {c['coverage']}")
    if c["exact_edges"] != 1:
        fail(f"{name}: edges not exact (label: {run.get('label')!r})")
    if run["run_type"] == "iteration":
        loop_s = run["real_time"] * TIME_UNIT_S[run["time_unit"]] * run["iterations"]
        if not c["window_s"] >= loop_s * (1 - 1e-6):
            fail(f"{name}: the window ({c['window_s']} s) is shorter than the timed loop "
                 f"({loop_s} s): it does not contain it")
        # energy per iteration x iterations / window = mean power: one window, one set of figures
        total = c["energy_J"] * run["iterations"]
        if not math.isclose(total / c["window_s"], c["power_mean_W"], rel_tol=1e-6):
            fail(f"{name}: {c['energy_J']} J x {run['iterations']} iterations / "
                 f"{c['window_s']} s != {c['power_mean_W']} W")
        if not label.startswith("gpustream: ") or "energy=" not in label:
            fail(f"{name}: label {label!r} does not name the energy method")


def run_bench(bench, work, extra):
    os.makedirs(work, exist_ok=True)
    config = os.path.join(work, "simulated.json")
    with open(config, "w") as f:
        json.dump({"probes": ["simulated"], "simulate": 2, "interval_seconds": 0.1}, f)
    out = os.path.join(work, "out.json")
    env = dict(os.environ, GPUSTREAM_BENCHMARK_CONFIG=config)
    cmd = [bench, "--benchmark_min_time=0.05", "--benchmark_out_format=json",
           "--benchmark_out=" + out] + extra
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    print(r.stdout)
    if r.returncode != 0:
        fail(f"{' '.join(cmd)} exited {r.returncode}:\n{r.stderr}")
    with open(out) as f:
        return json.load(f)["benchmarks"]


def by_name(runs):
    out = {}
    for r in runs:
        out.setdefault(r["name"], []).append(r)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--example", action="store_true",
                    help="the example program: every run has the all-device counters")
    a = ap.parse_args()
    runs = run_bench(a.bench, a.work, [])
    if not runs:
        fail("no benchmark ran")
    if a.example:
        for r in runs:
            check_run(r, "gpu_", 2)
        print(f"energy_bench_check: ok ({len(runs)} runs)")
        return
    named = by_name(runs)
    fn = "BM_Function/repeats:2"
    expected = ["EnergyFixture/Spin/threads:1", "EnergyFixture/Spin/threads:2", "FirstDevice/Spin",
                fn, fn + "_mean", fn + "_median", fn + "_stddev", "BM_NoSuchDevice"]
    for n in expected:
        if n not in named:
            fail(f"no run named {n} (have: {sorted(named)})")
    for n in ("EnergyFixture/Spin/threads:1", "EnergyFixture/Spin/threads:2"):
        check_run(named[n][0], "gpu_", 2)
    two = named["EnergyFixture/Spin/threads:2"][0]
    if two["threads"] != 2:
        fail(f"threads:2 ran with {two['threads']} threads")
    one_device = named["FirstDevice/Spin"][0]
    check_run(one_device, "gpu0_", 1)
    if any(k.startswith("gpu_") for k in one_device):
        fail("the chosen device's run has all-device counters too")
    if one_device["label"].count("energy=") != 1:
        fail(f"the chosen device's label names more than one device: {one_device['label']!r}")
    reps = [r for r in named[fn] if r["run_type"] == "iteration"]
    if len(reps) != 2:
        fail(f"BM_Function: {len(reps)} repetitions, not 2")
    for r in reps:
        check_run(r, "gpu_", 2)
    mean = named[fn + "_mean"][0]
    expect = sum(r["gpu_power_mean_W"] for r in reps) / 2
    if not math.isclose(mean["gpu_power_mean_W"], expect, rel_tol=1e-9):
        fail(f"BM_Function_mean: gpu_power_mean_W {mean['gpu_power_mean_W']} != {expect}")
    missing = named["BM_NoSuchDevice"][0]
    if any(k.startswith("gpu_") for k in missing):
        fail(f"a device that does not exist has counters: {missing}")
    if "absent: every figure: the window did not see device 'no-such-gpu'" not in missing["label"]:
        fail(f"BM_NoSuchDevice: the label does not say why: {missing['label']!r}")
    print(f"energy_bench_check: ok ({len(runs)} runs)")


if __name__ == "__main__":
    main()
