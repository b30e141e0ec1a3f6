"""`gpustream serve --simulate 2 --otlp URL` pushes to a small OTLP/HTTP receiver written here from
the OTLP specification (standard library only). The receiver answers the first export 429 with
Retry-After, then 200, and checks every export: POST, application/json, gzip, the auth header;
the ExportMetricsServiceRequest JSON shape (resource attributes, scope, schema URL), the
OpenTelemetry hardware semantic-convention names, units and attributes, 64-bit integers as
strings, and hw.energy as a monotonic cumulative sum whose start time holds while its value
grows. /metrics (asked with Accept-Encoding: gzip) counts the exports; the header's value is in
no log line. Then the same over https://: a receiver with a certificate from a CA made here, which
`--otlp-ca` names. Exit 0 on success, 1 with a FAIL line otherwise."""
import gzip
import json
import os
import ssl
import sys
import tempfile
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_helper import Server, fail, free_port, parse_args  # noqa: E402
from tls_pki import Pki  # noqa: E402

SECRET = "Bearer otlp-s3cret-value"
SCHEMA_PREFIX = "https://opentelemetry.io/schemas/"
# docs/operations.md, "OTLP": name -> (unit, kind) of the semantic conventions.
CONVENTION = {
    "hw.gpu.utilization": ("1", "gauge"),
    "hw.gpu.memory.usage": ("By", "sum"),
    "hw.gpu.memory.limit": ("By", "sum"),
    "hw.power": ("W", "gauge"),
    "hw.energy": ("J", "sum"),
    "hw.temperature": ("Cel", "gauge"),
}


class Receiver:
    def __init__(self, tls=None):
        """tls: (cert file, key file) of an https:// receiver."""
        self.lock = threading.Lock()
        self.accepted = []   # decoded requests answered 200
        self.requests = 0
        self.problems = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with receiver.lock:
                    receiver.requests += 1
                    first = receiver.requests == 1
                if first:
                    self.send_response(429)
                    self.send_header("Retry-After", "1")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                try:
                    request = receiver.check_request(self.path, self.headers, body)
                except AssertionError as e:
                    with receiver.lock:
                        receiver.problems.append(str(e))
                    self.send_response(400)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                with receiver.lock:
                    receiver.accepted.append(request)
                out = b"{}"
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        if tls:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
            self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @staticmethod
    def check_request(path, headers, body):
        assert path == "/v1/metrics", f"path {path}"
        assert headers.get("Content-Type") == "application/json", headers.get("Content-Type")
        assert headers.get("Content-Encoding") == "gzip", headers.get("Content-Encoding")
        assert headers.get("Authorization") == SECRET, "the --otlp-header was not sent"
        return json.loads(gzip.decompress(body))

    def close(self):
        self.httpd.shutdown()


def attributes(items):
    out = {}
    for a in items:
        assert set(a) == {"key", "value"}, a
        assert set(a["value"]) == {"stringValue"}, a
        out[a["key"]] = a["value"]["stringValue"]
    return out


def check_shape(request):
    """The ExportMetricsServiceRequest of one export; returns {name: metric}."""
    assert set(request) == {"resourceMetrics"}, list(request)
    (rm,) = request["resourceMetrics"]
    res = attributes(rm["resource"]["attributes"])
    assert res["service.name"] == "gpustream", res
    assert res["host.name"], res
    assert res["service.instance.id"], res
    assert rm["schemaUrl"].startswith(SCHEMA_PREFIX), rm.get("schemaUrl")
    (sm,) = rm["scopeMetrics"]
    assert sm["scope"]["name"] == "gpustream", sm["scope"]
    assert sm["scope"]["version"], sm["scope"]
    assert sm["schemaUrl"] == rm["schemaUrl"]
    metrics = {}
    for m in sm["metrics"]:
        name = m["name"]
        assert name not in metrics, f"{name} twice"
        assert name.startswith("hw.") or name.startswith("gpustream.gpu."), name
        assert m["unit"], name
        kinds = [k for k in ("gauge", "sum") if k in m]
        assert len(kinds) == 1, name
        points = m[kinds[0]]["dataPoints"]
        assert points, name
        for p in points:
            attrs = attributes(p["attributes"])
            assert attrs["hw.type"] == "gpu", (name, attrs)
            assert attrs["hw.id"] and attrs["hw.name"] and attrs["hw.vendor"], (name, attrs)
            assert isinstance(p["timeUnixNano"], str) and int(p["timeUnixNano"]) > 0, (name, p)
            assert ("asInt" in p) != ("asDouble" in p), (name, p)
            if "asInt" in p:
                assert isinstance(p["asInt"], str), (name, p)
        metrics[name] = (kinds[0], m)
    for name, (unit, kind) in CONVENTION.items():
        assert name in metrics, f"{name} missing; got {sorted(metrics)}"
        assert metrics[name][0] == kind, (name, metrics[name][0])
        assert metrics[name][1]["unit"] == unit, (name, metrics[name][1]["unit"])
    for p in metrics["hw.gpu.utilization"][1]["gauge"]["dataPoints"]:
        assert 0 <= p["asDouble"] <= 1, p
        assert attributes(p["attributes"])["hw.gpu.task"] == "general", p
    for name in ("hw.gpu.memory.usage", "hw.gpu.memory.limit"):
        s = metrics[name][1]["sum"]
        assert s["isMonotonic"] is False and s["aggregationTemporality"] == 2, (name, s)
    energy = metrics["hw.energy"][1]["sum"]
    assert energy["isMonotonic"] is True and energy["aggregationTemporality"] == 2, energy
    return {name: m for name, (_, m) in metrics.items()}


def energy_points(metrics):
    out = {}
    for p in metrics["hw.energy"]["sum"]["dataPoints"]:
        start, t = int(p["startTimeUnixNano"]), int(p["timeUnixNano"])
        assert 0 < start <= t, p
        out[attributes(p["attributes"])["hw.id"]] = (start, t, p["asDouble"])
    return out


def metrics_text(server):
    req = urllib.request.Request(f"http://{server.http}/metrics",
                                 headers={"Accept-Encoding": "gzip"})
    with urllib.request.urlopen(req, timeout=10) as r:
        if r.headers.get("Content-Encoding") != "gzip":
            fail("/metrics was not gzip-encoded for a client that accepts gzip")
        return gzip.decompress(r.read()).decode()


def counter(text, line_start):
    for line in text.splitlines():
        if line.startswith(line_start + " "):
            return float(line.split()[-1])
    fail(f"/metrics has no {line_start}")


def wait_accepted(receiver, server, n):
    """The exports the receiver accepted once there are `n` (30 s at most; a refused one fails)."""
    deadline = time.monotonic() + 30
    while True:
        with receiver.lock:
            problems = list(receiver.problems)
            accepted = list(receiver.accepted)
        if problems:
            fail("the receiver refused an export: " + problems[0])
        if len(accepted) >= n:
            return accepted
        if time.monotonic() > deadline:
            fail(f"{len(accepted)} export(s) delivered in 30 s; stderr:\n" + "".join(server.stderr))
        time.sleep(0.1)


def https_push(args):
    """`--otlp https://...` to a receiver whose certificate chains to `--otlp-ca`."""
    with tempfile.TemporaryDirectory(prefix="gpustream-otlp-tls-") as folder:
        pki = Pki(folder)
        ca = pki.ca("otlp-test-ca")
        receiver = Receiver(tls=pki.leaf(ca, "collector", sans="IP:127.0.0.1,DNS:localhost"))
        url = f"https://127.0.0.1:{receiver.port}/v1/metrics"
        server = Server(args.serve, "--simulate", "2", "--listen", "127.0.0.1:0", "--interval",
                        "0.2", "--otlp", url, "--otlp-ca", ca[0], "--otlp-interval", "0.5",
                        "--otlp-header", f"Authorization: {SECRET}")
        try:
            accepted = wait_accepted(receiver, server, 1)
            try:
                check_shape(accepted[0])
            except (AssertionError, KeyError, ValueError) as e:
                fail(f"an https:// export does not have the documented OTLP shape: {e!r}")
        finally:
            server.stop()
            receiver.close()
        logs = "".join(server.stderr)
        if "verified against " + ca[0] not in logs:
            fail("the start line does not name the --otlp-ca file; stderr:\n" + logs)
    print("https://: delivered to a receiver verified against --otlp-ca", flush=True)


def main():
    args = parse_args()
    receiver = Receiver()
    url = f"http://127.0.0.1:{receiver.port}/v1/metrics"
    server = Server(args.serve, "--simulate", "2", "--listen", "127.0.0.1:0", "--interval", "0.2",
                    "--otlp", url, "--otlp-interval", "0.5", "--otlp-header",
                    f"Authorization: {SECRET}")
    try:
        accepted = wait_accepted(receiver, server, 4)
        print(f"{receiver.requests} requests, {len(accepted)} delivered", flush=True)
        previous = None
        for request in accepted:
            try:
                metrics = check_shape(request)
                energy = energy_points(metrics)
            except (AssertionError, KeyError, ValueError) as e:
                fail(f"an export does not have the documented OTLP shape: {e!r}\n"
                     + json.dumps(request)[:2000])
            if len(energy) != 2:
                fail(f"hw.energy has {len(energy)} series, 2 simulated GPUs expected")
            if previous:
                # Each tick exports the latest snapshot: when sampling stalls (a loaded machine)
                # two exports carry the same point, which a cumulative sum allows.
                for hw_id, (start, t, joules) in energy.items():
                    p_start, p_t, p_joules = previous[hw_id]
                    if start != p_start or t < p_t or joules < p_joules or (
                            t == p_t and joules != p_joules):
                        fail(f"hw.energy of {hw_id} is not one monotonic cumulative series: "
                             f"{previous[hw_id]} then {(start, t, joules)}")
            previous = energy
        print("every export has the documented OTLP shape; hw.energy is monotonic", flush=True)
        # The receiver holds an export once it has read it; the server counts it once it has read
        # the answer: wait for the count (a scrape right away may come between the two).
        ok = 'gpustream_otlp_exports_total{result="ok"}'
        delivered = len(accepted)
        text = server.wait_until(f"{ok} to count the {delivered} deliveries",
                                 lambda: (lambda t: t if counter(t, ok) >= delivered else None)(
                                     metrics_text(server)), timeout=10)
        if counter(text, 'gpustream_otlp_exports_total{result="retried"}') < 1:
            fail("the 429 was not counted as a retry")
        if counter(text, "gpustream_otlp_queue_bytes_limit") <= 0:
            fail("gpustream_otlp_queue_bytes_limit is not the queue's bound")
        print("/metrics (gzip) counts the exports and the retry", flush=True)
    finally:
        server.stop()
        receiver.close()
    logs = "".join(server.stderr)
    if "otlp-s3cret-value" in logs:
        fail("the --otlp-header value was logged")
    if "pushing OTLP metrics to " + url not in logs:
        fail("the start line does not say where OTLP is pushed; stderr:\n" + logs)
    https_push(args)
    print("PASS", flush=True)


if __name__ == "__main__":
    main()
