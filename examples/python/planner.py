#!/usr/bin/env python3
"""planner: where does a job needing N bytes of GPU memory fit now, and when does that change?

    python3 examples/python/planner.py --bytes 8G [--simulate 2] [--changes 5]

Picks the device with the most free memory that can hold the job (vendor-reported free memory
where the driver has it, else total - used; a device whose free memory is unknown is never
picked), then follows the telemetry and prints an update each time the answer changes (or each
snapshot, with --every-snapshot), --changes times.
"""
import argparse

import gpustream

UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def size(text):
    text = text.strip().upper().removesuffix("B")
    if text and text[-1] in UNITS:
        return int(float(text[:-1]) * UNITS[text[-1]])
    return int(text)


def describe(fit):
    if fit is None:
        return "fits nowhere"
    return f"fits on {fit.name} ({fit.device_id}, {fit.free_bytes / (1 << 30):.1f} GiB free)"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bytes", type=size, default=8 << 30, help="memory the job needs (8G, 512M)")
    p.add_argument("--simulate", type=int, default=0, help="simulated GPUs (0: real ones only)")
    p.add_argument("--interval", type=float, default=0.1, help="sampling interval, seconds")
    p.add_argument("--changes", type=int, default=5, help="updates to print before exiting")
    args = p.parse_args()

    with gpustream.Telemetry(simulate=args.simulate, interval=args.interval) as t:
        t.wait_for_first_samples(timeout=5)
        best = t.best_device(args.bytes)
        print(f"job of {args.bytes} bytes {describe(best)}")
        answer = best.device_id if best else None
        updates = 0
        # React to changes: every snapshot may move the answer (memory freed or taken).
        for _ in t.stream(policy="latest", timeout=10):
            best = t.best_device(args.bytes)
            now = best.device_id if best else None
            moved = "moved" if now != answer else "same"
            answer = now
            updates += 1
            print(f"update: {describe(best)} ({moved})")
            if updates >= args.changes:
                break
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
