#!/usr/bin/env python3
"""One fleet view under the load of N nodes x 8 GPUs at 1 Hz (docs/benchmarks.md "Fleet over
NATS", docs/fleet.md "Sizing").

Starts a loopback `nats-server` (no JetStream: the view runs with --kv-bucket off), one
`gpustream fleet` and a few load generators (bench/fleet_load_generator.cpp: each a process of
a few threads publishing its share of the nodes' real bus encodings, BusEncoder per node), waits
until the view lists every node up, lets it settle, then measures over a window:

  - fleet CPU (utime+stime of the fleet process) per 1,000 GPU-samples a second, and the
    generators' and nats-server's CPU (all on the same machine);
  - fleet RSS, and per node;
  - the messages the view took and refused (its /metrics counters) against those published;
  - staleness: time_unix_ns of a snapshot to its visibility in /api/v1/snapshot?node=X, polled
    every 50 ms for 10 sampled nodes (the polling adds up to 50 ms), p50 / p99;
  - /metrics (identity and gzip) and /api/v1/nodes: response time (wall, the whole body read)
    and bytes, a few requests each.

  python3 bench/fleet_load.py --gpustream build/cli/gpustream \\
      --generator build/bench/gpustream_fleet_load_generator --nodes 10000 --processes 2

--smoke: a short run that checks what it can without timing (every node seen up, the view took
messages, /metrics and /api/v1/nodes answered, gzip'd /metrics decompresses to the identity
families); exits 1 when one fails.
"""
import argparse
import gzip
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from bench_proc import free_port, wait_port, cpu_seconds, rss_bytes, percentile

GPUS = 8


def fetch(url, gzip_ok=False, timeout=60):
    """(body as received, seconds to read it all, Content-Encoding)."""
    req = urllib.request.Request(url)
    if gzip_ok:
        req.add_header("Accept-Encoding", "gzip")
    t0 = time.monotonic()
    with urllib.request.urlopen(req, timeout=timeout) as r:
        body = r.read()
        enc = r.headers.get("Content-Encoding", "")
    return body, time.monotonic() - t0, enc


def get_json(url):
    return json.loads(fetch(url)[0])


def metric(text, name):
    """The value of an unlabelled (or the first labelled) series `name` in a /metrics text."""
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return None


def refused_by_reason(text):
    out = {}
    for line in text.splitlines():
        if line.startswith("gpustream_fleet_messages_refused_total{"):
            out[line.split('"')[1]] = float(line.rsplit(" ", 1)[1])
    return out


def refused_total(text):
    return sum(refused_by_reason(text).values())


def run(a):
    port = free_port()
    nats = subprocess.Popen([a.nats_server, "-a", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    procs, gens = [], []
    fleet = None
    failures = []
    try:
        wait_port(port)
        url = f"nats://127.0.0.1:{port}"
        fleet = subprocess.Popen(
            [a.gpustream, "fleet", "--nats", url, "--listen", "127.0.0.1:0", "--kv-bucket", "off",
             "--stale", str(a.stale), "--gone", str(max(a.stale, 600)),
             "--max-http-connections", "64"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        procs.append(fleet)
        http = None
        for line in fleet.stdout:
            if line.startswith("listening http"):
                http = line.split()[2]
                break
        if not http:
            raise SystemExit("the fleet did not start")
        threading.Thread(target=lambda: fleet.stdout.read(), daemon=True).start()
        base = f"http://{http}"
        t_start = time.monotonic()
        for k in range(a.processes):
            lo = 1 + a.nodes * k // a.processes
            hi = 1 + a.nodes * (k + 1) // a.processes
            g = subprocess.Popen(
                [a.generator, "--nats", url, "--nodes", str(hi - lo), "--first", str(lo),
                 "--threads", str(a.threads), "--gpus", str(GPUS), "--level", str(a.level)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                text=True)
            procs.append(g)
            lines = []
            threading.Thread(target=lambda g=g, lines=lines: [lines.append(x) for x in g.stdout],
                             daemon=True).start()
            gens.append((g, lines))
        up = 0
        deadline = time.monotonic() + a.warmup_timeout
        while time.monotonic() < deadline:
            up = get_json(f"{base}/api/v1/nodes")["up"]
            if up >= a.nodes:
                break
            time.sleep(0.5)
        t_all_up = time.monotonic() - t_start
        if up < a.nodes:
            failures.append(f"only {up} of {a.nodes} nodes up after {a.warmup_timeout} s")
        time.sleep(a.settle)

        # Window 1: the view's own cost, nobody polling it.
        m0 = fetch(f"{base}/metrics")[0].decode()
        cpu0 = cpu_seconds(fleet.pid)
        gcpu0 = sum(cpu_seconds(g.pid) for g, _ in gens)
        ncpu0 = cpu_seconds(nats.pid)
        load0 = os.getloadavg()
        t0 = time.monotonic()
        time.sleep(a.window)
        t1 = time.monotonic()
        cpu1 = cpu_seconds(fleet.pid)
        gcpu1 = sum(cpu_seconds(g.pid) for g, _ in gens)
        ncpu1 = cpu_seconds(nats.pid)
        m1 = fetch(f"{base}/metrics")[0].decode()
        rss = rss_bytes(fleet.pid)
        elapsed = t1 - t0
        took = metric(m1, "gpustream_fleet_messages_total") - metric(
            m0, "gpustream_fleet_messages_total")
        refused = refused_total(m1) - refused_total(m0)
        decode_cpu = metric(m1, "gpustream_fleet_decode_cpu_seconds_total") - metric(
            m0, "gpustream_fleet_decode_cpu_seconds_total")
        gpu_samples_per_s = (took - refused) * GPUS / elapsed

        # Window 2: staleness, 10 sampled nodes polled every 50 ms; then the routes timed.
        lat = []
        stop = threading.Event()
        sample = [f"load-{k:05d}" for k in range(1, a.nodes + 1, max(1, a.nodes // 10))][:10]

        def poll():
            seen = {}
            while not stop.is_set():
                for node in sample:
                    try:
                        doc = get_json(f"{base}/api/v1/snapshot?node={node}")
                    except OSError:
                        continue
                    now = time.time_ns()
                    for s in doc["snapshots"]:
                        key = (node, s["probe"])
                        if seen.get(key) != s["time_unix_ns"] and s["devices"]:
                            if key in seen:
                                lat.append((now - s["time_unix_ns"]) / 1e6)
                            seen[key] = s["time_unix_ns"]
                time.sleep(0.05)

        poller = threading.Thread(target=poll, daemon=True)
        poller.start()
        time.sleep(a.stale_window)
        stop.set()
        poller.join()

        routes = {}
        for name, path, gz in (("metrics_identity", "/metrics", False),
                               ("metrics_gzip", "/metrics", True),
                               ("nodes", "/api/v1/nodes", False),
                               ("nodes_gzip", "/api/v1/nodes", True)):
            times, size, enc = [], 0, ""
            for _ in range(a.requests):
                body, took_s, enc = fetch(base + path, gzip_ok=gz)
                times.append(took_s * 1000)
                size = len(body)
                if gz and enc != "gzip":
                    failures.append(f"{path} with Accept-Encoding gzip came back '{enc}'")
                if name == "metrics_gzip" and enc == "gzip":
                    text = gzip.decompress(body).decode()
                    if "gpustream_fleet_node_up{" not in text or "gpustream_gpu" not in text:
                        failures.append("the gzip'd /metrics lacks the node or GPU families")
            routes[name] = {"ms_median": round(percentile(times, 50), 1),
                            "ms_max": round(max(times), 1), "bytes": size,
                            "bytes_per_node": round(size / max(1, a.nodes)), "encoding": enc}
        gen_lines = [lines[-3:] for _, lines in gens]
        if took <= 0:
            failures.append("the view took no message in the window")
        if a.smoke and not lat:
            failures.append("no staleness sample: the sampled nodes' snapshots did not move")
        result = {
            "nodes": a.nodes, "gpus_per_node": GPUS,
            "generators": f"{a.processes} processes x {a.threads} threads, deflate level {a.level}",
            "window_s": round(elapsed, 1),
            "load_average_before_window": [round(x, 2) for x in load0],
            "load_average_after": [round(x, 2) for x in os.getloadavg()],
            "all_up_after_s": round(t_all_up, 1),
            "messages_per_s": round(took / elapsed, 1),
            "refused_per_s": round(refused / elapsed, 1),
            "refused_per_s_by_reason": {
                k: round((v - refused_by_reason(m0).get(k, 0)) / elapsed, 1)
                for k, v in refused_by_reason(m1).items()
                if v - refused_by_reason(m0).get(k, 0) > 0},
            "fleet_cpu_cores": round((cpu1 - cpu0) / elapsed, 3),
            "fleet_decode_cpu_cores": round(decode_cpu / elapsed, 3),
            "fleet_cpu_percent_per_1000_gpu_samples_s":
                round((cpu1 - cpu0) / elapsed * 100 / max(gpu_samples_per_s / 1000, 1e-9), 2),
            "generators_cpu_cores": round((gcpu1 - gcpu0) / elapsed, 3),
            "nats_server_cpu_cores": round((ncpu1 - ncpu0) / elapsed, 3),
            "fleet_rss_mib": round(rss / 2**20, 1),
            "fleet_rss_kib_per_node": round(rss / max(1, a.nodes) / 1024, 1),
            "bus_state_bytes_per_node": round(
                (metric(m1, "gpustream_fleet_bus_state_bytes") or 0) / max(1, a.nodes)),
            "latest_bytes_per_node": round(
                (metric(m1, "gpustream_fleet_latest_bytes") or 0) / max(1, a.nodes)),
            "staleness_ms_p50": round(percentile(lat, 50), 1),
            "staleness_ms_p99": round(percentile(lat, 99), 1),
            "staleness_samples": len(lat),
            "routes": routes,
            "generator_last_lines": gen_lines,
        }
        print(json.dumps(result, indent=1), flush=True)
        return failures
    finally:
        for g, _ in gens:
            try:
                g.stdin.write("quit\n")
                g.stdin.close()
            except OSError:
                pass
        for p in procs:
            if p.poll() is None and p is fleet:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
        nats.kill()
        nats.wait()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--gpustream", required=True)
    p.add_argument("--generator", required=True)
    p.add_argument("--nats-server", default="/usr/sbin/nats-server")
    p.add_argument("--nodes", type=int, default=1000)
    p.add_argument("--processes", type=int, default=2)
    p.add_argument("--threads", type=int, default=2, help="threads per generator process")
    p.add_argument("--stale", type=float, default=5)
    p.add_argument("--window", type=float, default=30)
    p.add_argument("--stale-window", type=float, default=15)
    p.add_argument("--settle", type=float, default=5)
    p.add_argument("--warmup-timeout", type=float, default=120)
    p.add_argument("--requests", type=int, default=5)
    p.add_argument("--level", type=int, default=6, help="the generators' deflate level (agents: 6)")
    p.add_argument("--smoke", action="store_true")
    a = p.parse_args()
    failures = run(a)
    for f in failures:
        print("FAIL:", f, file=sys.stderr)
    sys.exit(1 if (failures and a.smoke) else 0)


if __name__ == "__main__":
    main()
