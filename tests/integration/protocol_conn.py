"""The client side of docs/protocol.md ("Wire messages"), as its reader would write it: one
connection over TCP (one JSON object per line, `\\n`-terminated) or WebSocket (one text frame per
message), the same messages on both."""
import asyncio
import json
import socket

import websockets
import websockets.exceptions


class Closed(Exception):
    """The server ended the connection; `how` says how (eof, or the WebSocket close code)."""

    def __init__(self, how):
        super().__init__(how)
        self.how = how


def decode(raw):
    """A message: a JSON object whose first key is "type" (the doc's promise)."""
    msg = json.loads(raw)
    if not isinstance(msg, dict) or next(iter(msg), None) != "type":
        raise AssertionError(f"not a message with 'type' first: {raw[:200]!r}")
    return msg


class TcpConn:
    transport = "tcp"

    def __init__(self, reader, writer, sock):
        self.reader, self.writer, self.sock = reader, writer, sock
        self.raw = []  # every line as received, for checks on the text itself

    @classmethod
    async def open(cls, server, token=None, rcvbuf=None):
        host, port = server.tcp.rsplit(":", 1)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, (host, int(port)))
        reader, writer = await asyncio.open_connection(sock=sock, limit=1 << 24)
        conn = cls(reader, writer, sock)
        if token is not None:
            await conn.send({"type": "auth", "token": token})
        return conn

    async def send(self, msg):
        self.writer.write((json.dumps(msg) + "\n").encode())
        await self.writer.drain()

    async def send_raw(self, data):
        self.writer.write(data)
        await self.writer.drain()

    async def recv(self, timeout=10):
        try:
            line = await asyncio.wait_for(self.reader.readline(), timeout)
        except ConnectionResetError:
            raise Closed("reset")
        if not line:
            raise Closed("eof")
        if not line.endswith(b"\n"):
            raise AssertionError(f"a line cut mid-message before the end: {line[-120:]!r}")
        self.raw.append(line)
        return decode(line)

    def half_close(self):
        self.writer.write_eof()

    def stall(self):
        """Stop reading from the socket (a reader that fell asleep)."""
        self.writer.transport.pause_reading()

    def resume(self):
        self.writer.transport.resume_reading()

    async def close(self):
        self.writer.close()
        try:
            await self.writer.wait_closed()
        except OSError:
            pass


class WsConn:
    transport = "ws"

    def __init__(self, ws):
        self.ws = ws
        self.raw = []

    @classmethod
    async def open(cls, server, token=None, query_token=None, rcvbuf=None, **kw):
        uri = f"ws://{server.http}/ws" + (f"?token={query_token}" if query_token else "")
        headers = {"Authorization": f"Bearer {token}"} if token else None
        if rcvbuf:
            host, port = server.http.rsplit(":", 1)
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
            sock.connect((host, int(port)))
            kw["sock"] = sock
        ws = await websockets.connect(uri, extra_headers=headers, max_size=None,
                                      ping_interval=None, close_timeout=5, **kw)
        return cls(ws)

    async def send(self, msg):
        await self.ws.send(json.dumps(msg))

    def stall(self):
        self.ws.transport.pause_reading()

    def resume(self):
        self.ws.transport.resume_reading()

    async def recv(self, timeout=10):
        try:
            raw = await asyncio.wait_for(self.ws.recv(), timeout)
        except websockets.exceptions.ConnectionClosed as e:
            raise Closed(e.rcvd.code if e.rcvd else "abnormal")
        if not isinstance(raw, str):
            raise AssertionError("a binary frame from the server")
        self.raw.append(raw.encode())
        return decode(raw)

    async def close(self):
        await self.ws.close()


async def open_conn(transport, server, **kw):
    return await (TcpConn if transport == "tcp" else WsConn).open(server, **kw)


async def expect(conn, type_, timeout=10, skip=("snapshot",)):
    """The next message of `type_`, skipping the kinds in `skip`."""
    while True:
        m = await conn.recv(timeout)
        if m["type"] == type_:
            return m
        if m["type"] not in skip:
            raise AssertionError(f"{conn.transport}: expected {type_}, got {m}")


async def snapshots(conn, n, timeout=10, on_other=None):
    """The next `n` snapshot messages; other messages go to `on_other` (or fail)."""
    out = []
    while len(out) < n:
        m = await conn.recv(timeout)
        if m["type"] == "snapshot":
            out.append(m)
        elif on_other:
            on_other(m)
        else:
            raise AssertionError(f"{conn.transport}: unexpected {m}")
    return out


async def until_closed(conn, timeout=15):
    """Every message up to the end of the connection, and how it ended."""
    got = []
    try:
        while True:
            got.append(await conn.recv(timeout))
    except Closed as e:
        return got, e.how
