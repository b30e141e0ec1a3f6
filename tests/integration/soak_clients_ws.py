"""The WebSocket and HTTP behaviours of the soak/abuse test (see soak_clients.py for the
conventions: `run(soak, lifetime)` returns an outcome word and counts into `soak.stats`)."""
import asyncio
import json
import socket

import websockets
import websockets.exceptions

from soak_clients import METRICS, OrderCheck, device_flood, random_filter, subscribe_line
from wire import LossLedger, RawWebSocket, close_code, message_kind


# --- WebSocket ------------------------------------------------------------------------------

def ws_connect(soak, local, **kw):
    soak.stats.opened("ws")
    return websockets.connect(soak.ws_uri, max_size=None, ping_interval=None, close_timeout=2,
                              open_timeout=10, local_addr=(local, 0), **kw)


async def ws_read(soak, ws, until, on_message=None):
    loop = asyncio.get_running_loop()
    try:
        while True:
            left = until - loop.time()
            if left <= 0:
                return "timeout"
            try:
                msg = await asyncio.wait_for(ws.recv(), left)
            except asyncio.TimeoutError:
                return "timeout"
            raw = msg.encode() if isinstance(msg, str) else msg
            soak.stats.received(len(raw))
            if on_message:
                on_message(raw)
    except websockets.exceptions.ConnectionClosed as e:
        return f"closed_{e.rcvd.code if e.rcvd else 'abnormal'}"


async def lossless_ws(soak, lifetime):
    rng = soak.rng()
    ledger = LossLedger()
    soak.ledgers.append(("ws", ledger))
    loop = asyncio.get_running_loop()
    async with ws_connect(soak, soak.lossless_addr) as ws:
        def on(raw):
            kind, body = message_kind(raw)
            if kind == "snapshot":
                ledger.snapshot(body)
            elif kind == "hello":
                ledger.start(body["last_sequence"])
            elif kind == "gap":
                ledger.gap(body)
            elif kind == "error":
                ledger.violations.append(f"error {body}")
        fields = rng.sample(METRICS, rng.randint(1, 4)) if rng.random() < 0.5 else None
        await ws.send(subscribe_line(**({"fields": fields} if fields else {})))
        end = await ws_read(soak, ws, loop.time() + lifetime, on)
    if end != "timeout":
        ledger.violations.append(f"the server ended the connection of a reading client: {end}")
    return "ok" if not ledger.violations else "violations"


async def filtered_ws(soak, lifetime):
    rng = soak.rng()
    loop = asyncio.get_running_loop()
    until = loop.time() + lifetime
    order = OrderCheck(soak)
    on = order.on
    async with ws_connect(soak, soak.next_addr()) as ws:
        while True:
            keys = random_filter(soak, rng)
            order.rated = "max_rate_hz" in keys
            await ws.send(subscribe_line(**keys))
            end = await ws_read(soak, ws, min(until, loop.time() + rng.uniform(1, 6)), on)
            if end != "timeout" or loop.time() >= until:
                break
    return end if end != "timeout" else "ok"


async def device_flood_ws(soak, lifetime):
    rng = soak.rng()
    loop = asyncio.get_running_loop()
    until = loop.time() + lifetime
    async with ws_connect(soak, soak.next_addr()) as ws:
        end = "timeout"
        while loop.time() < until and end == "timeout":
            await ws.send(subscribe_line(**device_flood(soak, rng)))
            end = await ws_read(soak, ws, min(until, loop.time() + rng.uniform(0.2, 1.0)))
    return end if end != "timeout" else "held"


async def huge_ws(soak, lifetime):
    """A 1 MiB text frame: the server closes with 1009."""
    try:
        async with ws_connect(soak, soak.next_addr()) as ws:
            await ws.send("x" * (1 << 20))
            loop = asyncio.get_running_loop()
            return await ws_read(soak, ws, loop.time() + 10)
    except websockets.exceptions.ConnectionClosed as e:
        return f"closed_{e.rcvd.code if e.rcvd else 'abnormal'}"


async def raw_ws(soak, local, rcvbuf=None):
    ws, status, _ = await RawWebSocket.open(soak.http_addr[0], soak.http_addr[1], local,
                                            rcvbuf=rcvbuf)
    soak.stats.opened("ws")
    return ws, status


async def garbage_ws(soak, lifetime):
    """Invalid UTF-8, a binary frame, non-JSON, deep nesting; reads what comes back."""
    ws, status = await raw_ws(soak, soak.next_addr())
    if status != 101:
        ws.close()
        return f"http_{status}"
    frames = [(1, b"not json"), (2, b"\x00\x01binary"), (1, b"[" * 5000),
              (1, b'{"type":"subscribe","fields":["watts"]}'), (1, b"\xc3\x28 bad utf-8")]
    for op, payload in frames:
        ws.send(op, payload)
    seen = []
    try:
        while True:
            op, payload = await asyncio.wait_for(ws.recv_frame(), 5)
            soak.stats.received(len(payload))
            if op == 8:
                seen.append(f"close_{close_code(payload)}")
                break
            if op == 1 and payload.startswith(b'{"type":"error"'):
                seen.append("error")
    except (asyncio.TimeoutError, asyncio.IncompleteReadError, OSError):
        seen.append("end")
    ws.close()
    return "+".join(sorted(set(seen)))


async def stalled_ws(soak, lifetime):
    """Upgrades, never reads another byte, tiny receive buffer."""
    ws, status = await raw_ws(soak, soak.next_addr(), rcvbuf=4096)
    try:
        if status == 101:
            ws.send(1, subscribe_line().encode())
        await asyncio.sleep(lifetime)
    finally:
        ws.close()
    return "held" if status == 101 else f"http_{status}"


async def churn_ws(soak, lifetime):
    for _ in range(soak.rng().randint(3, 10)):
        async with ws_connect(soak, soak.next_addr()) as ws:
            hello = json.loads(await asyncio.wait_for(ws.recv(), 10))
            if hello.get("type") != "hello":
                return "no_hello"
    return "ok"


async def slowloris_http(soak, lifetime):
    """Half an HTTP request, then silence: the handshake timeout must close it."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((soak.next_addr(), 0))
    sock.setblocking(False)
    loop = asyncio.get_running_loop()
    try:
        await loop.sock_connect(sock, soak.http_addr)
        soak.stats.opened("http")
        await loop.sock_sendall(sock, b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1")
        data = await asyncio.wait_for(loop.sock_recv(sock, 4096), lifetime)
        return "closed_by_server" if not data else "answered"
    except asyncio.TimeoutError:
        return "held"
    finally:
        sock.close()
