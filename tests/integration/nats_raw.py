"""A raw NATS client (the text protocol over a socket, standard library only) for the hostile-bus
tests: it publishes whatever bytes it is given — as a compromised agent would — and reads
messages of a subscription. Not a general client: no TLS, no reconnects, no headers."""
import json
import socket
import time


class RawNats:
    def __init__(self, port, host="127.0.0.1", timeout=10.0, user=None, password=None,
                 inbox_prefix="_INBOX.hostile"):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.buf = b""
        self.inbox_prefix = inbox_prefix
        info = self._line()
        if not info.startswith(b"INFO "):
            raise RuntimeError(f"not a NATS server: {info[:80]!r}")
        self.info = json.loads(info[5:])
        connect = {"verbose": False, "pedantic": False, "name": "hostile"}
        if user is not None:
            connect.update(user=user, **{"pass": password})
        self.sock.sendall(b"CONNECT " + json.dumps(connect).encode() + b"\r\n")
        self.next_sid = 1
        self.flush()

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
        inbox = f"{self.inbox_prefix}.{self.next_sid}"
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


def kv_stream_config(bucket, storage="memory", ttl_seconds=30, history=1):
    """The stream of key-value bucket `bucket` as libnats's js_CreateKeyValue makes it."""
    ttl_ns = int(ttl_seconds * 1e9)
    return {"name": f"KV_{bucket}", "subjects": [f"$KV.{bucket}.>"], "retention": "limits",
            "max_consumers": -1, "max_msgs_per_subject": history, "max_msgs": -1,
            "max_bytes": -1, "max_age": ttl_ns, "max_msg_size": -1, "storage": storage,
            "discard": "new", "num_replicas": 1,
            "duplicate_window": min(ttl_ns, 120 * 10**9) if ttl_ns else 120 * 10**9,
            "allow_rollup_hdrs": True, "deny_delete": True, "allow_direct": True}


def create_kv_bucket(nats, bucket, storage="memory", ttl_seconds=30, history=1, extra=None):
    """Creates the bucket's stream with a raw $JS.API.STREAM.CREATE request, as an admin (or the
    fleet view) does: agents never create it. `extra`: more stream config (e.g. a republish
    rule). Returns the server's reply (a dict; "error" in it when refused)."""
    config = kv_stream_config(bucket, storage, ttl_seconds, history)
    config.update(extra or {})
    reply = nats.request(f"$JS.API.STREAM.CREATE.KV_{bucket}", json.dumps(config).encode())
    return json.loads(reply)
