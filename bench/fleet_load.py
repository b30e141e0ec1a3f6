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
    and bytes, a few requests each;
  - with --scrape-cost N (issue #32, the streamed /metrics): N scrapes of each encoding one
    after another: time to the first body byte, time to the last, the fleet's CPU per scrape
    (each thread's CPU over the scrapes less what it used in as long a time just before, with
    nobody scraping), and the peak RSS over the RSS before them (VmHWM, reset first through
    /proc/PID/clear_refs); and the same with --scrape-slow-readers K clients that read
    1 KiB every 100 ms (the peak RSS they add).

  python3 bench/fleet_load.py --gpustream build/cli/gpustream \\
      --generator build/bench/gpustream_fleet_load_generator --nodes 10000 --processes 2

--views K (issue #32, "splitting a site"): the nodes split in K shards by subject prefix
(gpustream.zone<k>), one generator process and one view (`fleet --subject-prefix
gpustream.zone<k>`) per shard, all on one nats-server; per view: CPU, RSS, decode CPU and
staleness over the same window. With --leaf, each shard's generator and view use a nats-server
of their own joined as a leaf node to a hub server (loopback), and the hub's /varz gives what
crossed the leaf links (nothing subscribes at the hub: ≈ 0 expected); --leaf-global adds a
subscriber to `gpustream.>` at the hub (a central tool), which pulls every shard over its link.

--metrics-compat dcgm: the view writes /metrics' device families under dcgm-exporter's names
(docs/operations.md), so --scrape-cost measures that writer.

--smoke: a short run that checks what it can without timing (every node seen up, the view took
messages, /metrics and /api/v1/nodes answered, gzip'd /metrics decompresses to the identity
families, the --scrape-cost measurement runs once); exits 1 when one fails.
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
from bench_proc import (cpu_seconds, fleet_http, free_port, note_staleness, percentile, rss_bytes,
                        wait_port)

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


def thread_cpu(pid):
    """CPU seconds of each thread of `pid` ({tid: seconds})."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            out[tid] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except OSError:
            pass
    return out


def hwm_reset(pid):
    """Resets the peak RSS (VmHWM) of `pid`; False when this kernel or user may not."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def status_kib(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def scrape_once(url, gzip_ok):
    """(seconds to the first body byte, seconds to the last, bytes)."""
    req = urllib.request.Request(url)
    if gzip_ok:
        req.add_header("Accept-Encoding", "gzip")
    t0 = time.monotonic()
    with urllib.request.urlopen(req, timeout=120) as r:
        first = r.read(1)
        t1 = time.monotonic()
        rest = r.read()
    return t1 - t0, time.monotonic() - t0, len(first) + len(rest)


def slow_reader(host, port, gzip_ok, stop):
    """A scraper that reads 1 KiB every 100 ms until `stop` (or the body's end)."""
    import socket
    s = socket.create_connection((host, port))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    req = f"GET /metrics HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n"
    if gzip_ok:
        req += "Accept-Encoding: gzip\r\n"
    s.sendall((req + "\r\n").encode())
    while not stop.is_set():
        if not s.recv(1024):
            break
        time.sleep(0.1)
    s.close()


def scrape_cost(base, pid, n, slow):
    """--scrape-cost: see the module's docstring."""
    out = {}
    for name, gz in (("identity", False), ("gzip", True)):
        cpu_a = thread_cpu(pid)
        time.sleep(2.0)
        cpu_b = thread_cpu(pid)
        idle_rate = {t: (cpu_b[t] - cpu_a.get(t, cpu_b[t])) / 2.0 for t in cpu_b}
        rss0 = status_kib(pid, "VmRSS")
        can_reset = hwm_reset(pid)
        t0 = time.monotonic()
        ttfb, total, size = [], [], 0
        for _ in range(n):
            f, t, size = scrape_once(base + "/metrics", gz)
            ttfb.append(f * 1000)
            total.append(t * 1000)
        elapsed = time.monotonic() - t0
        cpu_c = thread_cpu(pid)
        excess = sum(max(0.0, cpu_c[t] - cpu_b.get(t, 0.0) - idle_rate.get(t, 0.0) * elapsed)
                     for t in cpu_c)
        hwm = status_kib(pid, "VmHWM")
        out[name] = {
            "scrapes": n, "bytes": size,
            "ttfb_ms_median": round(percentile(ttfb, 50), 1),
            "total_ms_median": round(percentile(total, 50), 1),
            "cpu_ms_per_scrape": round(excess * 1000 / n, 1),
            "rss_before_mib": round(rss0 / 1024, 1),
            "peak_rss_over_before_mib": round((hwm - rss0) / 1024, 1) if can_reset else None,
            "rss_after_mib": round(status_kib(pid, "VmRSS") / 1024, 1),
        }
        if slow > 0:
            host, port = base[len("http://"):].rsplit(":", 1)
            rss1 = status_kib(pid, "VmRSS")
            can_reset = hwm_reset(pid)
            stop = threading.Event()
            readers = [threading.Thread(target=slow_reader, args=(host, int(port), gz, stop),
                                        daemon=True) for _ in range(slow)]
            for r in readers:
                r.start()
            time.sleep(5)
            out[name]["slow_readers"] = slow
            out[name]["slow_readers_peak_rss_over_before_mib"] = (
                round((status_kib(pid, "VmHWM") - rss1) / 1024, 1) if can_reset else None)
            stop.set()
            for r in readers:
                r.join()
    return out


def start_nats(a, config=None, monitor=None):
    """A nats-server on a free loopback port: (process, port)."""
    port = free_port()
    cmd = [a.nats_server, "-a", "127.0.0.1", "-p", str(port)]
    if monitor:
        cmd += ["-m", str(monitor)]
    if config:
        cmd += ["-c", config]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(port)
    return p, port


def compat_args(a):
    """The view's --metrics-compat, when asked for (dcgm: /metrics' devices under dcgm-exporter's
    names)."""
    return ["--metrics-compat", a.metrics_compat] if a.metrics_compat else []


def start_view(a, url, prefix):
    """A `gpustream fleet` on `url` for `prefix`: (process, base URL)."""
    fleet = subprocess.Popen(
        [a.gpustream, "fleet", "--nats", url, "--listen", "127.0.0.1:0", "--kv-bucket", "off",
         "--subject-prefix", prefix, "--stale", str(a.stale), "--gone", str(max(a.stale, 600)),
         "--max-http-connections", "64"] + compat_args(a),
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    base = fleet_http(fleet)
    if not base:
        raise SystemExit("a fleet view did not start")
    return fleet, base


def varz(monitor):
    return get_json(f"http://127.0.0.1:{monitor}/varz")


def staleness(views, nodes_of, seconds):
    """p50/p99 (ms) of time_unix_ns -> visible, per view: 10 sampled nodes each, polled every
    50 ms (all views polled in turn by one thread)."""
    lat = {k: [] for k in range(len(views))}
    seen = {}
    t_end = time.monotonic() + seconds
    while time.monotonic() < t_end:
        for k, (_, base) in enumerate(views):
            for node in nodes_of[k]:
                try:
                    doc = get_json(f"{base}/api/v1/snapshot?node={node}")
                except OSError:
                    continue
                note_staleness(doc, node, seen, lat[k])
        time.sleep(0.05)
    return lat


def raw_subscriber(port, subject, stop, counts):
    """A bare NATS client (the text protocol over a socket) that subscribes to `subject` and
    counts what arrives (bytes read) until `stop`."""
    import socket
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(f"CONNECT {{\"verbose\":false}}\r\nSUB {subject} 1\r\n".encode())
    s.settimeout(0.5)
    pending = b""
    while not stop.is_set():
        try:
            data = s.recv(1 << 16)
        except socket.timeout:
            continue
        if not data:
            break
        counts["bytes"] += len(data)
        pending += data
        if b"PING\r\n" in pending:
            s.sendall(b"PONG\r\n")
        pending = pending[-8:]
    s.close()


def run_split(a):
    """--views K: see the module's docstring."""
    import tempfile
    servers, procs, gens = [], [], []
    failures = []
    tmp = tempfile.mkdtemp(prefix="fleet_load_")
    try:
        hub_monitor = free_port() if a.leaf else None
        if a.leaf:
            leaf_port = free_port()
            conf = os.path.join(tmp, "hub.conf")
            with open(conf, "w") as f:
                f.write(f"leafnodes {{ listen: 127.0.0.1:{leaf_port} }}\n")
            hub, hub_port = start_nats(a, conf, hub_monitor)
            servers.append(hub)
        else:
            hub, hub_port = start_nats(a)
            servers.append(hub)
        urls = []
        for k in range(a.views):
            if a.leaf:
                conf = os.path.join(tmp, f"leaf{k}.conf")
                with open(conf, "w") as f:
                    f.write("leafnodes { remotes = [ { url: \"nats-leaf://127.0.0.1:%d\" } ] }\n"
                            % leaf_port)
                leaf, port = start_nats(a, conf)
                servers.append(leaf)
                urls.append(f"nats://127.0.0.1:{port}")
            else:
                urls.append(f"nats://127.0.0.1:{hub_port}")
        if a.leaf:
            deadline = time.monotonic() + 20
            while varz(hub_monitor).get("leafnodes", 0) < a.views and time.monotonic() < deadline:
                time.sleep(0.2)
        stop_global = threading.Event()
        global_counts = {"bytes": 0}
        if a.leaf and a.leaf_global:
            threading.Thread(target=raw_subscriber,
                             args=(hub_port, "gpustream.>", stop_global, global_counts),
                             daemon=True).start()
        views, nodes_of = [], []
        for k in range(a.views):
            fleet, base = start_view(a, urls[k], f"gpustream.zone{k}")
            procs.append(fleet)
            views.append((fleet, base))
        t_start = time.monotonic()
        for k in range(a.views):
            lo = 1 + a.nodes * k // a.views
            hi = 1 + a.nodes * (k + 1) // a.views
            nodes_of.append([f"load-{i:05d}" for i in range(lo, hi, max(1, (hi - lo) // 10))][:10])
            g = subprocess.Popen(
                [a.generator, "--nats", urls[k], "--nodes", str(hi - lo), "--first", str(lo),
                 "--threads", str(a.threads), "--gpus", str(GPUS), "--level", str(a.level),
                 "--prefix", f"gpustream.zone{k}"],
                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                text=True)
            procs.append(g)
            gens.append(g)
        share = [(1 + a.nodes * (k + 1) // a.views) - (1 + a.nodes * k // a.views)
                 for k in range(a.views)]
        deadline = time.monotonic() + a.warmup_timeout
        ups = [0] * a.views
        while time.monotonic() < deadline:
            ups = [get_json(f"{base}/api/v1/nodes")["up"] for _, base in views]
            if all(u >= n for u, n in zip(ups, share)):
                break
            time.sleep(0.5)
        t_all_up = time.monotonic() - t_start
        if any(u < n for u, n in zip(ups, share)):
            failures.append(f"views up {ups} of {share} after {a.warmup_timeout} s")
        time.sleep(a.settle)
        m0 = [fetch(f"{base}/metrics")[0].decode() for _, base in views]
        cpu0 = [cpu_seconds(f.pid) for f, _ in views]
        v0 = varz(hub_monitor) if a.leaf else None
        g0 = global_counts["bytes"]
        load0 = os.getloadavg()
        t0 = time.monotonic()
        time.sleep(a.window)
        elapsed = time.monotonic() - t0
        cpu1 = [cpu_seconds(f.pid) for f, _ in views]
        v1 = varz(hub_monitor) if a.leaf else None
        g1 = global_counts["bytes"]
        stop_global.set()
        m1 = [fetch(f"{base}/metrics")[0].decode() for _, base in views]
        lat = staleness(views, nodes_of, a.stale_window)
        per_view = []
        for k, (f, base) in enumerate(views):
            took = (metric(m1[k], "gpustream_fleet_messages_total")
                    - metric(m0[k], "gpustream_fleet_messages_total"))
            refused = refused_total(m1[k]) - refused_total(m0[k])
            decode = (metric(m1[k], "gpustream_fleet_decode_cpu_seconds_total")
                      - metric(m0[k], "gpustream_fleet_decode_cpu_seconds_total"))
            gps = (took - refused) * GPUS / elapsed
            rss = rss_bytes(f.pid)
            per_view.append({
                "nodes": share[k], "subject_prefix": f"gpustream.zone{k}",
                "messages_per_s": round(took / elapsed, 1),
                "refused_per_s": round(refused / elapsed, 1),
                "cpu_cores": round((cpu1[k] - cpu0[k]) / elapsed, 3),
                "decode_cpu_cores": round(decode / elapsed, 3),
                "cpu_percent_per_1000_gpu_samples_s":
                    round((cpu1[k] - cpu0[k]) / elapsed * 100 / max(gps / 1000, 1e-9), 2),
                "rss_mib": round(rss / 2**20, 1),
                "rss_kib_per_node": round(rss / max(1, share[k]) / 1024, 1),
                "staleness_ms_p50": round(percentile(lat[k], 50), 1),
                "staleness_ms_p99": round(percentile(lat[k], 99), 1),
                "staleness_samples": len(lat[k]),
            })
        result = {
            "nodes": a.nodes, "views": a.views, "leaf_nodes": a.leaf,
            "window_s": round(elapsed, 1),
            "load_average_before_window": [round(x, 2) for x in load0],
            "load_average_after": [round(x, 2) for x in os.getloadavg()],
            "all_up_after_s": round(t_all_up, 1),
            "per_view": per_view,
        }
        if a.leaf:
            result["hub"] = {
                "leafnodes": v1.get("leafnodes"),
                "in_msgs_per_s": round((v1["in_msgs"] - v0["in_msgs"]) / elapsed, 1),
                "in_bytes_per_s": round((v1["in_bytes"] - v0["in_bytes"]) / elapsed, 1),
                "out_msgs_per_s": round((v1["out_msgs"] - v0["out_msgs"]) / elapsed, 1),
                "out_bytes_per_s": round((v1["out_bytes"] - v0["out_bytes"]) / elapsed, 1),
                "global_subscriber": a.leaf_global,
                "global_subscriber_bytes_per_s": round((g1 - g0) / elapsed, 1),
            }
        print(json.dumps(result, indent=1), flush=True)
        return failures
    finally:
        for g in gens:
            try:
                g.stdin.write("quit\n")
                g.stdin.close()
            except OSError:
                pass
        for f, _ in [(p, None) for p in procs if p not in gens]:
            if f.poll() is None:
                f.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
        for srv in servers:
            srv.kill()
            srv.wait()


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
             "--max-http-connections", "64"] + compat_args(a),
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        procs.append(fleet)
        base = fleet_http(fleet)
        if not base:
            raise SystemExit("the fleet did not start")
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
                    note_staleness(doc, node, seen, lat)
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
        # --smoke runs the scrape measurement once (one scrape, one slow reader) so it cannot
        # rot; nothing about its figures is asserted.
        n_scrapes = a.scrape_cost or (1 if a.smoke else 0)
        n_slow = a.scrape_slow_readers or (1 if a.smoke else 0)
        scrapes = scrape_cost(base, fleet.pid, n_scrapes, n_slow) if n_scrapes > 0 else None
        if scrapes and any(v["bytes"] <= 0 for v in scrapes.values()):
            failures.append("a /metrics scrape of --scrape-cost came back empty")
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
            "scrape_cost": scrapes,
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
    p.add_argument("--scrape-cost", type=int, default=0, metavar="N",
                   help="N /metrics scrapes of each encoding: time to first byte, CPU and peak "
                        "RSS per scrape")
    p.add_argument("--scrape-slow-readers", type=int, default=0, metavar="K",
                   help="with --scrape-cost: K scrapers reading 1 KiB every 100 ms for 5 s")
    p.add_argument("--metrics-compat", default=None, metavar="MODE",
                   help="the view's --metrics-compat (dcgm: /metrics under dcgm-exporter's "
                        "names)")
    p.add_argument("--smoke", action="store_true")
    p.add_argument("--views", type=int, default=1,
                   help="split the nodes over this many views by subject prefix")
    p.add_argument("--leaf", action="store_true",
                   help="with --views: each shard on a nats-server of its own, a leaf node of a "
                        "hub")
    p.add_argument("--leaf-global", action="store_true",
                   help="with --leaf: a subscriber to gpustream.> at the hub")
    a = p.parse_args()
    failures = run_split(a) if a.views > 1 else run(a)
    for f in failures:
        print("FAIL:", f, file=sys.stderr)
    sys.exit(1 if (failures and a.smoke) else 0)


if __name__ == "__main__":
    main()
