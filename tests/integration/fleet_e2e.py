"""The fleet end to end against a real `nats-server -js` (scratch store, loopback): three headless
agents (`gpustream serve --listen off --nats URL --node NAME`), a first `gpustream fleet` that
sees them publish, then a second one started afterwards that shows every node at once from the
key-value bucket; the fit query across nodes; tenancy (token, Host); one agent killed becomes
stale (its values withheld) and then gone; the first view with `--metrics-compat dcgm` labels
every device with its node as `Hostname`. Exit 0 on success, 1 with a FAIL line otherwise."""
import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_helper import (Server, fail, fleet_states, free_port, http_get,  # noqa: E402
                          require_executable, wait_until)
from nats_helper import NATS_SERVER, start_nats, stop_nats  # noqa: E402
from nats_raw import RawNats, create_kv_bucket  # noqa: E402

TOKEN = "fleet-test-token-0123456789"
NODES = ["rack1-n1", "rack1-n2", "rack2-n3"]


def get(server, path, token=True, host=None):
    """GET with the token in the query string (as a browser's dashboard sends it)."""
    sep = "&" if "?" in path else "?"
    return http_get(server.http, path + (f"{sep}token={TOKEN}" if token else ""), host=host)


def get_json(server, path):
    status, body = get(server, path)
    if status != 200:
        fail(f"{path}: HTTP {status}: {body}")
    return json.loads(body)


def states(server):
    return fleet_states(server.http, token=TOKEN)


def tcp_fit(server, requests):
    """Over the TCP protocol (auth line first): hello, then each request line; returns the answer
    (fit_result or error) of each, in order, skipping the snapshots streamed meanwhile."""
    host, port = server.tcp.rsplit(":", 1)
    answers = []
    with socket.create_connection((host, int(port)), timeout=10) as s:
        f = s.makefile("rwb")
        f.write((json.dumps({"type": "auth", "token": TOKEN}) + "\n").encode())
        f.flush()
        if json.loads(f.readline())["type"] != "hello":
            fail("fit over TCP: no hello")
        for r in requests:
            f.write((r if isinstance(r, str) else json.dumps(r)).encode() + b"\n")
            f.flush()
            while True:
                m = json.loads(f.readline())
                if m["type"] in ("fit_result", "error"):
                    answers.append(m)
                    break
    return answers


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--gpustream", required=True)
    args = p.parse_args()
    require_executable(NATS_SERVER, "nats-server")
    port = free_port()
    store = tempfile.mkdtemp(prefix="gpustream-js-")
    nats = start_nats(port, store)
    agents = {}
    fleets = []
    try:
        url = f"nats://127.0.0.1:{port}"
        token_file = os.path.join(store, "token")
        with open(token_file, "w") as f:
            f.write(TOKEN + "\n")
        os.chmod(token_file, 0o600)

        # A bad node name is refused before anything starts.
        r = subprocess.run([args.gpustream, "serve", "--listen", "off", "--nats", url,
                            "--node", "a.b"], capture_output=True, text=True, timeout=30)
        if r.returncode != 2 or "--node" not in r.stderr:
            fail(f"--node a.b: expected exit 2 naming --node, got {r.returncode}: {r.stderr}")

        # The bucket, as an admin (or a fleet view) creates it: an agent never does (#28).
        admin = RawNats(port)
        created = create_kv_bucket(admin, "gpustream_nodes", ttl_seconds=4)
        admin.close()
        if "error" in created:
            fail(f"cannot create the key-value bucket: {created}")

        for node in NODES:
            agents[node] = subprocess.Popen(
                [args.gpustream, "serve", "--listen", "off", "--nats", url, "--node", node,
                 "--simulate", "2", "--probes", "simulated", "--interval", "0.2",
                 "--nats-full-every", "5", "--nats-kv-ttl", "4"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        fleet_cmd = f"{args.gpustream} fleet"
        first = Server(fleet_cmd, "--nats", url, "--listen", "127.0.0.1:0", "--token", token_file,
                       "--stale", "1", "--gone", "4", "--metrics-compat", "dcgm")
        fleets.append(first)
        wait_until("the first fleet to see the three agents",
                   lambda: states(first) == {n: "up" for n in NODES})
        for node, proc in agents.items():
            if proc.poll() is not None:
                fail(f"agent {node} exited: {proc.stderr.read()}")
        print("first fleet sees", sorted(states(first)), flush=True)
        # --metrics-compat dcgm on a fleet: dcgm-exporter's names, Hostname = each node.
        def dcgm_hosts():
            status, text = get(first, "/metrics")
            hosts = sorted(m.group(1) for m in re.finditer(
                r'^DCGM_FI_DEV_GPU_UTIL\{[^}]*Hostname="([^"]*)"', text, re.M))
            return hosts if status == 200 and len(hosts) == 6 else None
        hosts = wait_until("the fleet's DCGM series of 6 devices", dcgm_hosts)
        if hosts != sorted(NODES * 2):
            fail(f"DCGM_FI_DEV_GPU_UTIL's Hostname labels are not the nodes: {hosts}")
        print("fleet --metrics-compat dcgm: Hostname =", sorted(set(hosts)), flush=True)

        # A fleet view started now listens at once and shows every node as the key-value
        # bucket, read in the background, is decoded (issue 27: not before listening).
        second = Server(fleet_cmd, "--nats", url, "--listen", "127.0.0.1:0", "--token",
                        token_file, "--stale", "1", "--gone", "4", "--tcp", "127.0.0.1:0")
        fleets.append(second)
        wait_until("the fleet's bucket line", lambda: any(
            "from the key-value bucket)" in l for l in second.stderr), 5)
        nodes = get_json(second, "/api/v1/nodes")
        if sorted(n["node"] for n in nodes["nodes"]) != NODES:
            fail(f"the new fleet view does not show every node once its bucket is read: {nodes}")
        if not any("(3 from the key-value bucket)" in l for l in second.stderr):
            fail("the nodes did not come from the key-value bucket: " + "".join(second.stderr))
        for n in nodes["nodes"]:
            if n["agent"] != nodes["nodes"][0]["agent"] or not n["agent"].startswith("gpustream/"):
                fail(f"agent version missing: {n}")
        print("second fleet, at once:", [(n["node"], n["state"]) for n in nodes["nodes"]],
              flush=True)

        # Every device carries its node: the API, the snapshots and /metrics.
        devices = wait_until("6 devices", lambda: (lambda d: d if len(d) == 6 else None)(
            get_json(second, "/api/v1/devices")["devices"]))
        if sorted({d["node"] for d in devices}) != NODES:
            fail(f"devices without their node: {devices}")
        snap = get_json(second, "/api/v1/snapshot?node=rack1-n2")
        if {s["node"] for s in snap["snapshots"]} != {"rack1-n2"}:
            fail(f"?node= filter: {snap}")
        status, metrics = get(second, "/metrics")
        if status != 200 or 'node="rack2-n3"' not in metrics:
            fail("/metrics has no node label")

        # Tenancy: the token and the Host check of serve.
        status, _ = get(second, "/api/v1/nodes", token=False)
        if status != 401:
            fail(f"no token: expected 401, got {status}")
        status, _ = get(second, "/api/v1/fit?bytes=1", host="evil.example")
        if status != 403:
            fail(f"foreign Host: expected 403, got {status}")
        status, _ = get(second, "/api/v1/fit?bytes=lots")
        if status != 400:
            fail(f"bad bytes: expected 400, got {status}")
        status, page = get(second, "/fleet")
        if status != 200 or "gpustream fleet" not in page:
            fail("no fleet dashboard page")

        # Fit across nodes: ranked by free memory, with node, state, age and source.
        fit = get_json(second, "/api/v1/fit?bytes=1")["fits"]
        if len(fit) != 6 or {f["node"] for f in fit} != set(NODES):
            fail(f"fit does not span the nodes: {fit}")
        frees = [f["free_bytes"] for f in fit]
        if frees != sorted(frees, reverse=True):
            fail(f"fit not ranked by free memory: {frees}")
        if any(f["state"] != "up" or f["source"] not in ("simulated", "derived") for f in fit):
            fail(f"fit entries without state/source: {fit}")
        # The agents keep publishing (simulated memory moves), so a device may have more free by
        # the next query: what must hold is that nothing offered has less free than asked.
        biggest = frees[0]
        over = get_json(second, f"/api/v1/fit?bytes={biggest + 1}")["fits"]
        if any(f["free_bytes"] < biggest + 1 for f in over):
            fail(f"fit offers a device with less free memory than asked: {over}")
        if get_json(second, f"/api/v1/fit?bytes={2**63}")["fits"]:
            fail("fit offers a device for 2^63 bytes")
        print("fit:", [(f["node"], f["device"], f["free_bytes"]) for f in fit[:3]], flush=True)

        # The same query over the protocol (TCP): the same devices, ranked the same, with their
        # node, state, age and source; bounded by its limit; garbage gets an error naming the
        # field and echoing the id, and the connection goes on answering.
        answers = tcp_fit(second, [{"type": "fit", "bytes": 1, "id": "all"},
                                   {"type": "fit", "bytes": 1, "limit": 2, "id": "two"},
                                   {"type": "fit", "bytes": biggest + 1, "id": "over"},
                                   {"type": "fit", "bytes": 2**63, "id": "none"},
                                   '{"type":"fit","bytes":-1,"id":"bad"}',
                                   '{"type":"fit","bytes":0}'])
        a, two, over, none, bad, zero = answers
        if a["type"] != "fit_result" or a["id"] != "all" or a["total"] != 6:
            fail(f"fit over TCP: {a}")
        proto = [(f["node"], f["device"]) for f in a["fits"]]
        if sorted(proto) != sorted((f["node"], f["device"]) for f in fit):
            fail(f"fit over TCP and /api/v1/fit disagree: {a['fits']} vs {fit}")
        if [f["free_bytes"] for f in a["fits"]] != sorted((f["free_bytes"] for f in a["fits"]),
                                                          reverse=True):
            fail(f"fit over TCP not ranked by free memory: {a['fits']}")
        for f in a["fits"]:
            if f["state"] != "up" or f["source"] not in ("simulated", "derived") or \
                    not isinstance(f["age_seconds"], float) or f["age_seconds"] < 0:
                fail(f"fit over TCP: an entry without state/source/age: {f}")
        if len(two["fits"]) != 2 or not two["truncated"] or two["total"] != 6:
            fail(f"fit over TCP: limit 2 not applied: {two}")
        if over["type"] != "fit_result" or any(f["free_bytes"] < biggest + 1 for f in over["fits"]):
            fail(f"fit over TCP offers a device with less free memory than asked: {over}")
        if none["fits"] or none["total"] != 0:
            fail(f"fit over TCP offers a device for 2^63 bytes: {none}")
        if bad["type"] != "error" or bad["code"] != "bad_request" or bad.get("id") != "bad" or \
                "fit.bytes" not in bad["message"]:
            fail(f"fit over TCP: a negative bytes should be refused by name: {bad}")
        if zero["type"] != "fit_result" or zero["total"] != 6:
            fail(f"fit over TCP: the connection should answer after an error: {zero}")
        print("fit over TCP:", proto[:3], flush=True)

        # Kill one agent: stale (values withheld, not offered by fit), then gone.
        agents["rack2-n3"].send_signal(signal.SIGKILL)
        agents["rack2-n3"].wait()
        t0 = time.monotonic()
        wait_until("rack2-n3 stale", lambda: states(second).get("rack2-n3") == "stale", 10)
        t_stale = time.monotonic() - t0
        snap = get_json(second, "/api/v1/snapshot?node=rack2-n3")["snapshots"]
        for s in snap:
            if not any(e["code"] == "node_stale" for e in s["errors"]):
                fail(f"a stale node's snapshot does not say so: {s}")
            for d in s["devices"]:
                if d["metrics"]:
                    fail(f"a stale node's device still shows values: {d}")
                if d["absent"].get("memory_used_bytes") != "stale":
                    fail(f"a stale node's metric is not absent as stale: {d}")
        if any(f["node"] == "rack2-n3" for f in get_json(second, "/api/v1/fit?bytes=1")["fits"]):
            fail("fit offers a stale node")
        over_tcp = tcp_fit(second, [{"type": "fit", "bytes": 1}])[0]
        if any(f["node"] == "rack2-n3" for f in over_tcp["fits"]) or over_tcp["total"] != 4:
            fail(f"fit over TCP offers a stale node: {over_tcp}")
        wait_until("rack2-n3 gone", lambda: states(second).get("rack2-n3") == "gone", 15)
        t_gone = time.monotonic() - t0
        others = states(second)
        if others.get("rack1-n1") != "up" or others.get("rack1-n2") != "up":
            fail(f"the other nodes should still be up: {others}")
        snap = get_json(second, "/api/v1/snapshot?node=rack2-n3")["snapshots"]
        if any(s["devices"] for s in snap) or not all(
                any(e["code"] == "node_gone" for e in s["errors"]) for s in snap):
            fail(f"a gone node still shows devices: {snap}")
        print(f"killed agent: stale after {t_stale:.1f} s, gone after {t_gone:.1f} s", flush=True)

        for f in fleets:
            f.stop()
        fleets = []
        print("OK", flush=True)
    finally:
        for f in fleets:
            f.kill()
        for proc in agents.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
        stop_nats(nats)
        subprocess.run(["rm", "-rf", store])


if __name__ == "__main__":
    main()
