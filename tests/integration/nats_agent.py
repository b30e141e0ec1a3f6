"""A headless agent through a nats-server restart (a real `nats-server -js`, loopback), watched
through its health listener (`serve --listen off --nats URL --health ADDR`): /healthz answers 200
while connected and 503 once NATS has been away longer than --nats-unhealthy-after (the body
says so), /metrics (token rules as the server's) carries gpustream_nats_*; anything else is 404.
kill -9 and restart nats-server on the same port: the agent says once that it lost it and once
that it is back, counts one outage, keeps publishing, says once that the bucket (gone with the
memory store) is missing, and puts its state as soon as an admin recreates it. A listening
agent's /api/v1/stats has a "nats" object. SIGHUP re-reads the NATS password file: a rotated
password is used. Exit 0 on success, 1 with a FAIL line otherwise."""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_helper import (Proc, fail, free_port, http_get, require_executable,  # noqa: E402
                          scrape, wait_until, write_secret)
from nats_helper import NATS_SERVER, start_nats, start_nats_config  # noqa: E402
from nats_raw import RawNats, create_kv_bucket  # noqa: E402

TOKEN = "tok-agent-3e9d1c"


def metric(addr, name):
    return scrape(addr, name, token=TOKEN, required=True)


def create_bucket(port):
    admin = RawNats(port)
    created = create_kv_bucket(admin, "gpustream_nodes", ttl_seconds=30)
    admin.close()
    if "error" in created:
        fail(f"cannot create the bucket: {created}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--gpustream", required=True)
    args = p.parse_args()
    require_executable(NATS_SERVER, "nats-server")
    g = args.gpustream
    folder = tempfile.mkdtemp(prefix="gpustream-agent-")
    procs, servers = [], []
    try:
        port = free_port()
        servers.append(start_nats(port, os.path.join(folder, "js1")))
        url = f"nats://127.0.0.1:{port}"
        create_bucket(port)
        token = write_secret(folder, "token", TOKEN)

        # --health is a headless agent's: refused next to a listener.
        r = subprocess.run([g, "serve", "--listen", "127.0.0.1:0", "--nats", url, "--health",
                            "127.0.0.1:0"], capture_output=True, text=True, timeout=30)
        if r.returncode != 2 or "--health" not in r.stderr:
            fail(f"--health with --listen: expected exit 2 naming --health, got {r.returncode}: "
                 f"{r.stderr}")

        agent = Proc([g, "serve", "--listen", "off", "--nats", url, "--node", "a1",
                      "--simulate", "1", "--probes", "simulated", "--interval", "0.2",
                      "--health", "127.0.0.1:0", "--token", token,
                      "--nats-unhealthy-after", "1"])
        procs.append(agent)
        addr = agent.wait_line("the health listener", "listening http ").split()[2]
        agent.wait_line("the agent connects", "NATS: connected to")
        status, body = http_get(addr, "/healthz")
        if status != 200:
            fail(f"/healthz while connected: {status} {body}")
        status, _ = http_get(addr, "/metrics")
        if status != 401:
            fail(f"/metrics without the token: {status}, expected 401")
        wait_until("gpustream_nats_connected 1",
                   lambda: metric(addr, "gpustream_nats_connected") == 1)
        wait_until("a put in the bucket", lambda: metric(addr, "gpustream_nats_kv_puts_total") > 0)
        for path in ("/", "/api/v1/stats", "/api/v1/snapshot", "/api/v1/fit?bytes=1", "/ws"):
            status, _ = http_get(addr, path, token=TOKEN)
            if status != 404:
                fail(f"the health listener answers {path} with {status}, expected 404")
        print("health listener:", addr, "/healthz 200, /metrics 401 without the token, "
              "everything else 404", flush=True)

        # kill -9 the server: the agent says so once, /healthz turns 503 after the bound.
        servers[0].send_signal(signal.SIGKILL)
        servers[0].wait()
        agent.wait_line("the agent says it lost NATS", "NATS: lost the connection to")
        wait_until("/healthz 503", lambda: http_get(addr, "/healthz")[0] == 503, timeout=10)
        status, body = http_get(addr, "/healthz")
        if "NATS disconnected for" not in body:
            fail(f"/healthz 503 does not say why: {body}")
        print("while NATS is away:", status, body.strip(), flush=True)
        if metric(addr, "gpustream_nats_connected") != 0:
            fail("gpustream_nats_connected is not 0 while NATS is away")
        time.sleep(1.0)  # several reconnect attempts (every 1 s): still logged once

        # The server back on the same port, with an empty store: no bucket.
        servers.append(start_nats(port, os.path.join(folder, "js2")))
        agent.wait_line("the agent says it is back", "NATS: reconnected to")
        wait_until("/healthz 200 again", lambda: http_get(addr, "/healthz")[0] == 200)
        watcher = RawNats(port)
        watcher.subscribe("gpustream.a1.>")
        subject, _ = watcher.next_message(timeout=10)
        watcher.close()
        print("publishing again on", subject, flush=True)
        agent.wait_line("the missing bucket", "does not exist; an agent never creates it")
        puts = metric(addr, "gpustream_nats_kv_puts_total")
        create_bucket(port)
        wait_until("a put once the bucket is back",
                   lambda: metric(addr, "gpustream_nats_kv_puts_total") > puts, timeout=10)
        agent.wait_line("the bucket is back", "in the key-value bucket 'gpustream_nodes' on")
        outages = metric(addr, "gpustream_nats_outages_total")
        if outages != 1:
            fail(f"gpustream_nats_outages_total is {outages}, expected 1")
        text = agent.text()
        for needle in ("NATS: lost the connection to", "NATS: reconnected to",
                       "does not exist; an agent never creates it"):
            if text.count(needle) != 1:
                fail(f"{needle!r} is not logged once:\n{text}")
        print("logged once each: lost, back, the missing bucket; outages 1", flush=True)

        # A listening agent: /api/v1/stats has the bridge's state.
        listening = Proc([g, "serve", "--listen", "127.0.0.1:0", "--nats", url, "--node", "a2",
                          "--simulate", "1", "--probes", "simulated", "--interval", "0.2"])
        procs.append(listening)
        addr2 = listening.wait_line("the listener", "listening http ").split()[2]
        listening.wait_line("the agent connects", "NATS: connected to")

        def stats_nats():
            return json.loads(http_get(addr2, "/api/v1/stats")[1]).get("nats", {})
        wait_until("/api/v1/stats nats.published", lambda: stats_nats().get("published", 0) > 0)
        s = stats_nats()
        if s.get("connected") is not True or "kv_write_failures" not in s:
            fail(f"/api/v1/stats nats: {s}")
        print("/api/v1/stats nats:", s, flush=True)

        # SIGHUP reloads the NATS credentials: the password rotated on the server (restarted
        # with the new one), the agent refused, the new password written to its file, SIGHUP:
        # connected again, with the new one.
        auth_port = free_port()

        def auth_server(password):
            proc, _ = start_nats_config(
                folder, "auth",
                f'authorization {{ users = [ {{ user: a3, password: "{password}" }} ] }}', auth_port)
            servers.append(proc)
            return proc

        srv = auth_server("first-pw-77")
        pw = write_secret(folder, "a3.pw", "first-pw-77")
        rotated = Proc([g, "serve", "--listen", "off", "--nats", f"nats://127.0.0.1:{auth_port}",
                        "--node", "a3", "--simulate", "1", "--probes", "simulated",
                        "--interval", "0.2", "--nats-kv-bucket", "off", "--nats-user", "a3",
                        "--nats-password-file", pw])
        procs.append(rotated)
        rotated.wait_line("the agent connects", "NATS: connected to")
        rotated.proc.send_signal(signal.SIGHUP)
        rotated.wait_line("an unchanged file", "SIGHUP: reloaded: nothing changed that applies live")
        srv.kill()
        srv.wait()
        auth_server("second-pw-88")
        rotated.wait_line("the old password refused", "Authorization Violation")
        write_secret(folder, "a3.pw", "second-pw-88")
        rotated.proc.send_signal(signal.SIGHUP)
        rotated.wait_line("the new credentials read", "SIGHUP: nats: NATS credentials read again")
        # Connected again: a message on its subject.
        watcher = RawNats(auth_port, user="a3", password="second-pw-88")
        watcher.subscribe("gpustream.a3.>")
        watcher.next_message(timeout=10)
        watcher.close()
        if rotated.proc.poll() is not None:
            fail(f"the agent exited on SIGHUP:\n{rotated.text()}")
        print("SIGHUP: the rotated NATS password is used", flush=True)

        for proc in procs:
            rc = proc.stop()
            if rc != 0:
                fail(f"exit {rc} after SIGTERM:\n{proc.text()}")
        text = "".join(p.text() for p in procs)
        if "first-pw-77" in text or "second-pw-88" in text:
            fail("a password in a log")
        print("PASS")
    finally:
        for proc in procs:
            proc.stop()
        for s in servers:
            if s.poll() is None:
                s.kill()
                s.wait()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
