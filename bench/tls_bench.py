#!/usr/bin/env python3
"""TLS on `gpustream serve` (docs/security.md, "TLS on the listeners"): what a handshake and an
open TLS connection cost the server, next to the same figures in plaintext.

Starts `gpustream serve --simulate 1 --tcp ... [--tls-cert --tls-key]` (a CA and an EC P-256
certificate made with openssl in a temporary directory), then measures:

  - handshakes a second: sequential TLS 1.3 connections to the TCP listener, each read up to the
    hello line, then closed (full handshakes: no session resumption), and the server's CPU time
    per handshake (utime+stime of the serve process over the run / handshakes);
  - memory per open connection: the server's RSS with N idle TCP connections open (each past its
    hello), minus its RSS before, / N.

  python3 bench/tls_bench.py --gpustream build/cli/gpustream [--connections 500] [--seconds 5]
"""
import argparse
import os
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "integration"))
from tls_pki import Pki  # noqa: E402
from bench_proc import cpu_seconds, rss_bytes  # noqa: E402


def start(gpustream, tls):
    args = [gpustream, "serve", "--simulate", "1", "--probes", "simulated", "--interval", "1",
            "--listen", "off", "--tcp", "127.0.0.1:0", "--max-connections", "5000",
            "--max-connections-per-address", "5000", *tls]
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    for line in p.stdout:
        parts = line.split()
        if parts[:2] == ["listening", "tcp"]:
            host, port = parts[2].rsplit(":", 1)
            return p, (host, int(port))
    raise RuntimeError("serve did not start")


def connect(address, context):
    s = socket.create_connection(address, timeout=10)
    if context:
        s = context.wrap_socket(s, server_hostname=address[0])
    f = s.makefile("rb")
    line = f.readline()
    if b"\"type\":\"hello\"" not in line:
        raise RuntimeError("no hello: %r" % line[:200])
    return s, f


def measure(gpustream, tls, context, seconds, connections):
    p, address = start(gpustream, tls)
    try:
        time.sleep(0.5)
        cpu0, t0, n = cpu_seconds(p.pid), time.monotonic(), 0
        while time.monotonic() - t0 < seconds:
            s, f = connect(address, context)
            f.close()
            # A reset, so that the server frees the slot at once (after a FIN it keeps streaming
            # to a client that may still read, until a write fails).
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.close()
            n += 1
        elapsed = time.monotonic() - t0
        cpu = cpu_seconds(p.pid) - cpu0
        rss0 = rss_bytes(p.pid)
        held = [connect(address, context) for _ in range(connections)]
        time.sleep(0.5)
        per_conn = (rss_bytes(p.pid) - rss0) / connections
        for s, f in held:
            f.close()
            s.close()
        return n / elapsed, cpu / n, per_conn
    finally:
        p.terminate()
        p.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpustream", required=True)
    ap.add_argument("--connections", type=int, default=500)
    ap.add_argument("--seconds", type=float, default=5)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        pki = Pki(d)
        ca = pki.ca("ca")
        cert, key = pki.leaf(ca, "server", "IP:127.0.0.1")
        context = ssl.create_default_context(cafile=ca[0])
        for name, tls, ctx in (("plaintext", [], None),
                               ("tls", ["--tls-cert", cert, "--tls-key", key], context)):
            rate, cpu, mem = measure(a.gpustream, tls, ctx, a.seconds, a.connections)
            print(f"{name:9}: {rate:7.0f} connections/s (client and server on one machine), "
                  f"server CPU {cpu * 1e6:6.0f} us/connection, "
                  f"{mem / 1024:5.1f} KiB RSS per open connection ({a.connections} open)",
                  flush=True)


if __name__ == "__main__":
    main()
