"""Cases of protocol_client.py: every way a connection ends (or is told off and stays open), and
exactly what the client sees (issue 18, item 13; issue 11, defects 3 and 9)."""
import asyncio
import signal
import socket
import urllib.error
import urllib.request

from protocol_conn import Closed, expect, open_conn, snapshots, until_closed
from protocol_cases import check
from wire import RawWebSocket, close_code


def open_counts(server):
    s = server.get_json("/api/v1/stats")["server"]
    return s["tcp_open"], s["websocket_open"]


async def case_end_client_close(server):
    """The client closes: the server forgets the connection."""
    t, w = await open_conn("tcp", server), await open_conn("ws", server)
    await expect(t, "hello")
    await expect(w, "hello")
    server.wait_until("both connections counted", lambda: open_counts(server) == (1, 1))
    await t.close()
    await w.close()
    server.wait_until("both connections gone", lambda: open_counts(server) == (0, 0))


async def case_end_shutdown(server):
    """SIGTERM: WebSocket close 1001 after what is queued; TCP ends with whole lines and a FIN;
    the server exits 0."""
    conns = [await open_conn("tcp", server), await open_conn("ws", server)]
    for c in conns:
        await expect(c, "hello")
        await snapshots(c, 3)
    server.proc.send_signal(signal.SIGTERM)
    for c in conns:
        _, how = await until_closed(c)  # TcpConn.recv fails on a line cut mid-message
        check(how == ("eof" if c.transport == "tcp" else 1001), f"{c.transport} ended by {how}")
    rc = await asyncio.get_running_loop().run_in_executor(None, lambda: server.proc.wait(10))
    check(rc == 0, f"exit {rc} after SIGTERM")


async def case_end_too_large(server):
    """--max-message-bytes 1024: TCP gets `error` too_large then the end; WebSocket close 1009."""
    t = await open_conn("tcp", server)
    await expect(t, "hello")
    await t.send_raw(b'{"type":"subscribe","devices":["' + b"x" * 2000 + b'"]}\n')
    got, how = await until_closed(t)
    errors = [m for m in got if m["type"] == "error"]
    check(errors and errors[-1]["code"] == "too_large" and got[-1] is errors[-1] and how == "eof",
          f"tcp too large: {errors}, then {how}")
    w = await open_conn("ws", server)
    await expect(w, "hello")
    await w.ws.send("x" * 2000)
    _, how = await until_closed(w)
    check(how == 1009, f"ws too large: closed with {how}, not 1009")


async def case_end_connection_limit(server):
    """Connections beyond the limit: `error` limit, then the end (TCP)."""
    held = []
    try:
        for _ in range(600):
            c = await open_conn("tcp", server)
            held.append(c)
            first = await c.recv()
            if first["type"] == "hello":
                continue
            check(first["type"] == "error" and first["code"] == "limit",
                  f"connection {len(held)}: {first}")
            got, how = await until_closed(c)
            check(how == "eof" and all(m["type"] != "snapshot" for m in got),
                  f"refused connection: then {got[:3]}, {how}")
            print(f"connection {len(held)} refused with error limit", flush=True)
            return
        raise AssertionError("600 TCP connections from one address were all accepted")
    finally:
        for c in held:
            await c.close()


async def case_limit_keeps_metrics(server):
    """Idle TCP connections up to the limit do not lock out /metrics and /healthz (issue 11,
    defect 9)."""
    host, port = server.tcp.rsplit(":", 1)
    held = []
    try:
        for i in range(300):
            s = socket.socket()
            s.bind((f"127.0.0.{2 + i % 32}", 0))  # not all from one address
            s.connect((host, int(port)))
            held.append(s)
        for s in held:  # the server has taken each one in (hello, or a refusal)
            s.settimeout(10)
            check(s.recv(1), "a TCP connection got nothing")
        for path in ("/metrics", "/healthz"):
            try:
                with urllib.request.urlopen(f"http://{server.http}{path}", timeout=10) as r:
                    check(r.status == 200, f"{path}: {r.status}")
            except urllib.error.HTTPError as e:
                raise AssertionError(f"{path} with 300 idle TCP clients: HTTP {e.code}")
    finally:
        for s in held:
            s.close()


def slow_disconnects(server):
    with urllib.request.urlopen(f"http://{server.http}/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith("gpustream_server_slow_clients_disconnected_total "):
                return float(line.split()[1])
    return 0.0


async def wait_for_slow_disconnects(server, n, timeout):
    deadline = asyncio.get_running_loop().time() + timeout
    while await asyncio.to_thread(slow_disconnects, server) < n:
        check(asyncio.get_running_loop().time() < deadline,
              f"the server did not disconnect {n} slow clients within {timeout} s")
        await asyncio.sleep(0.1)


async def case_end_slow_client(server):
    """A client that does not read is disconnected with an `error` first, and its last TCP line
    is whole (issue 18, item 13)."""
    conns = []
    for tr in ("tcp", "ws"):
        c = await open_conn(tr, server, rcvbuf=4096)
        await expect(c, "hello", skip=())
        c.stall()
        conns.append(c)
    # The queue stays full for 5 s: the server queues an `error` behind the message it is
    # writing and closes gracefully. Resume as soon as it says so: waiting longer would let the
    # stalled write reach its own 10 s bound, and that abort resets the connection (no error can
    # reach a client that does not read). How early the write stalls depends on the message
    # sizes, so a fixed sleep is a race.
    await wait_for_slow_disconnects(server, len(conns), timeout=30)
    for c in conns:
        c.resume()
        got, how = await until_closed(c, timeout=20)
        check(got and got[-1]["type"] == "error",
              f"{c.transport}: slow client ended ({how}) without an error; last message "
              f"{got[-1]['type'] if got else None}")


async def case_invalid_utf8(server):
    """WebSocket: a text frame with invalid UTF-8 is closed with 1007 (RFC 6455)."""
    host, port = server.http.rsplit(":", 1)
    ws, status, _ = await RawWebSocket.open(host, int(port))
    check(status == 101, f"upgrade: {status}")
    ws.send(1, b'{"type":"subscribe","probes":["\xff"]}')
    while True:
        op, payload = await asyncio.wait_for(ws.recv_frame(), 10)
        if op == 8:
            check(close_code(payload) == 1007, f"closed with {close_code(payload)}, not 1007")
            break
    ws.close()


async def case_invalid_utf8_tcp(server):
    """TCP: invalid UTF-8 gets an `error` that says UTF-8, and the connection stays usable
    (issue 18, item 13)."""
    t = await open_conn("tcp", server)
    await expect(t, "hello")
    await t.send_raw(b'{"type":"subscribe","probes":["\xff"]}\n')
    e = await expect(t, "error")
    check("utf-8" in e.get("message", "").lower(), f"the error does not say UTF-8: {e}")
    await t.send({"type": "subscribe", "fields": ["power_watts"]})
    await expect(t, "subscribed")
    await snapshots(t, 2)
    await t.close()


async def case_bad_request(server):
    """Malformed messages get `error` bad_request; the connection and its subscription stay."""
    for tr in ("tcp", "ws"):
        c = await open_conn(tr, server)
        await expect(c, "hello")
        await c.send({"type": "subscribe", "probes": ["host"]})
        await expect(c, "subscribed")
        bad = ["not json", "[1]", '{"type":"dance"}', '{"type":"subscribe","fields":["watts"]}',
               '{"type":"subscribe","max_rate_hz":0}']
        for text in bad:
            if tr == "tcp":
                await c.send_raw(text.encode() + b"\n")
            else:
                await c.ws.send(text)
            e = await expect(c, "error")
            check(e["code"] == "bad_request", f"{tr} {text!r}: {e}")
        if tr == "ws":  # protocol.md, Framing: binary frames are refused with an error
            await c.ws.send(b'{"type":"subscribe"}')
            e = await expect(c, "error")
            check(e["code"] == "bad_request", f"binary frame: {e}")
        for s in await snapshots(c, 3):
            check(s["probe"] == "host", f"{tr}: the subscription changed after bad requests")
        await c.close()


async def case_subscribe_limit(server):
    """--max-subscribes 3: the 4th gets `error` limit; the connection stays."""
    c = await open_conn("ws", server)
    await expect(c, "hello")
    for _ in range(3):
        await c.send({"type": "subscribe"})
        await expect(c, "subscribed")
    await c.send({"type": "subscribe", "probes": ["host"]})
    e = await expect(c, "error")
    check(e["code"] == "limit", f"4th subscribe: {e}")
    await snapshots(c, 3)
    await c.close()


async def case_head_request(server):
    """protocol.md, HTTP endpoints: "All answer GET only (405 otherwise)" — every path, HEAD
    included (issue 18, item 13); a 405 names what is allowed (RFC 9110)."""
    for path in ("/", "/metrics", "/api/v1/snapshot", "/api/v1/devices", "/api/v1/stats",
                 "/healthz"):
        for method in ("HEAD", "POST", "PUT", "DELETE"):
            req = urllib.request.Request(f"http://{server.http}{path}", method=method,
                                         data=b"" if method in ("POST", "PUT") else None)
            try:
                with urllib.request.urlopen(req, timeout=10) as r:
                    raise AssertionError(f"{method} {path}: {r.status}, not 405")
            except urllib.error.HTTPError as e:
                check(e.code == 405, f"{method} {path}: {e.code}, not 405")
                check("GET" in e.headers.get("Allow", ""), f"{method} {path}: 405 without Allow: GET")


async def case_half_close(server):
    """TCP: subscribe, then shutdown(SHUT_WR) (`nc -N`): the stream goes on (issue 11, defect 3)."""
    t = await open_conn("tcp", server)
    await expect(t, "hello")
    await t.send({"type": "subscribe", "fields": ["power_watts"]})
    await expect(t, "subscribed")
    t.half_close()
    try:
        got = await snapshots(t, 40, timeout=5)
    except Closed as e:
        raise AssertionError(f"the stream ended ({e.how}) after the client's half-close")
    check(len(got) == 40, "fewer snapshots than asked")
    await t.close()


FAST = ["--simulate", "2", "--interval", "0.05"]
CASES_LIFECYCLE = {
    "end_client_close": (FAST, case_end_client_close),
    "end_shutdown": (FAST, case_end_shutdown),
    "end_too_large": (FAST + ["--max-message-bytes", "1024"], case_end_too_large),
    "end_connection_limit": (FAST, case_end_connection_limit),
    "limit_keeps_metrics": (FAST, case_limit_keeps_metrics),
    "end_slow_client": (["--simulate", "8", "--interval", "0.05", "--send-queue", "4"],
                        case_end_slow_client),
    "invalid_utf8_ws": (FAST, case_invalid_utf8),
    "invalid_utf8_tcp": (FAST, case_invalid_utf8_tcp),
    "bad_request": (FAST, case_bad_request),
    "subscribe_limit": (FAST + ["--max-subscribes", "3"], case_subscribe_limit),
    "head_request": (FAST, case_head_request),
    "half_close": (FAST, case_half_close),
}
