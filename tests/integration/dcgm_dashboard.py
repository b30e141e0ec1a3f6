"""dcgm-exporter's Grafana dashboard against `gpustream serve --metrics-compat dcgm`: a real
Prometheus (Debian `prometheus`, on loopback) scrapes the server, which reads two GPUs through the
fake libnvidia-ml.so.1 (Hopper-class: GPM gives the tensor activity; its clock follows the steady
clock). The test reads the dashboard JSON at run time, resolves its template variables as Grafana
does (a datasource variable, `label_values(...)` queries through Prometheus's label values API,
"All" of a multi-value variable as a regex alternation), expands the global variables
($__interval, $__rate_interval, $__range, ...) and evaluates every panel's PromQL, one by one,
as a range query over the HTTP API: each must return data, one series per GPU where the legend
names the gpu, with the values the fake reports in DCGM's units. A panel whose field gpustream
cannot have would be listed in NO_DATA with its reason (docs/operations.md, "dcgm-exporter
compatibility"); for this dashboard the list is empty. Exit 0 on success, 1 with a FAIL line."""
import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_helper import Server, fail, free_port, http_ok, require_executable  # noqa: E402

PROMETHEUS = "/usr/bin/prometheus"
SCRAPE_S = 1
GPUS = 2
# The fake's figures (tests/fakes/nvml/fake_nvml_scenario.cpp defaults, and the GPM rates set
# below), in DCGM's units: what each field must read for GPU i.
EXPECTED = {
    "DCGM_FI_DEV_GPU_UTIL": lambda i: 10 + i,  # percent
    "DCGM_FI_DEV_GPU_TEMP": lambda i: 40 + i,  # C
    "DCGM_FI_DEV_POWER_USAGE": lambda i: 100 + i,  # W (100000 + 1000 i mW)
    "DCGM_FI_DEV_FB_USED": lambda i: 1024 * (i + 1),  # MiB ((i + 1) GiB)
    "DCGM_FI_DEV_SM_CLOCK": lambda i: 1410,  # MHz
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": lambda i: (30 + 10 * i) / 100,  # a ratio
}
# Panels gpustream cannot fill, by title, with the reason (none for this dashboard); a listed
# panel that returns data fails the test too, so the list stays true.
NO_DATA = {}


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--serve", required=True, help="the serve command")
    p.add_argument("--fake-nvml", required=True, help="the fake libnvidia-ml.so.1")
    p.add_argument("--dashboard", required=True, help="dcgm-exporter's Grafana dashboard JSON")
    return p.parse_args()


class Prometheus:
    def __init__(self, tmp, target):
        require_executable(PROMETHEUS, "prometheus")
        config = os.path.join(tmp, "prometheus.yml")
        with open(config, "w") as f:
            f.write(f"""global:
  scrape_interval: {SCRAPE_S}s
scrape_configs:
  - job_name: dcgm-exporter
    scrape_interval: {SCRAPE_S}s
    scrape_timeout: 900ms
    static_configs:
      - targets: ["{target}"]
""")
        self.port = free_port()
        self.log_path = os.path.join(tmp, "prometheus.log")
        cmd = [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp}/data",
               f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"]
        print("starting:", " ".join(cmd), flush=True)
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)

    def api(self, path, params):
        url = f"http://127.0.0.1:{self.port}/api/v1/{path}?" + urllib.parse.urlencode(params,
                                                                                      doseq=True)
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                body = json.loads(r.read())
        except OSError:
            if self.proc.poll() is not None:
                fail("prometheus exited:\n" + open(self.log_path).read())
            return None  # not up yet
        if body.get("status") != "success":
            fail(f"Prometheus {path} {params} failed: {body}")
        return body["data"]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def panels_of(dashboard):
    """Every panel, those inside (collapsed) rows included."""
    out = []
    for p in dashboard.get("panels", []):
        out.append(p)
        out.extend(panels_of(p))
    return out


def regex_escape(value):
    """Grafana's escape of one value of a multi-value variable (prometheusSpecialRegexEscape):
    a backslash doubled twice, a regex metacharacter preceded by an escaped backslash (the query
    is a PromQL string, where \\\\ is one backslash of the regex)."""
    value = value.replace("\\", "\\\\\\\\")
    return re.sub(r"[$^*{}\[\]'+?.()|]", lambda m: "\\\\" + m.group(0), value)


def multi_value(values):
    """A multi-value variable's text: one value as itself, several as (a|b) (Grafana's
    interpolateQueryExpr), each escaped."""
    escaped = [regex_escape(v) for v in values]
    return escaped[0] if len(escaped) == 1 else "(" + "|".join(escaped) + ")"


def resolve_variables(dashboard, prom):
    """{name: text} for every template variable, as Grafana's first load sets them."""
    values = {}
    for v in dashboard.get("templating", {}).get("list", []):
        name, kind = v["name"], v.get("type")
        if kind == "datasource":
            if v.get("query") != "prometheus":
                fail(f"variable ${name}: a datasource of type {v.get('query')!r}, not prometheus")
            values[name] = "Prometheus"
            continue
        if kind == "constant" or kind == "custom":
            opts = [o.strip() for o in v.get("query", "").split(",") if o.strip()]
        elif kind == "interval":
            opts = [o.strip() for o in v.get("query", "").split(",") if o.strip()]
        elif kind == "query":
            query = v.get("query")
            if isinstance(query, dict):
                query = query.get("query", "")
            m = re.fullmatch(r"\s*label_values\((?:(.*),\s*)?(\w+)\)\s*", query)
            if not m:
                fail(f"variable ${name}: query {query!r} is not label_values(...)")
            metric, label = m.group(1), m.group(2)
            params = {"match[]": [expand(metric, values)]} if metric else {}
            opts = prom.api(f"label/{label}/values", params) or []
        else:
            fail(f"variable ${name}: type {kind!r} not handled by this test")
        if v.get("regex"):
            rx = re.compile(v["regex"].strip("/"))
            opts = [(m.group(1) if m.groups() else o) for o in opts for m in [rx.search(o)] if m]
        if v.get("sort") in (1, 2):
            opts = sorted(opts, reverse=v["sort"] == 2)
        elif v.get("sort") in (3, 4):
            opts = sorted(opts, key=lambda o: float(re.sub(r"[^0-9.]", "", o) or 0),
                          reverse=v["sort"] == 4)
        if not opts:
            fail(f"variable ${name}: no values (query {v.get('query')!r})")
        current = (v.get("current") or {}).get("value")
        if v.get("includeAll") and (not current or current == "$__all" or current == ["$__all"]):
            # "All": allValue when set, else every option as a regex alternation.
            values[name] = v.get("allValue") or multi_value(opts)
        elif v.get("multi") and current:
            values[name] = multi_value(current if isinstance(current, list) else [current])
        else:
            values[name] = current if isinstance(current, str) and current else opts[0]
        print(f"${name} = {values[name]}  (options: {opts})", flush=True)
    return values


def expand(expr, values):
    """$name, ${name}, ${name:format} and [[name]] replaced by the variables' values."""
    def sub(m):
        name = m.group(1) or m.group(2) or m.group(3)
        if name not in values:
            fail(f"{expr!r}: unknown variable {name!r}")
        return values[name]
    names = sorted(values, key=len, reverse=True)  # $__rate_interval before $__range
    alt = "|".join(re.escape(n) for n in names)
    return re.sub(r"\$\{(" + alt + r")(?::\w+)?\}|\[\[(" + alt + r")\]\]|\$(" + alt + r")\b",
                  sub, expr)


def parse_duration(text):
    m = re.fullmatch(r"(\d+)(ms|s|m|h|d)", text)
    return int(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]


def round_interval(seconds):
    """Grafana's rounding of the auto interval (kbn.roundInterval), for the common ranges."""
    for limit, step in ((0.015, 0.01), (0.035, 0.02), (0.075, 0.05), (0.15, 0.1), (0.35, 0.2),
                        (0.75, 0.5), (1.5, 1), (3.5, 2), (7.5, 5), (12.5, 10), (17.5, 15),
                        (25, 20), (45, 30), (90, 60), (210, 120), (450, 300), (750, 600),
                        (1050, 900), (1500, 1200), (2700, 1800), (5400, 3600), (9000, 7200),
                        (16200, 10800), (32400, 21600), (86400, 43200)):
        if seconds < limit:
            return step
    return 86400


def global_variables(dashboard, panel):
    """Grafana's $__interval, $__rate_interval, $__range... for this panel, over the dashboard's
    time range, with the datasource's scrape interval as the lower bound of the interval."""
    frm = dashboard.get("time", {}).get("from", "now-15m")
    range_s = parse_duration(frm[len("now-"):]) if frm.startswith("now-") else 900
    points = panel.get("maxDataPoints") or 1000
    interval = max(round_interval(range_s / points), SCRAPE_S)
    if panel.get("interval"):
        interval = max(interval, parse_duration(panel["interval"].lstrip("><")))
    rate = max(interval + SCRAPE_S, 4 * SCRAPE_S)
    return {"__interval": f"{interval}s", "__interval_ms": str(int(interval * 1000)),
            "__rate_interval": f"{rate}s", "__range": f"{range_s}s",
            "__range_s": str(range_s), "__range_ms": str(range_s * 1000)}, interval


def check_metrics_text(server):
    text = http_ok(server.http, "/metrics")
    util = [l for l in text.splitlines() if l.startswith("DCGM_FI_DEV_GPU_UTIL{")]
    if len(util) != GPUS:
        fail(f"expected {GPUS} DCGM_FI_DEV_GPU_UTIL samples on /metrics, got {util}")
    for i, line in enumerate(util):
        for label in (f'gpu="{i}"', 'UUID="GPU-', 'pci_bus_id="00000000:', f'device="nvidia{i}"',
                      'modelName="NVIDIA Fake GPU', 'Hostname="',
                      'DCGM_FI_DRIVER_VERSION="535.183.01-fake"'):
            if label not in line:
                fail(f"no {label} in {line}")
    if "gpustream_gpu_utilization_ratio" in text:
        fail("--metrics-compat dcgm still writes gpustream's device names")
    if "gpustream_probe_up{" not in text:
        fail("--metrics-compat dcgm lost gpustream's own probe families")
    print("/metrics: DCGM names with dcgm-exporter's labels, probe families kept", flush=True)


def main():
    args = parse_args()
    if not os.path.isfile(args.dashboard):
        fail(f"{args.dashboard} is missing: the shared fixtures (../shared/fixtures beside the "
             "checkout, or -DGPUSTREAM_SHARED_FIXTURES_DIR) hold dcgm-exporter's dashboard")
    with open(args.dashboard) as f:
        dashboard = json.load(f)
    tmp = tempfile.mkdtemp(prefix="gpustream-dcgm-")
    scenario = os.path.join(tmp, "scenario.txt")
    with open(scenario, "w") as f:
        f.write(f"devices={GPUS}\nreal_clock=1\n")
        for i in range(GPUS):
            f.write(f"device.{i}.architecture=9\ndevice.{i}.gpm.5={30 + 10 * i}\n")
    os.environ["GPUSTREAM_FAKE_NVML_SCENARIO"] = scenario
    server = Server(args.serve, "--probes", "nvidia", "--nvml-library", args.fake_nvml,
                    "--metrics-compat", "dcgm", "--listen", "127.0.0.1:0", "--interval", "0.5")
    prom = None
    try:
        server.wait_until("the tensor activity on /metrics", lambda: http_ok(
            server.http, "/metrics").count("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{") == GPUS)
        check_metrics_text(server)
        prom = Prometheus(tmp, server.http)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            got = prom.api("query", {"query": "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"}) or {}
            if len(got.get("result", [])) == GPUS:
                break
            time.sleep(0.5)
        else:
            fail("Prometheus has no DCGM series after 60 s:\n" + open(prom.log_path).read())
        time.sleep(3 * SCRAPE_S)  # a few points in every series

        values = resolve_variables(dashboard, prom)
        checked = 0
        for panel in panels_of(dashboard):
            targets = [t for t in panel.get("targets", []) if t.get("expr") and not t.get("hide")]
            if not targets:
                continue
            title = panel.get("title", f"panel {panel.get('id')}")
            ds = panel.get("datasource")
            if ds not in (None, "$datasource", "${datasource}", "Prometheus"):
                fail(f"panel {title!r}: datasource {ds!r} is not the Prometheus one")
            glob, step = global_variables(dashboard, panel)
            for t in targets:
                expr = expand(t["expr"], {**values, **glob})
                end = time.time()
                data = prom.api("query_range", {"query": expr, "start": end - 60, "end": end,
                                                "step": step})
                series = [s for s in data["result"]
                          if any(math.isfinite(float(v)) for _, v in s["values"])]
                if title in NO_DATA:
                    if series:
                        fail(f"panel {title!r} is listed as without data ({NO_DATA[title]}) "
                             f"but returns {series}")
                    print(f"no data, as documented: {title!r}: {NO_DATA[title]}", flush=True)
                    continue
                if not series:
                    fail(f"panel {title!r}: {expr!r} returned no data")
                legend_labels = re.findall(r"\{\{\s*(\w+)\s*\}\}", t.get("legendFormat") or "")
                if "gpu" in legend_labels:
                    gpus = sorted(s["metric"].get("gpu") for s in series)
                    if gpus != [str(i) for i in range(GPUS)]:
                        fail(f"panel {title!r}: expected one series per GPU, got gpu={gpus}")
                for label in legend_labels:
                    if any(label not in s["metric"] for s in series):
                        fail(f"panel {title!r}: a series without the legend's label {label!r}")
                check_values(title, t["expr"], series)
                print(f"panel {title!r}: {len(series)} series from {expr}", flush=True)
                checked += 1
        if checked == 0:
            fail("the dashboard has no PromQL target")
        print(f"PASS: all {checked} panel queries of {dashboard.get('title')!r} returned data "
              f"from gpustream --metrics-compat dcgm", flush=True)
    finally:
        if prom is not None:
            prom.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    server.stop()


def check_values(title, expr, series):
    """For a panel showing one field per GPU (optionally scaled), the fake's figure in DCGM's
    units: proves the units, not only the names."""
    m = re.fullmatch(r"\s*(DCGM_\w+)\{[^}]*\}\s*(?:\*\s*(\d+))?\s*", expr)
    if not m or m.group(1) not in EXPECTED:
        return
    scale = int(m.group(2) or 1)
    for s in series:
        i = int(s["metric"]["gpu"])
        want = EXPECTED[m.group(1)](i) * scale
        got = float(s["values"][-1][1])
        if not math.isclose(got, want, rel_tol=0.02):
            fail(f"panel {title!r}: gpu {i} reads {got}, expected {want} ({m.group(1)})")


if __name__ == "__main__":
    main()
