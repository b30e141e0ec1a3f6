"""Bounded soak/abuse test of `gpustream serve` on loopback (issue 11).

Starts `gpustream serve --simulate 8 --interval 0.05 --tcp 127.0.0.1:0` (20 Hz) and, for
--duration seconds, runs hundreds of WebSocket and TCP clients against it: lossless readers that
account for every sequence number, readers with random filters and projections that resubscribe,
and hostile ones (unique 245-byte device-id lists just under the message limit, 1 MiB messages,
endless lines, 20000 repeated `auth` lines, 100000 empty lines, garbage and invalid UTF-8,
half-closed TCP, stalled readers with a 4 KiB receive buffer, idle sockets, connect/disconnect
churn, half-sent HTTP requests), plus a burst of held connections to press on the connection
limits. Client source addresses are spread over 127.0.0.2..127.0.0.N; lossless clients use
127.0.0.1. A separate process scrapes /metrics on a fresh connection every 0.2 s.

Pass (exit 0): the server lives; its VmRSS after warm-up stays under --rss-budget-mib; every
lossless client sees each sequence number once, in order, or an exact `gap` for it; no /metrics
scrape fails and their p99 latency is under --metrics-p99-ms (a generous bound: it catches a
lock-out, the figure itself goes to docs/benchmarks.md); `promtool check metrics` accepts a
scrape taken under load; SIGTERM ends the server with exit 0 within 10 s. Otherwise FAIL lines
and exit 1. The test stops by itself (watchdog: duration + 45 s) and always kills its server.

Short variant (ctest integration.soak_short): --duration 35. Long variant (by hand, see
docs/testing.md): --duration 600 --clients 2000 --pressure 400.
"""
import argparse
import asyncio
import collections
import json
import multiprocessing
import os
import random
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_helper import Server  # noqa: E402

try:
    import websockets  # noqa: F401
except ImportError:
    print("FAIL: python3-websockets is missing: run with /usr/bin/python3 and install the Debian "
          "package 'python3-websockets' (scripts/deps.sh test does)", flush=True)
    sys.exit(1)
import soak_clients as tcp  # noqa: E402
import soak_clients_ws as ws  # noqa: E402

# name -> (coroutine, weight in the random mix)
BEHAVIOURS = {
    "filtered_tcp": (tcp.filtered_tcp, 10),
    "filtered_ws": (ws.filtered_ws, 10),
    "device_flood_tcp": (tcp.device_flood_tcp, 4),
    "device_flood_ws": (ws.device_flood_ws, 4),
    "half_close_tcp": (tcp.half_close_tcp, 3),
    "huge_tcp": (tcp.huge_tcp, 2),
    "endless_tcp": (tcp.endless_tcp, 1),
    "spam_tcp": (tcp.spam_tcp, 3),
    "huge_ws": (ws.huge_ws, 2),
    "garbage_ws": (ws.garbage_ws, 3),
    "stalled_tcp": (tcp.stalled_tcp, 6),
    "stalled_ws": (ws.stalled_ws, 6),
    "idle_tcp": (tcp.idle_tcp, 6),
    "churn_tcp": (tcp.churn_tcp, 4),
    "churn_ws": (ws.churn_ws, 4),
    "slowloris_http": (ws.slowloris_http, 2),
}
# Held in bulk at once to put the connection limits under pressure.
PRESSURE = [tcp.idle_tcp, tcp.stalled_tcp, ws.stalled_ws]

PROMTOOL = "/usr/bin/promtool"
EXPECTED = (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError,
            websockets.exceptions.WebSocketException)


class Stats:
    def __init__(self):
        self.connections = collections.Counter()
        self.messages = 0
        self.bytes = 0
        self.notes = collections.Counter()
        self.outcomes = collections.defaultdict(collections.Counter)
        self.active = 0
        self.peak_active = 0
        self.bugs = []

    def opened(self, transport):
        self.connections[transport] += 1

    def received(self, n):
        self.messages += 1
        self.bytes += n

    def note(self, key, n=1):
        self.notes[key] += n


class Soak:
    def __init__(self, args, server, hello):
        self.args = args
        self.stats = Stats()
        self.ledgers = []
        host, port = server.http.rsplit(":", 1)
        self.http_addr = (host, int(port))
        host, port = server.tcp.rsplit(":", 1)
        self.tcp_addr = (host, int(port))
        self.ws_uri = f"ws://{server.http}/ws"
        self.devices = [d["id"] for d in hello["devices"]]
        self.probes = sorted({p["name"] for p in hello["probes"]})
        self.max_message_bytes = 65536
        self.lossless_addr = "127.0.0.1"
        self._addr = 0
        self._seed = random.Random(args.seed)

    def next_addr(self):
        self._addr = self._addr % self.args.addresses + 1
        return f"127.0.0.{self._addr + 1}"

    def rng(self):
        return random.Random(self._seed.random())


def metrics_poller(addr, interval, stop, conn):
    """Own process, so that the clients' CPU use does not delay the measurement."""
    samples, body_under_load, peak = [], None, collections.Counter()
    while not stop.is_set():
        t0 = time.monotonic()
        try:
            with socket.create_connection(addr, timeout=10) as s:
                s.sendall(f"GET /metrics HTTP/1.1\r\nHost: {addr[0]}:{addr[1]}\r\n"
                          "Connection: close\r\n\r\n".encode())
                chunks = []
                while True:
                    c = s.recv(65536)
                    if not c:
                        break
                    chunks.append(c)
            dt = time.monotonic() - t0
            data = b"".join(chunks)
            status = int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/1.1 ") else 0
            samples.append((t0, dt, status))
            if status == 200:
                body = data.split(b"\r\n\r\n", 1)[1].decode()
                body_under_load = body
                for line in body.splitlines():
                    if line.startswith("gpustream_server_connections{"):
                        name, value = line.rsplit(" ", 1)
                        peak[name] = max(peak[name], int(float(value)))
        except OSError as e:
            dt = time.monotonic() - t0
            samples.append((t0, dt, type(e).__name__))
        stop.wait(max(0.0, interval - dt))
    conn.send((samples, body_under_load, dict(peak)))


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


async def client(soak, name, coro, lifetime):
    soak.stats.active += 1
    soak.stats.peak_active = max(soak.stats.peak_active, soak.stats.active)
    try:
        outcome = await coro(soak, lifetime)
    except websockets.exceptions.InvalidStatusCode as e:
        outcome = f"http_{e.status_code}"
    except EXPECTED as e:
        outcome = type(e).__name__
    except asyncio.CancelledError:
        outcome = "cancelled"
    except Exception as e:  # noqa: BLE001 — a bug of the test or a protocol violation
        outcome = "bug"
        soak.stats.bugs.append(f"{name}: {type(e).__name__}: {e}")
    finally:
        soak.stats.active -= 1
    soak.stats.outcomes[name][outcome] += 1
    if name.startswith("lossless") and outcome not in ("ok", "violations"):
        soak.ledgers.append((name, outcome))


async def drive(soak, abort):
    a = soak.args
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    tasks = []
    spawn = lambda name, coro, life: tasks.append(  # noqa: E731
        asyncio.ensure_future(client(soak, name, coro, life)))
    for i in range(a.lossless):
        name, coro = (("lossless_ws", ws.lossless_ws) if i % 2 == 0
                      else ("lossless_tcp", tcp.lossless_tcp))
        spawn(name, coro, a.duration - 3)
    rng = random.Random(a.seed + 1)
    names = list(BEHAVIOURS)
    weights = [BEHAVIOURS[n][1] for n in names]
    window = 0.75 * a.duration
    pressure_at, pressure_done = 0.3 * a.duration, False
    for i in range(a.clients):
        at = t0 + 1 + i * window / a.clients
        while loop.time() < at:
            if abort.is_set():
                break
            if not pressure_done and loop.time() - t0 >= pressure_at:
                pressure_done = True
                for j in range(a.pressure):
                    coro = PRESSURE[j % len(PRESSURE)]
                    spawn("pressure_" + coro.__name__, coro, 0.4 * a.duration)
            await asyncio.sleep(min(0.05, max(0.0, at - loop.time())))
        if abort.is_set():
            break
        name = rng.choices(names, weights)[0]
        coro = BEHAVIOURS[name][0]
        left = t0 + a.duration - 2 - loop.time()
        spawn(name, coro, rng.uniform(min(2.0, left), max(2.0, min(a.duration / 3, left))))
    while loop.time() < t0 + a.duration and not abort.is_set():
        await asyncio.sleep(0.1)
    done, pending = await asyncio.wait(tasks, timeout=15)
    for t in pending:
        t.cancel()
    if pending:
        await asyncio.wait(pending, timeout=5)
    return len(pending)


def percentile(values, q):
    if not values:
        return None
    v = sorted(values)
    return v[min(len(v) - 1, max(0, int(round(q * len(v) + 0.5)) - 1))]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--serve", required=True, help="the serve command, e.g. '/path/gpustream serve'")
    p.add_argument("--duration", type=float, default=35)
    p.add_argument("--clients", type=int, default=300, help="clients of the random mix")
    p.add_argument("--pressure", type=int, default=200, help="connections held at once")
    p.add_argument("--lossless", type=int, default=6)
    p.add_argument("--addresses", type=int, default=32, help="source addresses 127.0.0.2..")
    p.add_argument("--rss-budget-mib", type=float, default=192, help="0: report only")
    p.add_argument("--rss-hard-cap-mib", type=float, default=1536, help="abort above this")
    p.add_argument("--warm-up", type=float, default=5)
    p.add_argument("--metrics-p99-ms", type=float, default=2000)
    p.add_argument("--seed", type=int, default=11)
    p.add_argument("--json-out", help="write the figures here")
    p.add_argument("serve_args", nargs="*", help="more `serve` flags (after --)")
    a = p.parse_args()

    server = Server(a.serve, "--simulate", "8", "--interval", "0.05", "--listen", "127.0.0.1:0",
                    "--tcp", "127.0.0.1:0", *a.serve_args)
    failures = []
    watchdog = threading.Timer(a.duration + 45, lambda: (
        print("FAIL: the soak did not finish within its time bound; killing the server", flush=True),
        server.kill(), os._exit(1)))
    watchdog.daemon = True
    watchdog.start()
    poller = None
    try:
        hello = {}
        for _ in range(100):  # the first sample may not have been taken yet
            hello = json.loads(socket_line(server.tcp))
            if len(hello.get("devices", [])) >= 8:
                break
            time.sleep(0.1)
        soak = Soak(a, server, hello)
        abort = threading.Event()
        rss = []
        begin = time.monotonic()

        def sample_rss():
            while not abort.is_set() and server.proc.poll() is None:
                kib = rss_kib(server.proc.pid)
                if kib is not None:
                    rss.append((time.monotonic(), kib))
                    if kib > a.rss_hard_cap_mib * 1024:
                        failures.append(f"server RSS reached {kib / 1024:.0f} MiB, above the hard "
                                        f"cap of {a.rss_hard_cap_mib:.0f} MiB after "
                                        f"{time.monotonic() - begin:.1f} s: server killed, "
                                        "run aborted")
                        server.kill()  # before it takes the machine's memory
                        abort.set()
                time.sleep(0.1)
        threading.Thread(target=sample_rss, daemon=True).start()

        stop = multiprocessing.Event()
        parent, child = multiprocessing.Pipe()
        poller = multiprocessing.Process(target=metrics_poller,
                                         args=(soak.http_addr, 0.2, stop, child), daemon=True)
        poller.start()
        start = time.monotonic()
        stuck = asyncio.run(drive(soak, abort))
        stop.set()
        samples, body, peak_conns = parent.recv() if parent.poll(20) else ([], None, {})
        abort.set()
        if stuck:
            failures.append(f"{stuck} client(s) did not finish 15 s after the end")
        if server.proc.poll() is not None and not abort_killed(failures):
            failures.append(f"the server died during the soak (exit {server.proc.returncode})")
        report = judge(a, soak, samples, body, peak_conns, rss, start, failures)
    finally:
        if poller is not None and poller.is_alive():
            poller.terminate()
    if server.proc.poll() is None:
        server.proc.terminate()  # SIGTERM: a clean exit is a criterion
        try:
            rc = server.proc.wait(timeout=10)
            if rc != 0:
                failures.append(f"the server exited with {rc} after SIGTERM")
        except subprocess.TimeoutExpired:
            failures.append("the server did not exit within 10 s of SIGTERM")
            server.kill()
    watchdog.cancel()
    report["server_stderr_lines"] = len(server.stderr)
    report["failures"] = failures
    print(json.dumps(report, indent=1, sort_keys=True), flush=True)
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump(report, f, indent=1, sort_keys=True)
    if failures:
        tail = "".join(server.stderr[-20:])
        for f in failures:
            print("FAIL:", f, flush=True)
        print("server stderr (last 20 lines):\n" + tail, flush=True)
        sys.exit(1)
    print(f"PASS: {report['connections_total']} connections, {report['client_messages']} messages, "
          f"peak RSS {report['rss_peak_mib']} MiB, /metrics p99 {report['metrics_p99_ms']} ms",
          flush=True)


def abort_killed(failures):
    return any("run aborted" in f for f in failures)


def socket_line(tcp):
    host, port = tcp.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        buf = b""
        while b"\n" not in buf:
            c = s.recv(65536)
            if not c:
                break
            buf += c
    return buf.split(b"\n", 1)[0]


def judge(a, soak, samples, body, peak_conns, rss, start, failures):
    st = soak.stats
    warm = [kib for t, kib in rss if t >= start + a.warm_up]
    peak = max(warm) if warm else None
    lat = [dt * 1000 for _, dt, status in samples if status == 200]
    bad = [(round(t - start, 1), status) for t, _, status in samples if status != 200]
    report = {
        "duration_s": a.duration, "seed": a.seed,
        "connections": dict(st.connections), "connections_total": sum(st.connections.values()),
        "peak_client_tasks": st.peak_active, "server_open_connections_peak": peak_conns,
        "client_messages": st.messages, "client_bytes": st.bytes, "notes": dict(st.notes),
        "outcomes": {k: dict(v) for k, v in sorted(st.outcomes.items())},
        "rss_start_mib": round(rss[0][1] / 1024, 1) if rss else None,
        "rss_peak_mib": round(peak / 1024, 1) if peak else None,
        "rss_end_mib": round(rss[-1][1] / 1024, 1) if rss else None,
        "metrics_scrapes": len(samples), "metrics_failed": bad[:20],
        "metrics_p50_ms": round(percentile(lat, 0.5), 1) if lat else None,
        "metrics_p99_ms": round(percentile(lat, 0.99), 1) if lat else None,
        "metrics_max_ms": round(max(lat), 1) if lat else None,
        "metrics_slow_over_1s": [(round(t - start, 1), round(dt, 2)) for t, dt, status in samples
                                 if status == 200 and dt > 1.0][:30],
        "lossless": [{"transport": tr, "snapshots": l.snapshots, "gaps": l.gaps,
                      "missed": l.missed, "violations": l.violations[:5]}
                     for tr, l in soak.ledgers if not isinstance(l, str)],
    }
    if a.rss_budget_mib > 0 and peak and peak > a.rss_budget_mib * 1024:
        failures.append(f"server RSS after warm-up peaked at {peak / 1024:.0f} MiB, over the "
                        f"budget of {a.rss_budget_mib:.0f} MiB")
    for tr, ledger in soak.ledgers:
        if isinstance(ledger, str):
            failures.append(f"a lossless client ({tr}) ended with '{ledger}'")
            continue
        if ledger.violations:
            failures.append(f"lossless {tr} client: {len(ledger.violations)} violation(s), first: "
                            f"{ledger.violations[:3]}")
        if ledger.snapshots < a.duration:
            failures.append(f"lossless {tr} client received only {ledger.snapshots} snapshots")
    if not samples:
        failures.append("no /metrics scrape was made")
    if bad:
        failures.append(f"{len(bad)} /metrics scrape(s) failed (seconds into the run, status): "
                        f"{bad[:10]}")
    p99 = report["metrics_p99_ms"]
    if p99 is not None and p99 > a.metrics_p99_ms:
        failures.append(f"/metrics p99 latency {p99} ms is over {a.metrics_p99_ms} ms")
    if st.bugs:
        failures.append(f"{len(st.bugs)} client(s) failed unexpectedly: {st.bugs[:5]}")
    if st.notes.get("cut_lines"):
        failures.append(f"{st.notes['cut_lines']} TCP line(s) cut mid-message")
    disorder = {k: v for k, v in st.notes.items() if k.startswith("out_of_order_")}
    if disorder:
        failures.append(f"snapshots out of order within a subscription: {disorder}")
    if body is None:
        failures.append("no /metrics body to check with promtool")
    elif not os.access(PROMTOOL, os.X_OK):
        failures.append(f"{PROMTOOL} is missing: install the Debian package 'prometheus'")
    else:
        r = subprocess.run([PROMTOOL, "check", "metrics"], input=body, capture_output=True,
                           text=True, timeout=30)
        if r.returncode != 0:
            failures.append("promtool check metrics refused /metrics under load: "
                            + (r.stdout + r.stderr).strip()[:500])
    return report


if __name__ == "__main__":
    main()
