"""The minimal per-node NATS permissions (docs/security.md "NATS permissions: one user per
node") against a real `nats-server` with JetStream and per-user permissions (a config file
written here; users node1, node2, fleet, admin): the bucket is created by the admin (an agent
never creates it); two agents with the minimal set publish, keep their state in the bucket, and
show in a fleet view. A rogue node1 (a raw client with node1's credentials, nats_raw.py) cannot
appear as node2: publishing on gpustream.node2.x is denied by the server; publishing on its own
subject a payload naming node2 is refused by the view (subject_mismatch, counted); putting
$KV.<bucket>.node2 is denied; creating a stream (one with a republish rule onto node2's subject)
is denied; subscribing to _INBOX.> or another node's or the fleet's inbox is denied. Throughout,
the view's /api/v1/nodes and /api/v1/fit show node2 with node2's own devices (2), never node1's
(1). Exit 0 on success, 1 with a FAIL line otherwise."""
import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_helper import Proc, fail, http_ok, require_executable, write_secret  # noqa: E402
from nats_helper import NATS_SERVER  # noqa: E402
from nats_helper import start_nats_config as start_nats  # noqa: E402
from nats_raw import RawNats, create_kv_bucket  # noqa: E402

BUCKET = "gpustream_nodes"
PASSWORDS = {"node1": "pw-node1-5b7e", "node2": "pw-node2-c41d", "fleet": "pw-fleet-0a93",
             "admin": "pw-admin-e26f"}
DEVICES = {"node1": 1, "node2": 2}  # the simulated GPUs of each agent: node2's data is 2 GPUs


def node_permissions(node):
    """The minimal set of an agent, as docs/security.md gives it."""
    return {"publish": {"allow": [f"gpustream.{node}.>", f"$KV.{BUCKET}.{node}",
                                  f"$JS.API.STREAM.INFO.KV_{BUCKET}"]},
            "subscribe": {"allow": [f"_INBOX_gpustream.{node}.>"]}}


def server_config(store):
    users = [{"user": n, "password": PASSWORDS[n], "permissions": node_permissions(n)}
             for n in ("node1", "node2")]
    # The fleet view reads the bus and the bucket (a key-value watcher: JetStream API requests,
    # its consumer's flow control), and gets its replies on its own inbox.
    users.append({"user": "fleet", "password": PASSWORDS["fleet"], "permissions": {
        "publish": {"allow": ["$JS.API.>", "$JS.FC.>", "$JS.ACK.>"]},
        "subscribe": {"allow": ["gpustream.>", "_INBOX_gpustream.fleet.>"]}}})
    users.append({"user": "admin", "password": PASSWORDS["admin"]})
    return (f'jetstream {{ store_dir: "{store}" }}\n'
            f"authorization {{ users = {json.dumps(users)} }}")


def http_json(addr, path):
    return json.loads(http_ok(addr, path))


def devices_by_node(addr):
    return {n["node"]: (n["state"], n.get("devices"))
            for n in http_json(addr, "/api/v1/nodes")["nodes"]}


def refused(addr, reason):
    for line in http_ok(addr, "/metrics").splitlines():
        if line.startswith("gpustream_fleet_messages_refused_total{") and \
                f'reason="{reason}"' in line:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def truth_error(addr):
    """Why node1 and node2 are not both up with their own number of GPUs, in nodes and in fit;
    None when they are."""
    got = devices_by_node(addr)
    for node, want in DEVICES.items():
        if got.get(node) != ("up", want):
            return f"{node} shows as {got.get(node)}, expected up with {want} GPUs: {got}"
    fits = http_json(addr, "/api/v1/fit?bytes=1")["fits"]
    per_node = {}
    for f in fits:
        per_node[f["node"]] = per_node.get(f["node"], 0) + 1
    if per_node != DEVICES:
        return f"/api/v1/fit offers {per_node} GPUs per node, expected {DEVICES}: {fits}"
    return None


def check_truth(addr, when):
    error = truth_error(addr)
    if error:
        fail(f"{when}: {error}")


def denied(what, action, needle):
    """Runs `action` (a RawNats call ending in a round trip); it must fail with the server's
    permission error naming `needle`."""
    try:
        action()
    except RuntimeError as e:
        if "Permissions Violation" in str(e) and needle in str(e):
            print(f"denied: {what}: {e}", flush=True)
            return
        fail(f"{what}: expected a permissions violation for {needle}, got {e}")
    fail(f"{what}: the server allowed it")


def rogue(port):
    return RawNats(port, user="node1", password=PASSWORDS["node1"],
                   inbox_prefix="_INBOX_gpustream.node1.rogue")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--gpustream", required=True)
    args = p.parse_args()
    require_executable(NATS_SERVER, "nats-server")
    g = args.gpustream
    folder = tempfile.mkdtemp(prefix="gpustream-perms-")
    procs = []
    try:
        srv, port = start_nats(folder, "perms", server_config(os.path.join(folder, "js")))
        url = f"nats://127.0.0.1:{port}"
        secrets = {n: write_secret(folder, f"{n}.pw", pw) for n, pw in PASSWORDS.items()}

        # The admin creates the bucket (the fleet view can too); an agent may not.
        admin = RawNats(port, user="admin", password=PASSWORDS["admin"])
        created = create_kv_bucket(admin, BUCKET, ttl_seconds=30)
        if "error" in created:
            fail(f"the admin cannot create the bucket: {created}")

        agents = {}
        for node in ("node1", "node2"):
            agents[node] = Proc([g, "serve", "--listen", "off", "--nats", url, "--node", node,
                                 "--simulate", str(DEVICES[node]), "--probes", "simulated",
                                 "--interval", "0.2", "--nats-full-every", "2",
                                 "--nats-user", node, "--nats-password-file", secrets[node]])
            procs.append(agents[node])
        view = Proc([g, "fleet", "--listen", "127.0.0.1:0", "--nats", url, "--stale", "5",
                     "--nats-user", "fleet", "--nats-password-file", secrets["fleet"],
                     "--nats-inbox-prefix", "_INBOX_gpustream.fleet"])
        procs.append(view)
        addr = view.wait_line("the fleet listens", "listening http ").split()[2]
        deadline = time.monotonic() + 20
        while truth_error(addr):
            if time.monotonic() > deadline:
                check_truth(addr, "start")
            time.sleep(0.2)
        print("the fleet sees", devices_by_node(addr), flush=True)

        # Both agents keep their state in the bucket with the minimal set: 2 keys.
        deadline = time.monotonic() + 10
        while True:
            info = json.loads(admin.request(f"$JS.API.STREAM.INFO.KV_{BUCKET}", b""))
            if info.get("state", {}).get("messages") == 2:
                break
            if time.monotonic() > deadline:
                fail(f"the bucket does not hold both nodes' states: {info}\n"
                     + agents["node1"].text() + agents["node2"].text())
            time.sleep(0.2)
        for node, a in agents.items():
            if "cannot keep the node state" in a.text() or "Permissions" in a.text():
                fail(f"{node} cannot work with the minimal permissions:\n{a.text()}")

        # A full message of node1's own, to forge with.
        watcher = RawNats(port, user="admin", password=PASSWORDS["admin"])
        watcher.subscribe("gpustream.node1.>")
        deadline = time.monotonic() + 10
        while True:
            _, data = watcher.next_message(timeout=10)
            head, body = data.split(b"\n", 1)
            fields = head.decode().split(" ")
            if fields[1] == "f":
                break
            if time.monotonic() > deadline:
                fail("no full message from node1")
        watcher.close()
        doc = json.loads(zlib.decompress(body, -15) if fields[2] == "z" else body)  # raw deflate

        # 1. Publishing on node2's subject: denied by the server.
        r = rogue(port)
        denied("publish on gpustream.node2.simulated",
               lambda: (r.publish("gpustream.node2.simulated", data), r.flush()),
               "gpustream.node2.simulated")
        r.close()

        # 2. Its own subject, a payload naming node2: refused by the view, counted.
        before = refused(addr, "subject_mismatch")
        doc["node"] = "node2"
        forged_body = json.dumps(doc).encode()
        fields[3] = "node2"
        fields[6] = fields[7] = str(10 ** 6)  # seq and base: far ahead of node2's own
        fields[8] = str(len(forged_body))
        fields[2] = "p"
        forged = " ".join(fields).encode() + b"\n" + forged_body
        r = rogue(port)
        for _ in range(3):
            r.publish("gpustream.node1.simulated", forged)
        r.flush()  # allowed by the server: the subject is node1's
        plain = json.dumps({**doc, "node": "node2"}).encode()  # the json encoding too
        r.publish("gpustream.node1.simulated", plain)
        r.flush()
        r.close()
        deadline = time.monotonic() + 10
        while refused(addr, "subject_mismatch") < before + 4:
            if time.monotonic() > deadline:
                fail(f"the view did not refuse the forged payloads as subject_mismatch: "
                     f"{refused(addr, 'subject_mismatch')} (before: {before})")
            time.sleep(0.1)
        print("refused by the view: subject_mismatch", refused(addr, "subject_mismatch"),
              flush=True)
        check_truth(addr, "after the forged payloads")

        # 3. node2's key in the bucket: denied.
        r = rogue(port)
        denied(f"put $KV.{BUCKET}.node2", lambda: (r.publish(f"$KV.{BUCKET}.node2", b"x"),
                                                   r.flush()), f"$KV.{BUCKET}.node2")
        r.close()

        # 4. Creating a stream (a republish rule onto node2's subject; or the bucket's own):
        # denied. The request never reaches JetStream: no stream is made.
        for name, extra in (("EVIL", {"subjects": ["evil.>"], "republish": {
                "src": ">", "dest": "gpustream.node2.simulated"}}), (f"KV_{BUCKET}", {})):
            r = rogue(port)
            config = {"name": name, "subjects": [f"$KV.{BUCKET}.>"], "storage": "memory",
                      **extra}
            denied(f"$JS.API.STREAM.CREATE.{name}",
                   lambda: (r.publish(f"$JS.API.STREAM.CREATE.{name}",
                                      json.dumps(config).encode(),
                                      reply="_INBOX_gpustream.node1.x"), r.flush()),
                   f"$JS.API.STREAM.CREATE.{name}")
            r.close()
        names = json.loads(admin.request("$JS.API.STREAM.NAMES", b""))
        if names.get("streams") != [f"KV_{BUCKET}"]:
            fail(f"streams on the server: {names}")

        # 5. Others' replies: _INBOX.>, node2's inbox, the fleet's inbox: denied.
        for subject in ("_INBOX.>", "_INBOX_gpustream.node2.>", "_INBOX_gpustream.fleet.>",
                        "_INBOX_gpustream.>", ">"):
            r = rogue(port)
            denied(f"subscribe {subject}", lambda: (r.subscribe(subject), r.flush()), subject)
            r.close()

        time.sleep(0.5)  # the view's worker: anything it would have taken, it has
        check_truth(addr, "at the end")
        for proc in procs:
            rc = proc.stop()
            if rc != 0:
                fail(f"exit {rc} after SIGTERM:\n{proc.text()}")
        admin.close()
        srv.terminate()
        srv.wait()
        print("PASS")
    finally:
        for proc in procs:
            proc.stop()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
