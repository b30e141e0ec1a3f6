"""`promtool check metrics` (Debian `prometheus`) on the real `gpustream serve`'s /metrics in
every state it can be in (issue 11, defect 11): just started; sampling with probes in several
states; a probe failing with errors in its snapshots; busy server counters (WebSocket and TCP
clients, a reader that stalls, refused Host, wrong token, rejected messages); the NATS bridge
on, then with its NATS server gone. Each state is first proven to be there (the figures that
make it are checked), then promtool must print nothing and exit 0. Exit 0 on success, 1 with a
FAIL line otherwise."""
import argparse
import asyncio
import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_helper import Server, fail, free_port, require_executable  # noqa: E402
from nats_helper import NATS_SERVER, start_nats  # noqa: E402
from wire import RawWebSocket  # noqa: E402

PROMTOOL = "/usr/bin/promtool"
TOKEN = "s3cret-token"
HERE = os.path.dirname(os.path.abspath(__file__))
FAKE_AMD = os.path.join(HERE, "..", "fakes", "amd_smi")

# amd-smi whose behaviour the test switches through a file: the project's fake amd-smi (recorded
# outputs) run in the mode named in MODE_FILE.
AMD_WRAPPER = """#!/bin/sh
exec "{fake}" --fake-data "{data}" --fake-mode "$(cat "{mode_file}")" "$@"
"""


def scrape(server, token=TOKEN):
    req = urllib.request.Request(f"http://{server.http}/metrics",
                                 headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(req, timeout=10) as r:
        if not r.headers.get("Content-Type", "").startswith("text/plain; version=0.0.4"):
            fail(f"/metrics content type {r.headers.get('Content-Type')}")
        return r.read().decode()


def value(body, series):
    """The value of the first sample whose line starts with `series` (name{labels...)."""
    for line in body.splitlines():
        if line.startswith(series):
            return float(line.rsplit(" ", 1)[1])
    return None


def promtool_clean(state, body):
    r = subprocess.run([PROMTOOL, "check", "metrics"], input=body, capture_output=True, text=True,
                       timeout=30)
    out = (r.stdout + r.stderr).strip()
    if r.returncode != 0 or out:
        fail(f"[{state}] promtool check metrics (exit {r.returncode}):\n{out}\n--- /metrics:\n{body}")
    families = len(re.findall(r"^# TYPE ", body, re.M))
    print(f"[{state}] promtool check metrics: clean ({families} families)", flush=True)


def wait_for(server, state, what, predicate, timeout=30):
    deadline = time.monotonic() + timeout
    body = ""
    while time.monotonic() < deadline:
        body = scrape(server)
        if predicate(body):
            return body
        time.sleep(0.2)
    fail(f"[{state}] {what} did not happen within {timeout} s; /metrics:\n{body}")


def http_status(server, path, headers):
    req = urllib.request.Request(f"http://{server.http}{path}", headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


async def busy_clients(server, hold):
    """A WebSocket reader, a TCP reader, a TCP client that never reads, garbage; held open
    while `hold()` runs."""
    host, port = server.http.rsplit(":", 1)
    ws, status, _ = await RawWebSocket.open(host, int(port),
                                            headers={"Authorization": f"Bearer {TOKEN}"})
    if status != 101:
        fail(f"WebSocket upgrade with the token: HTTP {status}")
    ws.send(1, b"not json")  # rejected, counted
    thost, tport = server.tcp.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(thost, int(tport), limit=1 << 24)
    writer.write(f'{{"type":"auth","token":"{TOKEN}"}}\n{{"type":"subscribe"}}\n'.encode())
    stalled = socket.create_connection((thost, int(tport)))
    stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    stalled.sendall(f'{{"type":"auth","token":"{TOKEN}"}}\n'.encode())
    bad = socket.create_connection((thost, int(tport)))
    bad.sendall(b'{"type":"auth","token":"wrong"}\n')  # unauthorized, closed
    loop = asyncio.get_running_loop()

    async def read_all():
        try:
            while True:
                if not await reader.readline():
                    return
        except OSError:
            return
    drain = asyncio.ensure_future(read_all())
    try:
        await loop.run_in_executor(None, hold)
    finally:
        drain.cancel()
        ws.close()
        writer.close()
        stalled.close()
        bad.close()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--serve", required=True)
    p.add_argument("--nats", action="store_true", help="this build has the NATS bridge")
    args = p.parse_args()
    require_executable(PROMTOOL, "prometheus")
    if args.nats:
        require_executable(NATS_SERVER, "nats-server")
    tmp = tempfile.mkdtemp(prefix="gpustream-promtool-")
    nats = server = None
    try:
        token_file = os.path.join(tmp, "token")
        with open(token_file, "w") as f:
            f.write(TOKEN + "\n")
        mode_file = os.path.join(tmp, "amd-mode")
        with open(mode_file, "w") as f:
            f.write("normal\n")
        wrapper = os.path.join(tmp, "amd-smi")
        with open(wrapper, "w") as f:
            f.write(AMD_WRAPPER.format(fake=os.path.abspath(os.path.join(FAKE_AMD, "fake_amd_smi.sh")),
                                       data=os.path.abspath(os.path.join(FAKE_AMD, "data")),
                                       mode_file=mode_file))
        os.chmod(wrapper, stat.S_IRWXU)
        extra = []
        if args.nats:
            port = free_port()
            nats = start_nats(port)
            extra = ["--nats", f"nats://127.0.0.1:{port}"]
        server = Server(args.serve, "--simulate", "2", "--interval", "0.1", "--listen",
                        "127.0.0.1:0", "--tcp", "127.0.0.1:0", "--token", token_file,
                        "--amd-source", "amd-smi", "--amd-smi", wrapper,
                        "--watch-pid", str(os.getpid()), *extra)

        # 1. Just started: whatever is there already.
        promtool_clean("started", scrape(server))

        # 2. Sampling: the simulated GPUs, the AMD GPUs of the fake amd-smi, the host; the other
        #    vendors' probes unavailable here, with a reason.
        body = wait_for(server, "sampling", "samples from every probe with latency quantiles",
                        lambda b: value(b, 'gpustream_probe_samples_total{probe="amd') and
                        value(b, 'gpustream_probe_sample_latency_seconds{probe="simulated",quantile="0.99"}')
                        is not None and "gpustream_host_memory_total_bytes" in b)
        if "# TYPE gpustream_probe_sample_latency_seconds summary" not in body:
            fail("the sample latency is not a summary:\n" + body)
        promtool_clean("sampling", body)

        # 3. The AMD tool breaks: failures, errors, back-off.
        with open(mode_file, "w") as f:
            f.write("partial\n")
        body = wait_for(server, "failing probe", "AMD sample failures",
                        lambda b: (value(b, 'gpustream_probe_failures_total{probe="amd') or 0) >= 2)
        promtool_clean("failing probe", body)

        # 4. Busy server counters, with clients held open.
        def hold():
            forbidden = http_status(server, "/metrics", {"Host": "evil.example.com",
                                                         "Authorization": f"Bearer {TOKEN}"})
            unauthorized = http_status(server, "/metrics", {"Authorization": "Bearer wrong"})
            if (forbidden, unauthorized) != (403, 401):
                fail(f"expected 403 for a foreign Host and 401 for a wrong token, got "
                     f"{forbidden} and {unauthorized}")
            b = wait_for(server, "busy", "open WebSocket and TCP connections and refusals",
                         lambda b: (value(b, 'gpustream_server_connections{transport="websocket"}') or 0) >= 1
                         and (value(b, 'gpustream_server_connections{transport="tcp"}') or 0) >= 2
                         and (value(b, 'gpustream_server_requests_refused_total{reason="forbidden"}') or 0) >= 1
                         and (value(b, 'gpustream_server_requests_refused_total{reason="unauthorized"}') or 0) >= 2
                         and (value(b, "gpustream_server_messages_rejected_total") or 0) >= 1
                         and (value(b, "gpustream_server_snapshots_sent_total") or 0) >= 1)
            promtool_clean("busy server" + (" + NATS bridge on" if args.nats else ""), b)
        asyncio.run(busy_clients(server, hold))

        # 5. The NATS server goes away: the bridge keeps trying; /metrics is unchanged in form.
        if nats is not None:
            nats.kill()
            nats.wait()
            nats = None
            time.sleep(1.0)
            promtool_clean("NATS server gone", scrape(server))
        server.stop()
        server = None

        # 6. Issue #28: the only GPU probe asked for is unavailable (no library, no tool) and
        #    --expect-gpus 2 with one simulated GPU: /healthz is 503 and says how many; /metrics
        #    has the counts and the requested probe the shipped alerts read.
        server = Server(args.serve, "--probes", "nvidia,simulated", "--simulate", "1",
                        "--nvml-library", os.path.join(tmp, "no", "libnvidia-ml.so.1"),
                        "--nvidia-smi", os.path.join(tmp, "no", "nvidia-smi"),
                        "--expect-gpus", "2", "--interval", "0.1", "--listen", "127.0.0.1:0",
                        "--token", token_file)
        body = wait_for(server, "expect-gpus", "the simulated GPU and the unavailable nvidia probe",
                        lambda b: value(b, "gpustream_gpus_readable") == 1
                        and value(b, 'gpustream_probe_state{probe="nvidia",state="unavailable"}')
                        == 1)
        for series, want in (('gpustream_probe_requested{probe="nvidia"}', 1),
                             ('gpustream_probe_up{probe="nvidia"}', 0),
                             ("gpustream_gpus_expected", 2)):
            if value(body, series) != want:
                fail(f"{series} is {value(body, series)}, expected {want}:\n{body}")
        promtool_clean("expect-gpus, a requested probe unavailable", body)
        try:
            with urllib.request.urlopen(f"http://{server.http}/healthz", timeout=10) as r:
                fail(f"/healthz answered {r.status} with 1 of 2 expected GPUs")
        except urllib.error.HTTPError as e:
            text = e.read().decode()
            want = "unhealthy: 1 GPU(s) readable, 2 expected (--expect-gpus)\n"
            if e.code != 503 or text != want:
                fail(f"/healthz: {e.code} {text!r}")
        print("[expect-gpus] /healthz: 503 unhealthy: 1 GPU(s) readable, 2 expected", flush=True)
        server.stop()
        server = None
        print("PASS: promtool check metrics is clean in every state", flush=True)
    finally:
        if server is not None:
            server.kill()
        if nats is not None:
            nats.kill()
            nats.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
