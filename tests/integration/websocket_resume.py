"""A third-party WebSocket client (python3-websockets) subscribes to `gpustream serve`, drops the
connection, and resumes with `since`: it must get every snapshot after the one it last saw, in
order, with no duplicate and no hole. Also: a foreign Origin is refused, and SIGTERM closes the
stream with 1001. Exit 0 on success, 1 with a FAIL line otherwise."""
import asyncio
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_helper import Server, fail, parse_args  # noqa: E402

try:
    import websockets
    import websockets.exceptions
except ImportError:
    fail("python3-websockets is missing: install the Debian package 'python3-websockets' "
         "(scripts/deps.sh test does)")


async def recv_json(ws, timeout=10):
    try:
        return json.loads(await asyncio.wait_for(ws.recv(), timeout))
    except asyncio.TimeoutError:
        fail("no message from the server within 10 s")


async def run(server):
    uri = f"ws://{server.http}/ws"
    # 1. Live stream: hello, then snapshots; remember the last sequence.
    async with websockets.connect(uri, max_size=None) as ws:
        hello = await recv_json(ws)
        if hello.get("type") != "hello" or hello.get("schema") != "gpustream/1":
            fail(f"first message is not a hello: {hello}")
        seqs = []
        while len(seqs) < 5:
            m = await recv_json(ws)
            if m["type"] == "snapshot":
                seqs.append(m["sequence"])
        if seqs != sorted(seqs) or len(set(seqs)) != len(seqs):
            fail(f"live sequences out of order: {seqs}")
        last = seqs[-1]
    print(f"live: {seqs}; disconnected after {last}", flush=True)

    # 2. While disconnected, the server moves on.
    server.wait_until("the server to publish 10 more snapshots",
                      lambda: max(s["sequence"] for s in server.get_json("/api/v1/snapshot")["snapshots"]) >= last + 10)

    # 3. Resume: everything after `last`, in order, then live.
    async with websockets.connect(uri, max_size=None) as ws:
        await recv_json(ws)  # hello
        await ws.send(json.dumps({"type": "subscribe", "since": last,
                                  "fields": ["power_watts", "utilization_percent"]}))
        ack = await recv_json(ws)
        if ack.get("type") != "subscribed" or ack.get("since") != last:
            fail(f"expected a subscribed ack with since={last}: {ack}")
        got = []
        while len(got) < 25:
            m = await recv_json(ws)
            if m["type"] == "gap":
                fail(f"unexpected gap while resuming: {m}")
            if m["type"] != "snapshot":
                fail(f"unexpected message: {m}")
            got.append(m["sequence"])
            for d in m["devices"]:
                if set(d["metrics"]) - {"power_watts", "utilization_percent"}:
                    fail(f"projection not applied: {sorted(d['metrics'])}")
        expected = list(range(last + 1, last + 1 + len(got)))
        if got != expected:
            fail(f"resume is not exactly {last + 1}..: got {got}")
    print(f"resumed: {got[0]}..{got[-1]} with no duplicate and no hole", flush=True)

    # 4. A page from another origin may not open the stream.
    try:
        async with websockets.connect(uri, origin="http://evil.example.com"):
            fail("a WebSocket from a foreign Origin was accepted")
    except websockets.exceptions.InvalidStatusCode as e:
        if e.status_code != 403:
            fail(f"foreign Origin: expected 403, got {e.status_code}")
    print("foreign Origin refused with 403", flush=True)

    # 5. SIGTERM: the open stream ends with a close frame 1001 (going away).
    async with websockets.connect(uri, max_size=None) as ws:
        await recv_json(ws)
        server.proc.send_signal(__import__("signal").SIGTERM)
        try:
            while True:
                await asyncio.wait_for(ws.recv(), 10)
        except websockets.exceptions.ConnectionClosed as e:
            if e.rcvd is None or e.rcvd.code != 1001:
                fail(f"expected close code 1001 on shutdown, got {e.rcvd}")
        except asyncio.TimeoutError:
            fail("the stream did not close within 10 s of SIGTERM")
    print("shutdown closed the stream with 1001", flush=True)


def main():
    args = parse_args()
    server = Server(args.serve, "--simulate", "1", "--listen", "127.0.0.1:0", "--interval", "0.1")
    try:
        asyncio.run(run(server))
    except SystemExit:
        server.kill()
        raise
    except Exception as e:  # noqa: BLE001 — any client error is a failure with its message
        server.kill()
        fail(f"{type(e).__name__}: {e}")
    try:
        rc = server.proc.wait(timeout=10)
    except Exception:
        server.kill()
        fail("the server did not exit within 10 s of SIGTERM")
    if rc != 0:
        fail(f"the server exited with {rc}; stderr:\n" + "".join(server.stderr))
    print("PASS: python3-websockets subscribed, resumed without loss, and saw a clean shutdown",
          flush=True)


if __name__ == "__main__":
    main()
