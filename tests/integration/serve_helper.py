"""Starts and stops `gpustream serve` for the integration tests (standard library only)."""
import argparse
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request


def fail(message):
    print(f"FAIL: {message}", flush=True)
    sys.exit(1)


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--serve", required=True,
                   help="the serve command, e.g. '/path/to/gpustream serve'")
    return p.parse_args()


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """`gpustream serve` as a child process; knows its bound addresses."""

    def __init__(self, serve_command, *args):
        cmd = serve_command.split() + list(args)
        print("starting:", " ".join(cmd), flush=True)
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
        self.lines = queue.Queue()
        self.stderr = []
        threading.Thread(target=self._pump, args=(self.proc.stdout, self.lines), daemon=True).start()
        threading.Thread(target=self._collect, daemon=True).start()
        self.http = None
        self.tcp = None
        deadline = time.monotonic() + 30
        want_tcp = "--tcp" in args
        while self.http is None or (want_tcp and self.tcp is None):
            left = deadline - time.monotonic()
            if left <= 0 or self.proc.poll() is not None:
                self.kill()
                fail("the server did not report its address; stderr:\n" + "".join(self.stderr))
            try:
                line = self.lines.get(timeout=min(left, 1.0))
            except queue.Empty:
                continue
            parts = line.split()
            if len(parts) == 3 and parts[0] == "listening":
                setattr(self, parts[1], parts[2])
        print("server at", self.http, flush=True)

    @staticmethod
    def _pump(stream, q):
        for line in stream:
            q.put(line)

    def _collect(self):
        for line in self.proc.stderr:
            self.stderr.append(line)

    def get_json(self, path):
        with urllib.request.urlopen(f"http://{self.http}{path}", timeout=10) as r:
            return json.loads(r.read())

    def wait_until(self, what, predicate, timeout=30.0, interval=0.1):
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            if time.monotonic() > deadline:
                fail(f"timed out waiting for {what}")
            time.sleep(interval)

    def stop(self):
        """SIGTERM; the server must exit 0 within 10 s."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()
            fail("the server did not stop within 10 s of SIGTERM")
        if rc != 0:
            fail(f"the server exited with {rc} after SIGTERM; stderr:\n" + "".join(self.stderr))
        print("server stopped cleanly (exit 0)", flush=True)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def require_executable(path, package):
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        fail(f"{path} is missing: install the Debian package '{package}' "
             f"(scripts/deps.sh test does)")
