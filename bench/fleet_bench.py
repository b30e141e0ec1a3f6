#!/usr/bin/env python3
"""The fleet on one machine, as a simulation of a large fleet (docs/fleet.md, docs/benchmarks.md).

Starts one `nats-server -js` (scratch store, loopback, monitoring port), N headless agents
(`gpustream serve --listen off --nats URL --node bench-K --simulate 8 --probes simulated
--interval 1`) and one `gpustream fleet`, lets them run, then measures:

  - bytes per GPU-sample on the bus: nats-server's in_bytes over the window (bus messages and
    key-value puts) / (N x 8 x samples per second x window);
  - fleet CPU per 1,000 GPU-samples a second (utime+stime of the fleet process over the window);
  - fleet RSS per node;
  - staleness: time_unix_ns of a snapshot to its visibility in /api/v1/snapshot?node=X (polled
    every 20 ms for a sample of nodes; the polling adds up to 20 ms), p50 / p99;
  - the time a newly started fleet view takes to show every node (the key-value bucket).

  python3 bench/fleet_bench.py --gpustream build/cli/gpustream --agents 10 100 500
  python3 bench/fleet_bench.py --gpustream build/cli/gpustream --agents 10 --encoding json
"""
import argparse
import json
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import urllib.request
from bench_proc import free_port, wait_port, cpu_seconds, rss_bytes, percentile, note_staleness

NATS_SERVER = "/usr/sbin/nats-server"
GPUS = 8


def get_json(url):
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.loads(r.read())


def start_fleet(gpustream, url, stale=5):
    proc = subprocess.Popen([gpustream, "fleet", "--nats", url, "--listen", "127.0.0.1:0",
                             "--stale", str(stale), "--max-http-connections", "256"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    t0 = time.monotonic()
    for line in proc.stdout:
        if line.startswith("listening http"):
            return proc, line.split()[2], t0
    raise SystemExit("the fleet did not start")


def run(gpustream, n, encoding, window, settle):
    store = tempfile.mkdtemp(prefix="gpustream-bench-js-")
    port, mon = free_port(), free_port()
    nats = subprocess.Popen([NATS_SERVER, "-js", "-sd", store, "-a", "127.0.0.1", "-p", str(port),
                             "-m", str(mon)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    agents = []
    fleet = second = None
    try:
        wait_port(port)
        url = f"nats://127.0.0.1:{port}"
        for k in range(n):
            agents.append(subprocess.Popen(
                [gpustream, "serve", "--listen", "off", "--nats", url, "--node", f"bench-{k}",
                 "--simulate", str(GPUS), "--probes", "simulated", "--interval", "1",
                 "--nats-encoding", encoding], stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL))
            if k % 50 == 49:
                time.sleep(0.5)  # stagger the start-up
        fleet, http, _ = start_fleet(gpustream, url)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            nodes = get_json(f"http://{http}/api/v1/nodes")
            if nodes["up"] == n:
                break
            time.sleep(0.5)
        time.sleep(settle)

        # Staleness: poll a sample of nodes while the window runs.
        lat = []
        stop = threading.Event()
        sample_nodes = [f"bench-{k}" for k in range(0, n, max(1, n // 10))][:10]

        def poll():
            seen = {}
            while not stop.is_set():
                for node in sample_nodes:
                    try:
                        doc = get_json(f"http://{http}/api/v1/snapshot?node={node}")
                    except OSError:
                        continue
                    note_staleness(doc, node, seen, lat)
                time.sleep(0.02)

        # Window 1: the bus and the fleet's own cost (no client polling it).
        varz0 = get_json(f"http://127.0.0.1:{mon}/varz")
        cpu0, t0 = cpu_seconds(fleet.pid), time.monotonic()
        time.sleep(window)
        cpu1, t1 = cpu_seconds(fleet.pid), time.monotonic()
        varz1 = get_json(f"http://127.0.0.1:{mon}/varz")
        # Window 2: staleness, polled.
        poller = threading.Thread(target=poll, daemon=True)
        poller.start()
        time.sleep(min(window, 15))
        stop.set()
        poller.join()
        elapsed = t1 - t0
        gpu_samples = n * GPUS * elapsed  # 1 Hz
        bus_bytes = varz1["in_bytes"] - varz0["in_bytes"]
        msgs = varz1["in_msgs"] - varz0["in_msgs"]
        rss = rss_bytes(fleet.pid)
        cpu_per_k = (cpu1 - cpu0) / elapsed / (gpu_samples / elapsed / 1000) * 100

        # A new fleet view: time to show every node.
        second, http2, t_start = start_fleet(gpustream, url)
        while get_json(f"http://{http2}/api/v1/nodes")["up"] + get_json(
                f"http://{http2}/api/v1/nodes")["stale"] < n:
            time.sleep(0.02)
        t_all = time.monotonic() - t_start
        agent_cpu = sum(cpu_seconds(a.pid) for a in agents[:10]) / min(10, n)
        agent_rss = sum(rss_bytes(a.pid) for a in agents[:10]) / min(10, n)
        return {
            "agents": n, "encoding": encoding, "window_s": round(elapsed, 1),
            "bus_bytes_per_gpu_sample": round(bus_bytes / gpu_samples, 1),
            "bus_msgs_per_s": round(msgs / elapsed, 1),
            "fleet_cpu_percent_per_1000_gpu_samples_s": round(cpu_per_k, 2),
            "fleet_rss_mib": round(rss / 2**20, 1),
            "fleet_rss_kib_per_node": round(rss / n / 1024, 1),
            "staleness_ms_p50": round(percentile(lat, 50), 1),
            "staleness_ms_p99": round(percentile(lat, 99), 1),
            "staleness_samples": len(lat),
            "new_view_all_nodes_s": round(t_all, 3),
            "agent_cpu_s_total_avg": round(agent_cpu, 2),
            "agent_rss_mib_avg": round(agent_rss / 2**20, 1),
        }
    finally:
        for p in [fleet, second] + agents:
            if p and p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in [fleet, second] + agents:
            if p:
                try:
                    p.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    p.kill()
        nats.kill()
        nats.wait()
        shutil.rmtree(store, ignore_errors=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--gpustream", required=True)
    p.add_argument("--agents", type=int, nargs="+", default=[10, 100, 500])
    p.add_argument("--encoding", default="compact", choices=["compact", "json"])
    p.add_argument("--window", type=float, default=30)
    p.add_argument("--settle", type=float, default=5)
    args = p.parse_args()
    for n in args.agents:
        print(json.dumps(run(args.gpustream, n, args.encoding, args.window, args.settle)),
              flush=True)


if __name__ == "__main__":
    main()
