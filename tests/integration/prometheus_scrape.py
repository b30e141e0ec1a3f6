"""A real Prometheus scrapes `gpustream serve` every second; its HTTP API must then return the
gpustream series with the expected labels, and the series recorded by the shipped rules
(examples/prometheus/gpustream.rules.yml, which Prometheus loads here as a user would). The
shipped examples/prometheus/*.yml also pass `promtool check`. Exit 0 on success, 1 with a FAIL
line otherwise."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_helper import Server, fail, free_port, parse_args, require_executable  # noqa: E402

PROMETHEUS = "/usr/bin/prometheus"
PROMTOOL = "/usr/bin/promtool"
EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples",
                        "prometheus")
RULES = os.path.abspath(os.path.join(EXAMPLES, "gpustream.rules.yml"))
RULE_TESTS = os.path.abspath(os.path.join(EXAMPLES, "gpustream.rules.test.yml"))
RECORDED = ("gpustream:gpu_memory_used:ratio", "instance:gpustream_gpu_power_watts:sum",
            "instance:gpustream_gpu_memory_free_bytes:max")


def promtool_checks():
    require_executable(PROMTOOL, "prometheus")
    for args in (["check", "rules", RULES], ["test", "rules", RULE_TESTS],
                 ["check", "config", os.path.join(EXAMPLES, "prometheus.yml")]):
        r = subprocess.run([PROMTOOL, *args], capture_output=True, text=True)
        if r.returncode != 0:
            fail(f"promtool {' '.join(args)}:\n{r.stdout}{r.stderr}")
    print("promtool: the shipped rules and config are valid, their rule tests pass", flush=True)


def query(port, expr):
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            body = json.loads(r.read())
    except OSError:
        return None  # not up yet
    if body.get("status") != "success":
        fail(f"Prometheus query {expr!r} failed: {body}")
    return body["data"]["result"]


def main():
    args = parse_args()
    require_executable(PROMETHEUS, "prometheus")
    promtool_checks()
    server = Server(args.serve, "--simulate", "2", "--listen", "127.0.0.1:0", "--interval", "0.2",
                    "--metrics-processes", "100")
    tmp = tempfile.mkdtemp(prefix="gpustream-prom-")
    prom = None
    try:
        config = os.path.join(tmp, "prometheus.yml")
        with open(config, "w") as f:
            f.write(f"""global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - "{RULES}"
scrape_configs:
  - job_name: gpustream
    scrape_interval: 1s
    scrape_timeout: 900ms
    static_configs:
      - targets: ["{server.http}"]
""")
        port = free_port()
        cmd = [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp}/data",
               f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"]
        print("starting:", " ".join(cmd), flush=True)
        log = open(os.path.join(tmp, "prometheus.log"), "w")
        prom = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)

        deadline = time.monotonic() + 60
        series = []
        while time.monotonic() < deadline:
            if prom.poll() is not None:
                fail("prometheus exited early:\n" + open(os.path.join(tmp, "prometheus.log")).read())
            series = query(port, "gpustream_gpu_power_watts") or []
            if len(series) >= 2:
                break
            time.sleep(0.5)
        else:
            fail(f"no gpustream_gpu_power_watts series in Prometheus after 60 s (got {series}); "
                 "prometheus log:\n" + open(os.path.join(tmp, "prometheus.log")).read())

        for s in series:
            m = s["metric"]
            for label in ("device", "vendor", "probe", "name", "job", "instance"):
                if not m.get(label):
                    fail(f"series without label {label!r}: {m}")
            if m["vendor"] != "simulated":
                fail(f"unexpected vendor label: {m}")
            if float(s["value"][1]) <= 0:
                fail(f"implausible power: {s}")
        print("power series:", [s["metric"]["device"] for s in series], flush=True)

        up = query(port, 'up{job="gpustream"}')
        if not up or up[0]["value"][1] != "1":
            fail(f"the gpustream target is not up: {up}")
        for expr, at_least in (("gpustream_gpu_utilization_ratio", 2),
                               ("gpustream_gpu_memory_used_bytes", 2),
                               ("gpustream_gpu_info", 2),
                               ("gpustream_probe_samples_total", 1),
                               ('gpustream_server_connections{transport="http"}', 1)):
            got = query(port, expr) or []
            if len(got) < at_least:
                fail(f"{expr}: expected at least {at_least} series, got {got}")
        ratio = max(float(s["value"][1]) for s in query(port, "gpustream_gpu_utilization_ratio"))
        if not 0 <= ratio <= 1:
            fail(f"utilization ratio out of 0..1: {ratio}")
        # The shipped recording rules, evaluated every second: each records a series.
        deadline = time.monotonic() + 30
        missing = list(RECORDED)
        while missing and time.monotonic() < deadline:
            missing = [r for r in missing if not query(port, r)]
            if missing:
                time.sleep(0.5)
        if missing:
            fail(f"recording rules produced no series for {missing}")
        used = query(port, "gpustream:gpu_memory_used:ratio")
        if len(used) < 2 or not all(0 <= float(s["value"][1]) <= 1 for s in used):
            fail(f"gpustream:gpu_memory_used:ratio: expected 2 series in 0..1, got {used}")
        print("recorded:", ", ".join(RECORDED), flush=True)
        # --metrics-processes: per-process series with pid and process labels, none omitted.
        procs = query(port, "gpustream_gpu_process_memory_bytes") or []
        if not procs or not all(s["metric"].get("pid") and s["metric"].get("process") for s in procs):
            fail(f"gpustream_gpu_process_memory_bytes: expected series with pid/process, got {procs}")
        omitted = query(port, "gpustream_gpu_process_series_omitted") or []
        if not omitted or omitted[0]["value"][1] != "0":
            fail(f"gpustream_gpu_process_series_omitted: expected 0, got {omitted}")
        print(f"per-process series: {len(procs)}", flush=True)
        print("PASS: Prometheus scraped gpustream with the expected series and labels", flush=True)
    finally:
        if prom is not None and prom.poll() is None:
            prom.terminate()
            try:
                prom.wait(timeout=10)
            except subprocess.TimeoutExpired:
                prom.kill()
        shutil.rmtree(tmp, ignore_errors=True)
    server.stop()


if __name__ == "__main__":
    main()
