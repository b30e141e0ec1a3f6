"""The TCP client behaviours of the soak/abuse test (tests/integration/soak.py; WebSocket and
HTTP ones in soak_clients_ws.py): a lossless reader, filtered readers, and hostile ones. Each
behaviour is a coroutine `run(soak, lifetime)` returning a short outcome word; it counts what it
received in `soak.stats`. Nothing here asserts: soak.py judges the figures."""
import asyncio
import json
import os
import socket

from wire import LossLedger, message_kind

METRICS = ["utilization_percent", "memory_utilization_percent", "memory_used_bytes",
           "memory_total_bytes", "temperature_celsius", "power_watts", "power_average_watts",
           "power_limit_watts", "energy_joules", "clock_graphics_mhz", "clock_sm_mhz",
           "clock_memory_mhz", "fan_percent", "fan_rpm", "gtt_used_bytes", "gtt_total_bytes"]


def subscribe_line(**keys):
    return json.dumps({"type": "subscribe", **keys}, separators=(",", ":"))


def random_filter(soak, rng):
    keys = {}
    if rng.random() < 0.5:
        keys["fields"] = rng.sample(METRICS, rng.randint(1, 5))
    if rng.random() < 0.4 and soak.probes:
        keys["probes"] = rng.sample(soak.probes, 1) + (["no-such-probe"] if rng.random() < 0.3 else [])
    if rng.random() < 0.4 and soak.devices:
        keys["devices"] = rng.sample(soak.devices, rng.randint(1, min(3, len(soak.devices))))
    if rng.random() < 0.5:
        keys["max_rate_hz"] = rng.choice([0.5, 1, 2, 5, 10])
    return keys


def device_flood(soak, rng):
    """One real device id and many unique long ones, just under the message limit (the
    projection-cache blow-up of issue 11)."""
    ids = [rng.choice(soak.devices)] if soak.devices else []
    tag = os.urandom(6).hex()
    budget = soak.max_message_bytes - 512
    n = min(255, budget // 250)
    ids += [f"{tag}-{i:04d}-".ljust(245, "x") for i in range(n)]
    return {"devices": ids, "fields": rng.sample(METRICS, 3)}


# --- TCP ------------------------------------------------------------------------------------

async def tcp_open(soak, local, rcvbuf=None):
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.bind((local, 0))
    sock.setblocking(False)
    try:
        await asyncio.get_running_loop().sock_connect(sock, soak.tcp_addr)
    except OSError:
        sock.close()
        raise
    soak.stats.opened("tcp")
    return sock


async def tcp_streams(soak, local):
    sock = await tcp_open(soak, local)
    return await asyncio.open_connection(sock=sock, limit=1 << 24)


async def read_lines(soak, reader, until, on_message=None):
    """Reads lines until `until` (loop time) or EOF; returns 'eof' or 'timeout'."""
    loop = asyncio.get_running_loop()
    while True:
        left = until - loop.time()
        if left <= 0:
            return "timeout"
        try:
            line = await asyncio.wait_for(reader.readline(), left)
        except asyncio.TimeoutError:
            return "timeout"
        if not line:
            return "eof"
        soak.stats.received(len(line))
        if not line.endswith(b"\n"):
            soak.stats.note("cut_lines")
            return "eof"
        if on_message:
            on_message(line)


async def lossless_tcp(soak, lifetime):
    rng = soak.rng()
    ledger = LossLedger()
    soak.ledgers.append(("tcp", ledger))
    reader, writer = await tcp_streams(soak, soak.lossless_addr)
    loop = asyncio.get_running_loop()
    state = {"hello": False}

    def on(line):
        kind, body = message_kind(line)
        if kind == "snapshot":
            ledger.snapshot(body)
        elif kind == "hello":
            ledger.start(body["last_sequence"])
            state["hello"] = True
        elif kind == "gap":
            ledger.gap(body)
        elif kind == "error":
            ledger.violations.append(f"error {body}")

    fields = rng.sample(METRICS, rng.randint(1, 4)) if rng.random() < 0.5 else None
    writer.write((subscribe_line(**({"fields": fields} if fields else {})) + "\n").encode())
    end = await read_lines(soak, reader, loop.time() + lifetime, on)
    writer.close()
    if end == "eof":
        ledger.violations.append("the server closed the connection of a reading client")
    return "ok" if not ledger.violations else "violations"


class OrderCheck:
    """Notes a snapshot whose sequence is not above the previous one within a subscription
    (a `subscribed` with `since` resets the expectation)."""

    def __init__(self, soak):
        self.soak = soak
        self.last = 0
        self.rated = False  # whether the current subscription has max_rate_hz

    def on(self, raw):
        kind, body = message_kind(raw)
        if kind == "snapshot":
            if body <= self.last:
                self.soak.stats.note("out_of_order_" + ("with_max_rate" if self.rated else "no_rate"))
            self.last = body
        elif kind == "subscribed" and body.get("since") is not None:
            self.last = body["since"]


async def filtered_tcp(soak, lifetime):
    rng = soak.rng()
    reader, writer = await tcp_streams(soak, soak.next_addr())
    loop = asyncio.get_running_loop()
    until = loop.time() + lifetime
    order = OrderCheck(soak)
    on = order.on
    while True:
        keys = random_filter(soak, rng)
        order.rated = "max_rate_hz" in keys
        writer.write((subscribe_line(**keys) + "\n").encode())
        end = await read_lines(soak, reader, min(until, loop.time() + rng.uniform(1, 6)), on)
        if end == "eof" or loop.time() >= until:
            break
    writer.close()
    return "closed_by_server" if end == "eof" else "ok"


async def device_flood_tcp(soak, lifetime):
    rng = soak.rng()
    reader, writer = await tcp_streams(soak, soak.next_addr())
    loop = asyncio.get_running_loop()
    until = loop.time() + lifetime
    end = "timeout"
    while loop.time() < until and end != "eof":
        writer.write((subscribe_line(**device_flood(soak, rng)) + "\n").encode())
        end = await read_lines(soak, reader, min(until, loop.time() + rng.uniform(0.2, 1.0)))
    writer.close()
    return "closed_by_server" if end == "eof" else "held"


async def half_close_tcp(soak, lifetime):
    """subscribe, then shutdown(SHUT_WR) like `nc -N`: the stream must go on."""
    reader, writer = await tcp_streams(soak, soak.next_addr())
    writer.write((subscribe_line(fields=["power_watts"]) + "\n").encode())
    await writer.drain()
    writer.write_eof()
    loop = asyncio.get_running_loop()
    count = [0]
    start = loop.time()

    def on(line):
        if line.startswith(b'{"type":"snapshot"') and loop.time() - start > 1.0:
            count[0] += 1
    end = await read_lines(soak, reader, start + max(lifetime, 2.0), on)
    writer.close()
    if count[0] and end == "timeout":
        return "streamed_on"
    return "ended_after_half_close"


async def huge_tcp(soak, lifetime):
    """A 1 MiB line: an `error` too_large, then the end of the connection."""
    reader, writer = await tcp_streams(soak, soak.next_addr())
    got = []
    try:
        writer.write(b'{"type":"subscribe","devices":["' + b"x" * (1 << 20) + b'"]}\n')
        await writer.drain()
    except OSError:
        pass
    loop = asyncio.get_running_loop()
    try:
        end = await read_lines(soak, reader, loop.time() + 10,
                               lambda l: got.append(l) if b'"type":"error"' in l else None)
    except OSError:
        end = "reset"
    writer.close()
    codes = sorted({json.loads(g).get("code") for g in got})
    return f"{end}:{','.join(codes) or 'no_error'}"


async def endless_tcp(soak, lifetime):
    """Bytes without a newline, 64 KiB at a time, up to 8 MiB: the server must cut us off."""
    reader, writer = await tcp_streams(soak, soak.next_addr())
    sent = 0
    try:
        while sent < (8 << 20):
            writer.write(b"a" * 65536)
            await asyncio.wait_for(writer.drain(), 10)
            sent += 65536
    except (OSError, asyncio.TimeoutError):
        pass
    codes = set()
    loop = asyncio.get_running_loop()
    try:
        await read_lines(soak, reader, loop.time() + 5, lambda l: codes.add(
            json.loads(l).get("code")) if b'"type":"error"' in l else None)
    except OSError:
        pass
    writer.close()
    return ("cut_off" if sent < (8 << 20) else "8MiB_written") + ":" + \
        (",".join(sorted(c for c in codes if c)) or "no_error")


async def spam_tcp(soak, lifetime):
    """Repeated auth, empty lines, garbage and over-limit subscribes in one burst, then read."""
    rng = soak.rng()
    reader, writer = await tcp_streams(soak, soak.next_addr())
    burst = []
    burst += [b'{"type":"auth","token":"not-needed"}\n'] * 20000
    burst += [b"\n", b" \r\n"] * 50000
    burst += [b"\xff\xfe not utf-8\n", b"[" * 5000 + b"\n", b'{"type":"subscribe","max_rate_hz":1e-300}\n',
              b'{"type":"subscribe","since":18446744073709551615}\n', b"null\n", b"{}\n"]
    burst += [(subscribe_line(fields=[rng.choice(METRICS)]) + "\n").encode()] * 100
    try:
        writer.write(b"".join(burst))
        await asyncio.wait_for(writer.drain(), 10)
    except (OSError, asyncio.TimeoutError):
        pass
    errors = {}

    def on(line):
        if b'"type":"error"' in line:
            code = json.loads(line).get("code")
            errors[code] = errors.get(code, 0) + 1
    loop = asyncio.get_running_loop()
    try:
        end = await read_lines(soak, reader, loop.time() + max(2.0, min(lifetime, 5.0)), on)
    except OSError:
        end = "reset"
    writer.close()
    for code, n in errors.items():
        soak.stats.note(f"spam_error_{code}", n)
    return "closed" if end != "timeout" else "open"


async def stalled_tcp(soak, lifetime):
    """Subscribes, never reads, tiny receive buffer."""
    sock = await tcp_open(soak, soak.next_addr(), rcvbuf=4096)
    loop = asyncio.get_running_loop()
    try:
        await loop.sock_sendall(sock, (subscribe_line() + "\n").encode())
        await asyncio.sleep(lifetime)
    finally:
        sock.close()
    return "held"


async def idle_tcp(soak, lifetime):
    sock = await tcp_open(soak, soak.next_addr())
    try:
        await asyncio.sleep(lifetime)
    finally:
        sock.close()
    return "held"


async def churn_tcp(soak, lifetime):
    for _ in range(soak.rng().randint(3, 10)):
        reader, writer = await tcp_streams(soak, soak.next_addr())
        line = await asyncio.wait_for(reader.readline(), 10)
        writer.close()
        if not line.startswith(b'{"type":"hello"'):
            return "no_hello"
    return "ok"
