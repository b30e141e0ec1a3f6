"""Starts and stops `gpustream serve` for the integration tests (standard library only)."""
import argparse
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import re
import threading
import time
import urllib.error
import urllib.request


def fail(message):
    print(f"FAIL: {message}", flush=True)
    sys.exit(1)


def wait_until(what, predicate, timeout=30.0, interval=0.05, log=None):
    """predicate()'s first truthy value, polled every `interval` s; FAIL after `timeout` s (with
    the lines of `log`, e.g. a server's stderr, when given)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            fail(f"timed out waiting for {what}" + ("" if log is None else "; log:\n" + "".join(log)))
        time.sleep(interval)


def http_get(addr, path, token=None, host=None, timeout=10):
    """(status, body text) of GET http://addr/path, with `Authorization: Bearer token` and a
    `Host` header when given; an HTTP error is a status, not an exception."""
    req = urllib.request.Request(f"http://{addr}{path}")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    if host:
        req.add_header("Host", host)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def http_ok(addr, path, token=None):
    """The body of GET http://addr/path; FAIL unless the status is 200."""
    status, body = http_get(addr, path, token=token)
    if status != 200:
        fail(f"GET {path}: HTTP {status}: {body}")
    return body


def prom_value(text, name):
    """The value of the series `name` (with its labels, e.g. 'x_total{reason="a"}') in a
    Prometheus text exposition, or None when it is not there."""
    m = re.search(r"^" + re.escape(name) + r" (\S+)$", text, re.M)
    return float(m.group(1)) if m else None


def scrape(addr, name, token=None, required=False):
    """The value of the series `name` on http://addr/metrics (FAIL unless it answers 200); None
    when the series is not there (FAIL instead when `required`)."""
    text = http_ok(addr, "/metrics", token=token)
    value = prom_value(text, name)
    if value is None and required:
        fail(f"no {name} on /metrics:\n{text}")
    return value


def fleet_states(addr, token=None):
    """{node: state} from a fleet view's /api/v1/nodes."""
    return {n["node"]: n["state"]
            for n in json.loads(http_ok(addr, "/api/v1/nodes", token=token))["nodes"]}


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
        return wait_until(what, predicate, timeout, interval, log=self.stderr)

    def lines_with(self, text):
        """The stderr lines so far that contain `text`."""
        return [line for line in self.stderr if text in line]

    def wait_for_line(self, text, timeout=10.0):
        """The first stderr line containing `text`; FAIL (with the stderr) after `timeout` s."""
        return wait_until(f"a log line with {text!r}", lambda: self.lines_with(text), timeout,
                          log=self.stderr)[0]

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


def write_secret(folder, name, value):
    """folder/name holding `value` and a newline, mode 0600 (a secret file); its path."""
    path = os.path.join(folder, name)
    with open(path, "w") as f:
        f.write(value + "\n")
    os.chmod(path, 0o600)
    return path


class Proc:
    """A gpustream child process; its stdout and stderr lines collected in the background."""

    def __init__(self, args):
        print("starting:", " ".join(args), flush=True)
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True)
        self.lines = []
        threading.Thread(target=self._collect, daemon=True).start()

    def _collect(self):
        for line in self.proc.stdout:
            self.lines.append(line)

    def text(self):
        return "".join(self.lines)

    def wait_line(self, what, needle, timeout=20.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.lines):
                if needle in line:
                    return line
            if self.proc.poll() is not None and needle not in self.text():
                break
            time.sleep(0.05)
        self.stop()
        fail(f"no line with {needle!r} ({what}); exit {self.proc.poll()}; output:\n{self.text()}")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode
