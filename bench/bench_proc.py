"""Helpers the bench/ scripts share: loopback ports, a process's CPU and RSS from /proc,
percentiles, and the staleness of a fleet view's snapshots (bench/fleet_bench.py,
bench/fleet_load.py, bench/tls_bench.py)."""
import os
import socket
import threading
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, timeout=20):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"port {port} not open")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def percentile(values, p):
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


def note_staleness(doc, node, seen, lat):
    """One `/api/v1/snapshot?node=NODE` answer of a fleet view: appends to `lat` the age in ms of
    each snapshot newer than the last one seen of its (node, probe); the first sighting of a
    (node, probe) only sets `seen` (its age says when polling began, not how stale it is)."""
    now = time.time_ns()
    for s in doc["snapshots"]:
        key = (node, s["probe"])
        if seen.get(key) != s["time_unix_ns"] and s["devices"]:
            if key in seen:
                lat.append((now - s["time_unix_ns"]) / 1e6)
            seen[key] = s["time_unix_ns"]


def fleet_http(proc):
    """The http://HOST:PORT a `gpustream fleet` started with stdout=PIPE says it listens on
    (its "listening http" line); the rest of its stdout is drained so it never blocks. None when
    it ended without saying one."""
    for line in proc.stdout:
        if line.startswith("listening http"):
            threading.Thread(target=proc.stdout.read, daemon=True).start()
            return "http://" + line.split()[2]
    return None
