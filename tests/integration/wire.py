"""Client-side pieces of the gpustream wire protocol for the outside-client tests, written from
docs/protocol.md (standard library only): a raw RFC 6455 WebSocket (to send what a well-behaved
library refuses to: invalid UTF-8, binary frames, huge frames, and to stall after the upgrade),
and exact loss accounting over `sequence` numbers and `gap` messages."""
import asyncio
import base64
import json
import os
import re
import socket
import struct

_SNAPSHOT_PREFIX = b'{"type":"snapshot"'
_SEQUENCE = re.compile(rb'"sequence":(\d+)')


def message_kind(raw):
    """('snapshot', sequence) for a snapshot without decoding it all, else (type, parsed dict).
    The protocol puts "type" first in every message, so a snapshot is recognised by its prefix."""
    if raw.startswith(_SNAPSHOT_PREFIX):
        m = _SEQUENCE.search(raw, 0, 400)
        if m:
            return "snapshot", int(m.group(1))
    msg = json.loads(raw)
    if msg.get("type") == "snapshot":
        return "snapshot", msg["sequence"]
    return msg.get("type"), msg


class LossLedger:
    """Exact loss accounting for one connection that asked for every snapshot (no `probes`,
    `devices` or `max_rate_hz` filter): every sequence number after hello's `last_sequence` must
    arrive exactly once, in order, or be declared lost by a `gap` (`after_sequence`, `missed`).
    A hole no gap declared, a duplicate, or a declared loss that arrives anyway is a violation."""

    def __init__(self):
        self.last = None
        self.declared = []  # [first, last] ranges declared lost and not yet passed
        self.snapshots = 0
        self.gaps = 0
        self.missed = 0
        self.violations = []

    def start(self, last_sequence):
        self.last = last_sequence

    def gap(self, msg):
        after, missed = msg.get("after_sequence"), msg.get("missed")
        if not isinstance(after, int) or not isinstance(missed, int) or missed < 0:
            self.violations.append(f"malformed gap {msg}")
            return
        self.gaps += 1
        self.missed += missed
        if missed:
            self.declared.append([after + 1, after + missed])

    def snapshot(self, seq):
        self.snapshots += 1
        if self.last is None:
            self.last = seq
            return
        if seq <= self.last:
            self.violations.append(f"sequence {seq} after {self.last} (duplicate or reordered)")
            return
        for first, last in self.declared:
            if first <= seq <= last:
                self.violations.append(f"sequence {seq} arrived although a gap declared it lost")
        hole = self._undeclared(self.last + 1, seq - 1)
        if hole:
            self.violations.append(f"{hole} sequence(s) between {self.last} and {seq} "
                                   "missing without a gap")
        self.last = seq
        self.declared = [r for r in self.declared if r[1] > seq]

    def _undeclared(self, first, last):
        if last < first:
            return 0
        covered = 0
        for a, b in sorted(self.declared):
            lo, hi = max(a, first), min(b, last)
            if lo <= hi:
                covered += hi - lo + 1
        return (last - first + 1) - covered


# --- raw WebSocket (RFC 6455), client side -------------------------------------------------

def ws_upgrade_request(host, port, path="/ws", headers=None):
    key = base64.b64encode(os.urandom(16)).decode()
    lines = [f"GET {path} HTTP/1.1", f"Host: {host}:{port}", "Upgrade: websocket",
             "Connection: Upgrade", f"Sec-WebSocket-Key: {key}", "Sec-WebSocket-Version: 13"]
    for k, v in (headers or {}).items():
        lines.append(f"{k}: {v}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def ws_frame(opcode, payload, fin=True):
    """One masked client frame."""
    head = bytes([(0x80 if fin else 0) | opcode])
    n = len(payload)
    if n < 126:
        head += bytes([0x80 | n])
    elif n < 65536:
        head += bytes([0x80 | 126]) + struct.pack("!H", n)
    else:
        head += bytes([0x80 | 127]) + struct.pack("!Q", n)
    mask = os.urandom(4)
    return head + mask + _masked(payload, mask)


def _masked(payload, mask):
    n = len(payload)  # one big-integer XOR: fast even for megabyte frames
    full = (mask * (n // 4 + 1))[:n]
    return (int.from_bytes(payload, "big") ^ int.from_bytes(full, "big")).to_bytes(n, "big")


class RawWebSocket:
    """A WebSocket on asyncio streams, frame by frame, with nothing done behind our back."""

    def __init__(self, reader, writer):
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, host, port, local=None, path="/ws", headers=None, rcvbuf=None):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        if local:
            sock.bind((local, 0))
        sock.setblocking(False)
        try:
            await asyncio.get_running_loop().sock_connect(sock, (host, port))
        except OSError:
            sock.close()
            raise
        reader, writer = await asyncio.open_connection(sock=sock, limit=1 << 24)
        writer.write(ws_upgrade_request(host, port, path, headers))
        head = await reader.readuntil(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        return cls(reader, writer), status, head

    def send(self, opcode, payload):
        self.writer.write(ws_frame(opcode, payload))

    async def recv_frame(self):
        """(opcode, payload) of the next frame; fragments are returned as they come."""
        b0, b1 = await self.reader.readexactly(2)
        n = b1 & 0x7F
        if n == 126:
            n = struct.unpack("!H", await self.reader.readexactly(2))[0]
        elif n == 127:
            n = struct.unpack("!Q", await self.reader.readexactly(8))[0]
        if b1 & 0x80:
            raise ValueError("the server masked a frame")
        return b0 & 0x0F, await self.reader.readexactly(n)

    def close(self):
        self.writer.close()


def close_code(payload):
    return struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else None
