"""The cases of protocol_client.py: what docs/protocol.md promises about hello, auth, subscribe
(projections and filters), resuming and gaps. The connection-lifecycle rows are in
protocol_lifecycle.py. Each case is (extra `serve` flags, coroutine(server)); "{tmp}" in a flag is
the case's temporary folder ("{tmp}/token" holds the token `s3cret` followed by CRLF,
"{tmp}/config.json" sets history to 16)."""
import json
import urllib.error
import urllib.request

import websockets.exceptions

from protocol_conn import Closed, expect, open_conn, snapshots

DOUBLE_METRICS = {"utilization_percent", "memory_utilization_percent", "temperature_celsius",
                  "power_watts", "power_average_watts", "power_limit_watts", "energy_joules",
                  "clock_graphics_mhz", "clock_sm_mhz", "clock_memory_mhz", "fan_percent",
                  "fan_rpm"}
PROBE_STATES = {"detecting", "available", "unavailable", "backoff", "stopped", "unknown"}


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def same(a, b, path="$"):
    """Equal values of the same JSON types (an integer is not a double)."""
    check(type(a) is type(b), f"{path}: {a!r} ({type(a).__name__}) vs {b!r} ({type(b).__name__})")
    if isinstance(a, dict):
        check(list(a) == list(b), f"{path}: keys {list(a)} vs {list(b)}")
        for k in a:
            same(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        check(len(a) == len(b), f"{path}: lengths {len(a)} vs {len(b)}")
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{path}[{i}]")
    else:
        check(a == b, f"{path}: {a!r} vs {b!r}")


def check_number_format(snapshot, where):
    """protocol.md, Metrics: doubles are JSON doubles (`64.0`), byte counts integers."""
    for d in snapshot["devices"]:
        for name, v in d["metrics"].items():
            want = float if name in DOUBLE_METRICS else int
            check(type(v) is want, f"{where}: {d['id']}.metrics.{name} = {v!r} is not a "
                                   f"JSON {'double' if want is float else 'integer'}")


async def devices_ready(server):
    return server.wait_until("the first samples", lambda: server.get_json("/api/v1/devices")["devices"])


async def every_probe_sampled(server, probes=("simulated", "host")):
    """Waits until every probe in `probes` has a latest snapshot (hello's devices_pending is then
    empty); the devices, as devices_ready gives them."""
    server.wait_until(f"a snapshot of each of {probes}", lambda: set(probes) <= {
        s["probe"] for s in server.get_json("/api/v1/snapshot")["snapshots"]})
    return await devices_ready(server)


async def case_hello(server):
    await devices_ready(server)
    for tr in ("tcp", "ws"):
        c = await open_conn(tr, server)
        h = await c.recv()
        check(h["type"] == "hello", f"{tr}: the first message is not hello: {h}")
        check(h.get("schema") == "gpustream/1", f"{tr}: schema {h.get('schema')}")
        check(isinstance(h.get("server"), str) and h["server"], f"{tr}: server {h.get('server')}")
        check(isinstance(h.get("instance"), str) and h["instance"], f"{tr}: instance")
        check(isinstance(h.get("last_sequence"), int) and h["last_sequence"] >= 0, f"{tr}: last_sequence")
        check(isinstance(h.get("history_capacity"), int) and h["history_capacity"] > 0, f"{tr}: history")
        for p in h["probes"]:
            check(isinstance(p["name"], str) and p["state"] in PROBE_STATES, f"{tr}: probe {p}")
            check(isinstance(p.get("reason", ""), str), f"{tr}: probe reason {p}")
        check({p["name"] for p in h["probes"]} >= {"simulated", "host"}, f"{tr}: probes {h['probes']}")
        check(h["devices"], f"{tr}: hello lists no device")
        check(isinstance(h.get("requests"), list) and {"subscribe", "fit"} <= set(h["requests"]),
              f"{tr}: hello's requests {h.get('requests')} do not list subscribe and fit")
        for d in h["devices"]:
            for k, t in (("id", str), ("vendor", str), ("name", str), ("probe", str),
                         ("index", int), ("pci_bus_id", str)):
                check(isinstance(d.get(k), t), f"{tr}: hello device {k}: {d}")
        # Without --token an auth line is ignored.
        await c.send({"type": "auth", "token": "whatever"})
        got = await snapshots(c, 6)
        seqs = [s["sequence"] for s in got]
        check(seqs == list(range(h["last_sequence"] + 1, h["last_sequence"] + 7)),
              f"{tr}: the snapshots after hello are not last_sequence+1, +2, ...: "
              f"last_sequence {h['last_sequence']}, got {seqs}")
        for s in got:
            for k in ("schema", "probe", "sequence", "time_unix_ns", "devices", "errors"):
                check(k in s, f"{tr}: snapshot without {k}")
            check_number_format(s, tr)
        await c.close()


async def case_auth(server):
    for token_ok in (True, False):
        c = await open_conn("tcp", server, token="s3cret" if token_ok else "wrong")
        if token_ok:
            check((await c.recv())["type"] == "hello", "tcp: no hello after a good auth line")
            await c.close()
            continue
        e = await c.recv()
        check(e["type"] == "error" and e["code"] == "unauthorized", f"tcp wrong token: {e}")
        try:
            m = await c.recv()
            raise AssertionError(f"tcp wrong token: still open, sent {m}")
        except Closed:
            pass
    # The first line must be auth: a subscribe first is refused, and so is silence.
    for first in ({"type": "subscribe"}, None):
        c = await open_conn("tcp", server)
        if first:
            await c.send(first)
        e = await c.recv(timeout=5)
        check(e["type"] == "error" and e["code"] == "unauthorized", f"tcp {first}: {e}")
        try:
            await c.recv()
            raise AssertionError("tcp: open after unauthorized")
        except Closed:
            pass
    for kw in ({"token": "s3cret"}, {"query_token": "s3cret"}):
        c = await open_conn("ws", server, **kw)
        check((await c.recv())["type"] == "hello", f"ws {kw}: no hello")
        await c.close()
    try:
        await open_conn("ws", server)
        raise AssertionError("ws without a token was accepted")
    except websockets.exceptions.InvalidStatusCode as e:
        check(e.status_code == 401, f"ws without a token: {e.status_code}")
    try:
        urllib.request.urlopen(f"http://{server.http}/metrics", timeout=10)
        raise AssertionError("/metrics without a token was served")
    except urllib.error.HTTPError as e:
        check(e.code == 401 and e.headers.get("WWW-Authenticate", "").startswith("Bearer"),
              f"/metrics without a token: {e.code} {dict(e.headers)}")
    with urllib.request.urlopen(f"http://{server.http}/healthz", timeout=10) as r:
        check(r.status == 200 and r.read().strip() == b"ok", "/healthz is not open")


PROJECTED = ["utilization_percent", "temperature_celsius", "memory_used_bytes", "power_watts"]


def project(device, fields):
    """What protocol.md says a projection keeps of one device: `metrics`, `sources`, `absent`
    and `absent_sources` only for `fields` (the last left out when empty); the rest as is."""
    out = {}
    for k, v in device.items():
        if k in ("metrics", "sources", "absent"):
            out[k] = {m: x for m, x in v.items() if m in fields}
        elif k == "absent_sources":
            kept = {m: x for m, x in v.items() if m in fields}
            if kept:
                out[k] = kept
        else:
            out[k] = v
    return out


async def case_projection(server):
    await devices_ready(server)
    plain = await open_conn("tcp", server)
    await expect(plain, "hello")
    proj = await open_conn("ws", server)
    await expect(proj, "hello")
    await proj.send({"type": "subscribe", "fields": PROJECTED})
    ack = await expect(proj, "subscribed")
    check(ack.get("fields") == PROJECTED, f"subscribed fields: {ack}")
    got = await snapshots(proj, 6)
    want = {s["sequence"] for s in got}
    seen = {}
    while not want <= set(seen):
        s = (await snapshots(plain, 1))[0]
        seen[s["sequence"]] = s
        check(len(seen) < 200, "the unprojected stream never reached the projected sequences")
    for p in got:
        for d in p["devices"]:  # a host snapshot has none
            check("absent_sources" not in d or d["absent_sources"],
                  "an empty absent_sources object in a projected snapshot")
        u = seen[p["sequence"]]
        expected = dict(u)
        expected["type"] = "snapshot"
        expected["devices"] = [project(d, PROJECTED) for d in u["devices"]]
        same(p, expected, f"seq {p['sequence']}")
        check_number_format(p, "projected")
    await plain.close()
    await proj.close()


async def case_filters(server):
    ids = [d["id"] for d in (await devices_ready(server))]
    c = await open_conn("ws", server)
    await expect(c, "hello")
    await c.send({"type": "subscribe", "probes": ["host"]})
    ack = await expect(c, "subscribed")
    check(ack.get("probes") == ["host"], f"subscribed: {ack}")
    for s in await snapshots(c, 4):
        check(s["probe"] == "host", f"probes filter: got a {s['probe']} snapshot")
    # A new subscribe replaces the previous one.
    await c.send({"type": "subscribe", "probes": ["simulated"], "devices": [ids[0]]})
    await expect(c, "subscribed")
    for s in await snapshots(c, 4):
        check(s["probe"] == "simulated" and [d["id"] for d in s["devices"]] == [ids[0]],
              f"devices filter: {s['probe']} {[d['id'] for d in s['devices']]}")
    await c.send({"type": "subscribe"})
    await expect(c, "subscribed")
    probes = set()
    for _ in range(200):
        probes.add((await snapshots(c, 1))[0]["probe"])
        if probes == {"simulated", "host"}:
            break
    check(probes == {"simulated", "host"}, f"an empty subscribe should give everything: {probes}")
    await c.close()


async def case_unknown_ids(server):
    ids = [d["id"] for d in (await devices_ready(server))]
    for tr in ("tcp", "ws"):
        c = await open_conn(tr, server)
        await expect(c, "hello")
        await c.send({"type": "subscribe", "devices": [ids[0], "no-such-device"],
                      "probes": ["simulated", "no-such-probe"]})
        while True:
            m = await c.recv()
            if m["type"] in ("subscribed", "error"):
                break
        text = str(m.get("unknown", "")) if m["type"] == "subscribed" else m.get("message", "")
        check("no-such-device" in text and "no-such-probe" in text,
              f"{tr}: unknown ids are not reported (item 12): {m}")
        await c.close()


FIT_KEYS = {"node", "device", "name", "probe", "vendor", "free_bytes", "source", "state",
            "age_seconds"}


async def case_fit(server):
    """protocol.md, `fit`: answered by `fit_result` with the request's id, most free first, cut
    to `limit`; a bad `bytes` is a bad_request naming the field with the id; the stream goes on."""
    # The host probe has no devices: the simulated probe's being listed does not say it sampled.
    ids = {d["id"] for d in (await every_probe_sampled(server)) if d["probe"] == "simulated"}
    for tr in ("tcp", "ws"):
        c = await open_conn(tr, server)
        h = await expect(c, "hello")
        check(h.get("devices_pending") == [], f"{tr}: every probe has sampled: {h}")
        await c.send({"type": "fit", "bytes": 0, "id": f"{tr}-all"})
        r = await expect(c, "fit_result")
        check(r.get("id") == f"{tr}-all" and r["bytes"] == 0 and r["schema"] == "gpustream/1",
              f"{tr}: fit_result head: {r}")
        check(r["total"] == len(ids) and not r["truncated"], f"{tr}: every device fits 0: {r}")
        check(r["excluded"] == [], f"{tr}: nothing left out: {r}")
        check({f["device"] for f in r["fits"]} == ids, f"{tr}: fit devices: {r['fits']}")
        frees = [f["free_bytes"] for f in r["fits"]]
        check(frees == sorted(frees, reverse=True), f"{tr}: not most free first: {frees}")
        for f in r["fits"]:
            check(set(f) == FIT_KEYS, f"{tr}: fit entry keys: {sorted(f)}")
            check(f["node"] == "" and f["state"] == "up", f"{tr}: a serve's own device: {f}")
            check(isinstance(f["free_bytes"], int) and isinstance(f["age_seconds"], float) and
                  f["age_seconds"] >= 0, f"{tr}: number types: {f}")
        await c.send({"type": "fit", "bytes": 0, "limit": 1, "id": "one"})
        r = await expect(c, "fit_result")
        check(len(r["fits"]) == 1 and r["truncated"] and r["total"] == len(ids), f"limit: {r}")
        await c.send({"type": "fit", "bytes": 2**64 - 1, "id": "max"})
        r = await expect(c, "fit_result")
        check(r["fits"] == [] and r["total"] == 0, f"nothing fits 2^64 - 1: {r}")
        await c.send({"type": "fit", "bytes": 2**64, "id": "over"})
        e = await expect(c, "error")
        check(e["code"] == "bad_request" and e.get("id") == "over" and "fit.bytes" in e["message"],
              f"{tr}: bytes past 2^64 - 1: {e}")
        check(len(await snapshots(c, 2)) == 2, f"{tr}: the stream goes on after the error")
        await fit_exclusions(c, tr, sorted(ids))
        await c.close()
    # /api/v1/fit takes the same exclusions as query parameters.
    out = sorted(ids)[0]
    with urllib.request.urlopen(f"http://{server.http}/api/v1/fit?bytes=0&exclude={out}",
                                timeout=10) as resp:
        doc = json.loads(resp.read())
    check({f["device"] for f in doc["fits"]} == ids - {out}, f"http exclude: {doc}")
    check([(x["device"], x["reason"]) for x in doc["excluded"]] == [(out, "excluded")],
          f"http excluded: {doc}")
    try:
        urllib.request.urlopen(f"http://{server.http}/api/v1/fit?bytes=0&fatal_event_window_s=-1",
                               timeout=10)
        check(False, "http: a negative fatal_event_window_s was accepted")
    except urllib.error.HTTPError as e:
        check(e.code == 400 and "fatal_event_window_s" in json.loads(e.read())["error"],
              f"http: bad window: {e}")


async def fit_exclusions(c, tr, ids):
    """protocol.md, `fit`: `exclude` leaves devices out and `fit_result.excluded` says why;
    `fatal_event_window_s` is bounded; hello's `devices_pending` is empty once every probe has
    sampled."""
    await c.send({"type": "fit", "bytes": 0, "id": "ex", "exclude": [ids[0], "no-such-gpu"],
                  "fatal_event_window_s": 0})
    r = await expect(c, "fit_result")
    check({f["device"] for f in r["fits"]} == set(ids[1:]) and r["total"] == len(ids) - 1,
          f"{tr}: exclude: {r}")
    check(len(r["excluded"]) == 1, f"{tr}: excluded: {r}")
    x = r["excluded"][0]
    check(x["device"] == ids[0] and x["reason"] == "excluded" and
          set(x) == FIT_KEYS | {"reason", "detail"} and x["detail"], f"{tr}: excluded entry: {x}")
    for bad, field in (({"exclude": ids[0]}, "fit.exclude"),
                       ({"exclude": ["d"] * 257}, "fit.exclude"),
                       ({"exclude": ["x" * 257]}, "fit.exclude"),
                       ({"fatal_event_window_s": 604801}, "fit.fatal_event_window_s"),
                       ({"fatal_event_window_s": -1}, "fit.fatal_event_window_s")):
        await c.send({"type": "fit", "bytes": 0, "id": "bad", **bad})
        e = await expect(c, "error")
        check(e["code"] == "bad_request" and e.get("id") == "bad" and field in e["message"],
              f"{tr}: {bad}: {e}")


CASES_SUBSCRIBE = {
    "hello": (["--simulate", "2", "--interval", "0.1"], case_hello),
    "auth": (["--simulate", "1", "--interval", "0.1", "--token", "{tmp}/token", "--handshake-timeout", "0.5"], case_auth),
    "projection": (["--simulate", "2", "--interval", "0.05"], case_projection),
    "filters": (["--simulate", "2", "--interval", "0.05"], case_filters),
    "unknown_ids": (["--simulate", "2", "--interval", "0.05"], case_unknown_ids),
    "fit": (["--simulate", "2", "--interval", "0.1"], case_fit),
}
