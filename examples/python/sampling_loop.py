#!/usr/bin/env python3
"""sampling_loop: energy and peak GPU memory per step of a loop.

    python3 examples/python/sampling_loop.py [--simulate 2] [--steps 5]

Each step of the loop runs inside telemetry.window("step"); its summary gives, per device, the
energy used (from the hardware counter where there is one, integrated from power otherwise; the
summary says which) and min/max/mean of each metric, so the peak memory is metrics
["memory_used_bytes"].max.
"""
import argparse

import gpustream


def work(telemetry, samples):
    """Stands in for a training step: here it waits for a few sampling intervals."""
    for i, _ in enumerate(telemetry.stream(timeout=10)):
        if i + 1 >= samples:
            break


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--simulate", type=int, default=0, help="simulated GPUs (0: real ones only)")
    p.add_argument("--interval", type=float, default=0.05, help="sampling interval, seconds")
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--samples-per-step", type=int, default=4)
    args = p.parse_args()

    with gpustream.Telemetry(simulate=args.simulate, interval=args.interval) as t:
        t.wait_for_first_samples(timeout=5)
        for step in range(args.steps):
            with t.window("step") as w:
                work(t, args.samples_per_step)
            for d in w.devices:
                memory = d.metrics.get("memory_used_bytes")
                energy = "energy unknown" if d.energy_joules is None else \
                    f"{d.energy_joules:8.2f} J ({d.energy_kind})"
                peak = "peak memory unknown" if memory is None else \
                    f"peak {memory.max / (1 << 30):6.2f} GiB"
                print(f"step {step} {d.device_id}: {energy}, {peak}, "
                      f"{w.duration:.3f} s, {d.samples} samples")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
