"""SIGHUP on the real `gpustream serve --token FILE` (issue #28): it never ends the service (it
used to exit 129 with no log line); it re-reads the token file and rotates the token under live
stream clients — the old token is refused, the new one accepted, the TCP client connected with
the old token keeps receiving snapshots; a token file that cannot be read keeps the old token and
says why; a storm of 200 SIGHUPs leaves it serving.

Then `serve --config FILE` under a live client: a broken config file (bad JSON, a bad value, a
missing file) is refused at SIGHUP with its line and column (or its key, or why), the running settings stay, the client stays, and
`gpustream_reloads_total{result="failed"}` counts it; a storm of SIGHUPs on the broken file says
so once; a good file applies its log level live and names a restart-only key that changed.
Exit 0 on success, 1 with a FAIL line."""
import json
import os
import signal
import socket
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_helper import Server, fail, http_get, parse_args, scrape  # noqa: E402

OLD = "old-token-0123456789abcdef"
NEW = "new-token-fedcba9876543210"


def status(server, token):
    return http_get(server.http, "/api/v1/stats", token=token)[0]


def write_token(path, token):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(token + "\n")
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


def metric(server, token, name):
    return scrape(server.http, name, token=token, required=True)


def read_snapshots(f, n):
    got = 0
    deadline = time.monotonic() + 10
    while got < n and time.monotonic() < deadline:
        m = json.loads(f.readline())
        if m.get("type") == "snapshot":
            got += 1
    return got


def write_file(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def config_reload(args):
    d = tempfile.mkdtemp(prefix="gpustream-sighup-config-")
    token_file = os.path.join(d, "token")
    write_token(token_file, OLD)
    config = os.path.join(d, "config.json")
    good = {"log_level": "info", "serve": {"token_file": token_file, "max_connections": 100}}
    write_file(config, json.dumps(good, indent=2) + "\n")
    server = Server(args.serve, "--config", config, "--simulate", "1", "--probes", "simulated",
                    "--interval", "0.1", "--listen", "127.0.0.1:0", "--tcp", "127.0.0.1:0")
    ok = 'gpustream_reloads_total{result="ok"}'
    failed = 'gpustream_reloads_total{result="failed"}'
    try:
        host, port = server.tcp.rsplit(":", 1)
        client = socket.create_connection((host, int(port)), timeout=10)
        f = client.makefile("rwb")
        f.write((json.dumps({"type": "auth", "token": OLD}) + "\n").encode())
        f.flush()
        if json.loads(f.readline())["type"] != "hello":
            fail("the TCP client got no hello")
        if metric(server, OLD, failed) != 0 or metric(server, OLD, ok) != 0:
            fail("reloads counted before any SIGHUP")

        # Broken JSON (a missing ',' on line 3): refused with the line and column.
        write_file(config, '{\n  "log_level": "debug"\n  "serve": {}\n}\n')
        server.proc.send_signal(signal.SIGHUP)
        server.wait_for_line(f"SIGHUP: reload failed: {config}:3:3: not valid JSON")
        server.wait_for_line("the running settings stay")
        # A bad value: refused the same way, naming the key.
        write_file(config, json.dumps({"serve": {"max_connections": 0}}))
        server.proc.send_signal(signal.SIGHUP)
        server.wait_for_line("serve.max_connections")
        server.wait_until("two failed reloads counted", lambda: metric(server, OLD, failed) == 2)
        # A config file that is gone: refused, saying so.
        os.remove(config)
        server.proc.send_signal(signal.SIGHUP)
        server.wait_for_line(f"SIGHUP: reload failed: cannot open config file '{config}'")
        server.wait_until("three failed reloads counted", lambda: metric(server, OLD, failed) == 3)
        if status(server, OLD) != 200:
            fail("a failed reload changed the token")
        if read_snapshots(f, 5) < 5:
            fail("the connected client stopped receiving snapshots after a failed reload")
        if any("log_level info -> debug" in line for line in server.stderr):
            fail("a failed reload applied the log level")

        # A storm of SIGHUPs on the same broken file: still serving, the failure said once.
        before = len(server.lines_with("SIGHUP: reload failed"))
        for _ in range(200):
            server.proc.send_signal(signal.SIGHUP)
        server.wait_until("the storm's reloads counted", lambda: metric(server, OLD, failed) > 3)
        time.sleep(0.5)
        if server.proc.poll() is not None:
            fail(f"serve exited during a SIGHUP storm with {server.proc.returncode}")
        if len(server.lines_with("SIGHUP: reload failed")) != before:
            fail("a storm on the same broken file repeated the failure line")

        # A good file: the log level applies live, a restart-only key is named, the token
        # rotates, the client stays.
        good["log_level"] = "debug"
        good["serve"]["max_connections"] = 50
        write_file(config, json.dumps(good))
        write_token(token_file, NEW)
        server.proc.send_signal(signal.SIGHUP)
        server.wait_for_line("SIGHUP: log: log_level info -> debug")
        server.wait_for_line("SIGHUP: serve.max_connections changed: takes effect after a restart")
        server.wait_for_line("a new token is required from now on")
        if status(server, OLD) != 401 or status(server, NEW) != 200:
            fail("the token was not rotated by the config reload")
        if metric(server, NEW, ok) != 1:
            fail("the good reload was not counted ok")
        if read_snapshots(f, 5) < 5:
            fail("the connected client stopped receiving snapshots after the reload")
        client.close()
        server.stop()
    finally:
        if server.proc.poll() is None:
            server.kill()


def main():
    args = parse_args()
    d = tempfile.mkdtemp(prefix="gpustream-sighup-")
    token_file = os.path.join(d, "token")
    write_token(token_file, OLD)
    server = Server(args.serve, "--simulate", "1", "--probes", "simulated", "--interval", "0.1",
                    "--listen", "127.0.0.1:0", "--tcp", "127.0.0.1:0", "--token", token_file)
    try:
        host, port = server.tcp.rsplit(":", 1)
        client = socket.create_connection((host, int(port)), timeout=10)
        f = client.makefile("rwb")
        f.write((json.dumps({"type": "auth", "token": OLD}) + "\n").encode())
        f.flush()
        if json.loads(f.readline())["type"] != "hello":
            fail("the TCP client got no hello with the old token")
        if status(server, OLD) != 200:
            fail("the old token is not accepted at start")

        write_token(token_file, NEW)
        server.proc.send_signal(signal.SIGHUP)
        server.wait_for_line("a new token is required from now on")
        if server.proc.poll() is not None:
            fail(f"serve exited on SIGHUP with {server.proc.returncode}")
        if status(server, OLD) != 401:
            fail("the old token is still accepted after the reload")
        if status(server, NEW) != 200:
            fail("the new token is not accepted after the reload")
        # The client connected with the old token still receives snapshots.
        got = 0
        deadline = time.monotonic() + 10
        while got < 5 and time.monotonic() < deadline:
            m = json.loads(f.readline())
            if m.get("type") == "snapshot":
                got += 1
        if got < 5:
            fail(f"the connected client received {got} snapshots after the reload, not 5")

        # A token file that cannot be read: the token in force stays, and the log says why.
        os.remove(token_file)
        server.proc.send_signal(signal.SIGHUP)
        server.wait_for_line("the old token stays")
        if status(server, NEW) != 200:
            fail("a failed reload changed the token")

        # A storm: still serving, still one process.
        write_token(token_file, NEW)
        for _ in range(200):
            server.proc.send_signal(signal.SIGHUP)
        time.sleep(0.5)
        if server.proc.poll() is not None:
            fail(f"serve exited during a SIGHUP storm with {server.proc.returncode}")
        if status(server, NEW) != 200:
            fail("not serving after a SIGHUP storm")
        client.close()
        server.stop()  # exit 0 within 10 s of SIGTERM, or it fails
    finally:
        if server.proc.poll() is None:
            server.kill()
    config_reload(args)
    print("PASS", flush=True)


if __name__ == "__main__":
    main()
