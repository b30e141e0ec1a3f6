"""The fleet's soak with a hostile publisher (issue #27), against a real `nats-server -js` on
loopback: one well-behaved agent (`gpustream serve --listen off --nats URL --node good`), a
`gpustream fleet`, and a raw NATS publisher that sends what a compromised node could:

  - a key-value bucket holding 4 keys x 64 deflate bombs, before the fleet starts: the fleet
    must listen at once (it read and decoded the bucket before listening: 63 s);
  - deflate bombs (8 KB inflating to 8 MiB), with an honest and with a lying body size;
  - one big base, then hundreds of tiny deltas against it;
  - a snapshot of 62,000 minimal devices in one small message;
  - a replay of the good agent's own stream with sequence 2^64-1 and forged values;
  - messages whose header names another node than their subject;
  - a flood of new node names past --max-nodes;
  - garbage.

While they run, every 0.2 s: /healthz answers (90 % within 100 ms, every one within 1 s:
an io thread the attacks stall answers every probe late, while one late answer on a 2-core
machine shared with other tests is the scheduler's), the good node is `up` and heard
within its stale bound, and its snapshot is current (never the forged one). At the end: the
fleet's CPU and RSS stayed within the stated bounds, /metrics counts each refusal with its
reason. Exit 0 on success, 1 with a FAIL line otherwise."""
import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_helper import (Server, fail, free_port, http_get, http_ok,  # noqa: E402
                          require_executable)
from nats_helper import NATS_SERVER, start_nats  # noqa: E402
from nats_raw import RawNats, create_kv_bucket  # noqa: E402

STALE_S = 2.0
HEALTHZ_BOUND_S = 0.100
MAX_NODES = 40
CLK_TCK = os.sysconf("SC_CLK_TCK")


def deflate(data):
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    return c.compress(data) + c.flush()


def inflate(data):
    return zlib.decompress(data, -15)


def bus_message(kind, node, probe, epoch, seq, base, body, compress=True, declared=None,
                agent="gpustream/hostile"):
    payload = deflate(body) if compress else body
    size = len(body) if declared is None else declared
    header = (f"GSB1 {kind} {'z' if compress else 'p'} {node} {probe} {epoch} {seq} {base} "
              f"{size} {agent}\n")
    return header.encode() + payload


def parse_bus(message):
    head, body = message.split(b"\n", 1)
    f = head.decode().split(" ")
    h = {"full": f[1] == "f", "compressed": f[2] == "z", "node": f[3], "probe": f[4],
         "epoch": f[5], "seq": int(f[6]), "base": int(f[7]), "body_bytes": int(f[8])}
    return h, (inflate(body) if h["compressed"] else body)


def node_state(states):
    return ("GSK1 %d\n" % len(states)).encode() + b"".join(
        b"%d\n" % len(m) + m for m in states)


def proc_cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def proc_rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


class Monitor(threading.Thread):
    """Samples the fleet every 0.2 s from its own thread while the attacks run."""

    def __init__(self, fleet):
        super().__init__(daemon=True)
        self.fleet = fleet
        self.stop = threading.Event()
        self.healthz = []   # seconds per /healthz
        self.problems = []  # what went wrong, with when
        self.samples = 0
        self.t0 = time.monotonic()

    def problem(self, text):
        self.problems.append(f"t={time.monotonic() - self.t0:.1f}s: {text}")

    def run(self):
        while not self.stop.wait(0.2):
            t = time.monotonic()
            try:
                status, _ = http_get(self.fleet.http, "/healthz", timeout=2)
            except OSError as e:
                self.problem(f"/healthz: {e}")
                continue
            took = time.monotonic() - t
            self.healthz.append(took)
            if status != 200:
                self.problem(f"/healthz answered {status}")
            if took > 10 * HEALTHZ_BOUND_S:
                self.problem(f"/healthz took {took * 1000:.0f} ms (bound for any answer: "
                             f"{10 * HEALTHZ_BOUND_S * 1000:.0f} ms)")
            try:
                _, body = http_get(self.fleet.http, "/api/v1/nodes", timeout=5)
                nodes = {n["node"]: n for n in json.loads(body)["nodes"]}
                _, body = http_get(self.fleet.http, "/api/v1/snapshot?node=good", timeout=5)
                snaps = json.loads(body)["snapshots"]
            except (OSError, ValueError, KeyError) as e:
                self.problem(f"the fleet API: {e}")
                continue
            self.samples += 1
            good = nodes.get("good")
            if not good or good.get("state") != "up":
                self.problem(f"the good node is not up: {good}")
                continue
            now_ns = time.time_ns()
            heard_age = (now_ns - int(good.get("last_heard_unix_ns", 0))) / 1e9
            if heard_age > STALE_S:
                self.problem(f"the good node was last heard {heard_age:.1f} s ago")
            for s in snaps:
                age = (now_ns - int(s.get("time_unix_ns", 0))) / 1e9
                names = [d.get("name", "") for d in s.get("devices", [])]
                if any("FORGED" in n for n in names):
                    self.problem(f"the good node shows forged values: {names}")
                if age > STALE_S + 1.0:
                    self.problem(f"the good node's {s.get('probe')} snapshot is {age:.1f} s old")


class Hostile:
    """The raw publisher and its attacks; each returns the number of messages it sent."""

    def __init__(self, port, template):
        self.nats = RawNats(port)
        self.template = template  # the good agent's full snapshot body, as a dict
        self.rng = random.Random(27)

    def small_full(self, node, devices=1):
        doc = json.loads(json.dumps(self.template))
        doc["node"] = node
        doc["devices"] = doc["devices"][:devices]
        doc["time_unix_ns"] = time.time_ns()
        return json.dumps(doc, separators=(",", ":")).encode()

    def bombs(self, count, lying):
        body = b" " * (8 * 1024 * 1024)  # 8 MiB of nothing: ~8 KB deflated
        payload = deflate(body)
        for i in range(count):
            header = (f"GSB1 f z evil-bomb simulated {1000 + i:x} 1 1 "
                      f"{4096 if lying else len(body)} gpustream/hostile\n")
            self.nats.publish("gpustream.evil-bomb.simulated", header.encode() + payload)
        self.nats.flush()
        return count

    def base_then_deltas(self, deltas):
        doc = json.loads(json.dumps(self.template))
        doc["node"] = "evil-base"
        device = doc["devices"][0]
        doc["devices"] = []
        for i in range(1000):  # names of random hex: the base deflates only about 2:1
            d = json.loads(json.dumps(device))
            d["name"] = "%x" % self.rng.getrandbits(4 * 700)
            d["index"] = i
            doc["devices"].append(d)
        body = json.dumps(doc, separators=(",", ":")).encode()
        epoch = "%x" % self.rng.getrandbits(60)
        self.nats.publish("gpustream.evil-base.simulated",
                          bus_message("f", "evil-base", "simulated", epoch, 1, 1, body))
        for i in range(deltas):
            patch = json.dumps({"time_unix_ns": [time.time_ns() + i]}).encode()
            self.nats.publish("gpustream.evil-base.simulated",
                              bus_message("d", "evil-base", "simulated", epoch, 2 + i, 1, patch,
                                          compress=False))
        self.nats.flush()
        return 1 + deltas

    def wide(self):
        doc = json.loads(json.dumps(self.template))
        doc["node"] = "evil-wide"
        doc["devices"] = [{"index": i} for i in range(62000)]
        body = json.dumps(doc, separators=(",", ":")).encode()
        self.nats.publish("gpustream.evil-wide.simulated",
                          bus_message("f", "evil-wide", "simulated", "abc", 1, 1, body))
        self.nats.flush()
        return 1

    def replay(self, good_header, good_body):
        """The good agent's own stream, its epoch, sequence 2^64-1, forged values; then an old
        message of the stream replayed as it was."""
        doc = json.loads(good_body)
        for d in doc["devices"]:
            d["name"] = "FORGED"
        doc["time_unix_ns"] = time.time_ns() + 3600 * 10**9
        body = json.dumps(doc, separators=(",", ":")).encode()
        top = 2**64 - 1
        subject = f"gpustream.good.{good_header['probe']}"
        self.nats.publish(subject, bus_message("f", "good", good_header["probe"],
                                               good_header["epoch"], top, top, body))
        self.nats.publish(subject, bus_message("f", "good", good_header["probe"],
                                               good_header["epoch"], good_header["seq"],
                                               good_header["seq"], body))
        self.nats.flush()
        return 2

    def mismatch(self, count):
        body = self.small_full("good")
        for i in range(count):
            self.nats.publish("gpustream.evil-x.simulated",
                              bus_message("f", "good", "simulated", "%x" % (77 + i), 1, 1, body))
        self.nats.flush()
        return count

    def node_flood(self, count):
        for i in range(count):
            node = f"flood{i:05d}"
            self.nats.publish(f"gpustream.{node}.simulated",
                              bus_message("f", node, "simulated", "f100d", 1, 1,
                                          self.small_full(node)))
        self.nats.flush()
        return count

    def garbage(self, count):
        for i in range(count):
            kind = i % 4
            if kind == 0:
                payload = bytes(self.rng.getrandbits(8) for _ in range(512))
            elif kind == 1:
                payload = b"{" * 100000
            elif kind == 2:
                payload = b"GSB1 f z x y 1 1 1 99999999999999999999 a\n" + b"\x00" * 64
            else:
                payload = b"GSB1 d p evil-g simulated 1 5 1 3 a\n[1]"
            self.nats.publish(f"gpustream.evil-g{i % 3}.simulated", payload)
        self.nats.flush()
        return count


def metric_values(text, name):
    """{labels: value} of one family in a /metrics text."""
    out = {}
    for line in text.splitlines():
        m = re.match(re.escape(name) + r"(\{[^}]*\})?\s+(\S+)$", line)
        if m:
            out[m.group(1) or ""] = float(m.group(2))
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--gpustream", required=True)
    p.add_argument("--duration", type=float, default=40.0)
    p.add_argument("--cpu-budget", type=float, default=0.6,
                   help="the fleet's CPU time during the soak, in cores, at most")
    p.add_argument("--rss-budget-mib", type=float, default=256.0)
    p.add_argument("--no-bucket-bombs", action="store_true",
                   help="leave the bucket alone (to look at the soak part on its own)")
    args = p.parse_args()
    require_executable(NATS_SERVER, "nats-server")
    port = free_port()
    store = tempfile.mkdtemp(prefix="gpustream-hostile-js-")
    nats = None
    agent = None
    fleet = None
    try:
        nats = start_nats(port, store)
        url = f"nats://127.0.0.1:{port}"
        watcher = RawNats(port)
        # The bucket, as an admin (or a fleet view) creates it: an agent never does (#28).
        created = create_kv_bucket(watcher, "gpustream_nodes", ttl_seconds=60)
        if "error" in created:
            fail(f"cannot create the key-value bucket: {created}")
        watcher.subscribe("gpustream.good.>")
        agent = subprocess.Popen(
            [args.gpustream, "serve", "--listen", "off", "--nats", url, "--node", "good",
             "--simulate", "2", "--probes", "simulated", "--interval", "0.2",
             "--nats-full-every", "5", "--nats-kv-ttl", "60"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        good_header = good_body = None
        deadline = time.monotonic() + 30
        while good_header is None:
            if time.monotonic() > deadline:
                fail("no full message from the good agent within 30 s")
            _, data = watcher.next_message(timeout=30)
            h, body = parse_bus(data)
            if h["full"]:
                good_header, good_body = h, body
        watcher.close()
        template = json.loads(good_body)
        print(f"the good agent publishes: probe {good_header['probe']}, epoch "
              f"{good_header['epoch']}, {len(template['devices'])} devices", flush=True)

        # The bucket, before the fleet starts: 4 keys x 64 deflate bombs (8 MiB each).
        hostile = Hostile(port, template)
        bomb_body = b" " * (8 * 1024 * 1024)
        bomb = bus_message("f", "evil-kv", "simulated", "1", 1, 1, bomb_body)
        for k in range(0 if args.no_bucket_bombs else 4):
            key = f"evil-kv{k}"
            state = node_state([bomb.replace(b"evil-kv ", key.encode() + b" ", 1)] * 64)
            ack = hostile.nats.request(f"$KV.gpustream_nodes.{key}", state)
            if b'"error"' in ack:
                fail(f"the bucket refused the bombs: {ack[:200]!r}")
        print(f"the bucket holds 4 keys x 64 bombs ({len(bomb)} bytes each, 8 MiB inflated)",
              flush=True)

        t = time.monotonic()
        fleet = Server(f"{args.gpustream} fleet", "--nats", url, "--listen", "127.0.0.1:0",
                       "--stale", str(STALE_S), "--gone", "30", "--max-nodes", str(MAX_NODES))
        to_listen = time.monotonic() - t
        print(f"gpustream fleet listened after {to_listen:.2f} s", flush=True)
        if to_listen > 5.0:
            fail(f"the fleet listened only after {to_listen:.1f} s with bombs in the bucket")
        fleet.wait_until("the good node up", lambda: any(
            n["node"] == "good" and n["state"] == "up"
            for n in fleet.get_json("/api/v1/nodes")["nodes"]), timeout=20)

        monitor = Monitor(fleet)
        cpu0 = proc_cpu_s(fleet.proc.pid)
        t0 = time.monotonic()
        monitor.start()
        sent = {}
        rounds = 0
        while time.monotonic() - t0 < args.duration:
            rounds += 1
            for name, attack in (
                    ("bombs", lambda: hostile.bombs(300, lying=False)),
                    ("lying bombs", lambda: hostile.bombs(300, lying=True)),
                    ("base+deltas", lambda: hostile.base_then_deltas(400)),
                    ("wide", hostile.wide),
                    ("replay", lambda: hostile.replay(good_header, good_body)),
                    ("mismatch", lambda: hostile.mismatch(50)),
                    ("node flood", lambda: hostile.node_flood(100)),
                    ("garbage", lambda: hostile.garbage(200))):
                sent[name] = sent.get(name, 0) + attack()
                if fleet.proc.poll() is not None:
                    fail(f"the fleet exited ({fleet.proc.returncode}) during '{name}':\n"
                         + "".join(fleet.stderr[-20:]))
                time.sleep(0.5)
        elapsed = time.monotonic() - t0
        time.sleep(STALE_S)  # the last attack's effects, then one more look
        monitor.stop.set()
        monitor.join()
        cpu = proc_cpu_s(fleet.proc.pid) - cpu0
        rss = proc_rss_mib(fleet.proc.pid)
        print(f"{rounds} rounds in {elapsed:.1f} s: sent {sent}", flush=True)
        h = sorted(monitor.healthz)
        if h:
            print(f"/healthz: {len(h)} probes, median {h[len(h) // 2] * 1000:.1f} ms, max "
                  f"{h[-1] * 1000:.1f} ms", flush=True)
        print(f"fleet CPU {cpu:.2f} s over {elapsed + STALE_S:.1f} s "
              f"({cpu / (elapsed + STALE_S):.2f} cores); RSS {rss:.0f} MiB", flush=True)

        if h:
            p90 = h[(len(h) * 9) // 10 - 1] if len(h) >= 10 else h[-1]
            if p90 > HEALTHZ_BOUND_S:
                slow = [f"{t * 1000:.0f}" for t in h if t > HEALTHZ_BOUND_S]
                fail(f"/healthz: 90th percentile {p90 * 1000:.1f} ms of {len(h)} probes (bound "
                     f"{HEALTHZ_BOUND_S * 1000:.0f} ms); {len(slow)} over it: "
                     f"{', '.join(slow[:20])} ms (load average {os.getloadavg()[0]:.1f})")
        if monitor.problems:
            fail(f"{len(monitor.problems)} problems while the attacks ran, e.g.:\n  "
                 + "\n  ".join(monitor.problems[:15]))
        if monitor.samples < elapsed / 0.2 / 2:
            fail(f"only {monitor.samples} samples of the fleet in {elapsed:.0f} s")
        if cpu > args.cpu_budget * (elapsed + STALE_S):
            fail(f"the fleet used {cpu:.1f} s of CPU in {elapsed + STALE_S:.0f} s "
                 f"(budget {args.cpu_budget} cores)")
        if rss > args.rss_budget_mib:
            fail(f"the fleet's RSS is {rss:.0f} MiB (budget {args.rss_budget_mib:.0f} MiB)")

        text = http_ok(fleet.http, "/metrics")
        refused = metric_values(text, "gpustream_fleet_messages_refused_total")
        print("refused:", {k: v for k, v in refused.items() if v}, flush=True)
        for reason in ("subject_mismatch", "node_table_full"):
            if refused.get(f'{{reason="{reason}"}}', 0) <= 0:
                fail(f"no refusal counted with reason {reason}: {refused}")
        if sum(refused.values()) < sent["bombs"] + sent["lying bombs"]:
            fail(f"fewer refusals ({sum(refused.values())}) than bombs sent: {refused}")
        nodes_refused = metric_values(text, "gpustream_fleet_nodes_refused_total")
        if not nodes_refused or max(nodes_refused.values()) <= 0:
            fail("gpustream_fleet_nodes_refused_total is missing or 0 after the node flood")
        nodes = fleet.get_json("/api/v1/nodes")["nodes"]
        if len(nodes) > MAX_NODES:
            fail(f"{len(nodes)} nodes kept, more than --max-nodes {MAX_NODES}")
        if any(n["node"].startswith(("evil-bomb", "evil-wide", "evil-kv")) for n in nodes):
            fail(f"a node of bombs was admitted: {[n['node'] for n in nodes]}")
        print("PASS", flush=True)
    finally:
        for proc in (fleet.proc if fleet else None, agent, nats):
            if proc and proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()


if __name__ == "__main__":
    main()
