"""A raw NATS client (the text protocol over a socket, standard library only) for the hostile-bus
tests: it publishes whatever bytes it is given — as a compromised agent would — and reads
messages of a subscription. Not a general client: no TLS, no reconnects, no headers."""
import json
import socket
import time


class RawNats:
    def __init__(self, port, host="127.0.0.1", timeout=10.0):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.buf = b""
        info = self._line()
        if not info.startswith(b"INFO "):
            raise RuntimeError(f"not a NATS server: {info[:80]!r}")
        self.info = json.loads(info[5:])
        self.sock.sendall(b'CONNECT {"verbose":false,"pedantic":false,"name":"hostile"}\r\n')
        self.flush()
        self.next_sid = 1

    def _fill(self):
        data = self.sock.recv(1 << 20)
        if not data:
            raise ConnectionError("the NATS server closed the connection")
        self.buf += data

    def _line(self):
        while b"\r\n" not in self.buf:
            self._fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exact(self, n):
        while len(self.buf) < n + 2:
            self._fill()
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def publish(self, subject, payload, reply=None):
        head = f"PUB {subject} {reply} {len(payload)}\r\n" if reply else \
            f"PUB {subject} {len(payload)}\r\n"
        self.sock.sendall(head.encode() + payload + b"\r\n")

    def subscribe(self, subject):
        sid = self.next_sid
        self.next_sid += 1
        self.sock.sendall(f"SUB {subject} {sid}\r\n".encode())
        return sid

    def flush(self):
        """A round trip: everything sent before has reached the server."""
        self.sock.sendall(b"PING\r\n")
        while True:
            line = self._line()
            if line == b"PONG":
                return
            if line.startswith(b"-ERR"):
                raise RuntimeError(line.decode(errors="replace"))
            if line.startswith(b"MSG "):  # a message for a subscription: skip its payload
                self._exact(int(line.split()[-1]))

    def next_message(self, timeout=10.0):
        """(subject, payload) of the next message of any subscription."""
        deadline = time.monotonic() + timeout
        while True:
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            line = self._line()
            if line == b"PING":
                self.sock.sendall(b"PONG\r\n")
                continue
            if line.startswith(b"MSG "):
                parts = line.split()
                return parts[1].decode(), self._exact(int(parts[-1]))
            if line.startswith(b"-ERR"):
                raise RuntimeError(line.decode(errors="replace"))
            if time.monotonic() > deadline:
                raise TimeoutError("no message")

    def request(self, subject, payload, timeout=10.0):
        """Publishes with a reply inbox and returns the reply (a JetStream ack)."""
        inbox = f"_INBOX.hostile.{self.next_sid}"
        sid = self.subscribe(inbox)
        self.publish(subject, payload, reply=inbox)
        try:
            while True:
                subject_in, data = self.next_message(timeout)
                if subject_in == inbox:
                    return data
        finally:
            self.sock.sendall(f"UNSUB {sid}\r\n".encode())

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass
