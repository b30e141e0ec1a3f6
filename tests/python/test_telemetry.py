"""gpustream.Telemetry: lifecycle, latest, subscribe with policies, streams, planner, errors."""
import threading

import pytest

import gpustream
from conftest import take, wait_for


def test_context_manager_starts_and_stops():
    t = gpustream.Telemetry(probes=["simulated"], simulate=1, interval=0.02)
    assert t.latest() == []
    with t as same:
        assert same is t
        assert t.wait_for_first_samples(10)
        assert t.probe_names == ["simulated"]
    assert t.stopped
    with pytest.raises(RuntimeError, match="stopped"):
        t.subscribe(lambda s: None)


def test_callbacks_get_snapshots_on_a_module_thread(sim):
    got, threads = [], set()
    done = threading.Event()

    def on_snapshot(snap):
        got.append(snap)
        threads.add(threading.get_ident())
        if len(got) == 5:
            done.set()

    with sim.subscribe(on_snapshot) as sub:
        assert done.wait(10), f"only {len(got)} callbacks"
    assert not sub.active
    seqs = [s.sequence for s in got[:5]]
    assert seqs == sorted(seqs) and len(set(seqs)) == 5
    assert all(isinstance(s, gpustream.Snapshot) for s in got)
    assert threading.get_ident() not in threads
    assert sub.delivered >= 5


def test_filters_by_device(sim):
    ids = [d.id for d in sim.latest()[0].devices]
    with sim.stream(devices=[ids[1]], timeout=10) as s:
        for snap in take(s, 3):
            assert ids[1] in [d.id for d in snap.devices]
    with sim.stream(probes="host", timeout=0.2) as s:
        assert take(s, 1) == []  # nothing matches: the stream ends at its timeout


def _blocked_subscriber(sim, policy):
    """A subscriber whose first callback blocks until released, capacity 2."""
    release, first = threading.Event(), threading.Event()
    seen, gaps = [], []

    def cb(snap):
        seen.append(snap.sequence)
        first.set()
        release.wait(30)

    sub = sim.subscribe(cb, policy=policy, capacity=2, on_gap=gaps.append)
    assert first.wait(10)
    take(sim.stream(timeout=10), 8)  # 8 more snapshots are published while it is blocked
    return sub, release, seen, gaps


def test_drop_oldest_drops_and_reports_the_gap(sim):
    sub, release, seen, gaps = _blocked_subscriber(sim, "drop_oldest")
    assert sub.dropped >= 1
    release.set()
    wait_for(sim, lambda: gaps and len(seen) >= 3, "the gap and the queued snapshots")
    gap = gaps[0]
    assert gap.reason == "dropped_slow_subscriber"
    assert gap.after_sequence == seen[0]
    assert gap.missed >= 1
    assert seen[1] == gap.after_sequence + gap.missed + 1
    sub.close()


def test_latest_keeps_the_newest_without_a_gap(sim):
    sub, release, seen, gaps = _blocked_subscriber(sim, "latest")
    assert sub.dropped >= 1
    release.set()
    wait_for(sim, lambda: len(seen) >= 2, "a second delivery")
    assert seen[1] > seen[0] + 1
    assert gaps == []
    sub.close()


def test_lossless_counts_what_it_lost(sim):
    sub, release, seen, gaps = _blocked_subscriber(sim, "lossless")
    assert sub.lost >= 1
    release.set()
    wait_for(sim, lambda: gaps, "the lossless gap")
    assert gaps[0].reason == "lossless_bound_exceeded"
    # lossless keeps the oldest: the two queued right after the first one come first
    assert seen[1:3] == [seen[0] + 1, seen[0] + 2]
    sub.close()


def test_callback_exceptions_are_reported_and_do_not_stop_delivery(sim, monkeypatch):
    import sys
    reported = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: reported.append(u))
    calls = []
    ok = threading.Event()

    def cb(snap):
        calls.append(snap)
        if len(calls) == 3:
            ok.set()
        raise RuntimeError("boom")

    with sim.subscribe(cb) as sub:
        assert ok.wait(10)
    assert sub.errors >= 2
    assert any(isinstance(u.exc_value, RuntimeError) for u in reported)


def test_close_from_inside_the_callback(sim):
    holder, done = {}, threading.Event()
    count = []

    def cb(snap):
        count.append(snap)
        holder["sub"].close()
        done.set()

    holder["sub"] = sim.subscribe(cb)
    assert done.wait(10)
    take(sim.stream(timeout=10), 3)
    assert len(count) == 1
    assert not holder["sub"].active


def test_stream_ends_on_stop():
    t = gpustream.Telemetry(probes=["simulated"], simulate=1, interval=0.02)
    t.start()
    got, ended = [], threading.Event()
    stream = t.stream()
    first = threading.Event()

    def consume():
        for snap in stream:
            got.append(snap)
            first.set()
        ended.set()

    th = threading.Thread(target=consume, daemon=True)
    th.start()
    assert first.wait(10)
    t.stop()
    assert ended.wait(10), "the stream did not end when the Telemetry stopped"
    th.join(10)


def test_planner_answers_from_the_latest_snapshots(sim):
    fits = sim.fits(1)
    assert len(fits) == 2
    assert fits[0].free_bytes >= fits[1].free_bytes
    best = sim.best_device(1)
    assert best.device_id == fits[0].device_id and best.vendor == "simulated"
    assert sim.best_device(1 << 60) is None
    with pytest.raises(ValueError, match=">= 0"):
        sim.fits(-1)


def test_my_process(sim):
    import os
    me = sim.my_process()
    assert me.pid == os.getpid()
    assert me.host_rss_bytes > 0
    assert len(me.devices) == 2  # every device is listed, known or absent with a reason
    for d in me.devices:
        assert d.gpu_memory_bytes is not None or d.absent is not None


@pytest.mark.parametrize("kwargs, message", [
    (dict(probes=["simulatd"]), r"unknown probe 'simulatd' \(known: .*simulated"),
    (dict(interval=0), "interval must be a positive number of seconds"),
    (dict(interval=-1.5), "interval must be a positive number of seconds"),
    (dict(simulate=65), r"simulate must be True, False or 0..64 \(got 65\)"),
    (dict(config={"simulate": 2, "intervall_seconds": 1}), "intervall_seconds"),
    (dict(config={"probes": "host"}), "probes"),
    (dict(config={"nvidia": {"librari": "x"}}, probes=["nvidia"]), "librari"),
])
def test_bad_configuration_is_a_config_error(kwargs, message):
    with pytest.raises(gpustream.ConfigError, match=message):
        t = gpustream.Telemetry(**kwargs)
        t.start()  # probe sections are checked by the registry at start()
    assert issubclass(gpustream.ConfigError, ValueError)


def test_config_dict_and_file(tmp_path):
    with gpustream.Telemetry(config={"probes": ["simulated"], "simulate": 3,
                                     "interval_seconds": 0.05}) as t:
        assert t.interval == 0.05
        assert len(t.wait_for_first_samples(10)[0].devices) == 3
    path = tmp_path / "gpustream.json"
    path.write_text('{"probes": ["simulated"], "simulate": 1}')
    with gpustream.Telemetry(config=path, interval=0.05) as t:  # keyword arguments win
        assert t.interval == 0.05
        assert len(t.wait_for_first_samples(10)[0].devices) == 1
    with pytest.raises(gpustream.ConfigError):
        gpustream.Telemetry(config=str(tmp_path / "missing.json"))


def test_bad_arguments_are_clear():
    t = gpustream.Telemetry(probes=["simulated"], simulate=1)
    with pytest.raises(ValueError, match="policy must be 'latest', 'drop_oldest' or 'lossless'"):
        t.subscribe(print, policy="newest")
    with pytest.raises(ValueError, match="capacity"):
        t.subscribe(print, capacity=0)
    with pytest.raises(TypeError, match="callback must be callable"):
        t.subscribe(42)
    with pytest.raises(TypeError, match="config must be"):
        gpustream.Telemetry(config=42)
    t.stop()


def test_stats_say_what_sampling_costs(sim):
    take(sim.stream(timeout=10), 2)
    (stats,) = sim.stats()
    assert stats["probe"] == "simulated"
    assert stats["samples"] >= 2 and stats["failures"] == 0
    assert stats["devices"] == 2


def _sim_telemetry():
    return gpustream.Telemetry(probes=["simulated"], simulate=1, interval=0.02)


@pytest.mark.parametrize("call, argument", [
    (lambda: gpustream.Telemetry(interval="fast"), "interval"),
    (lambda: gpustream.Telemetry(interval=[1]), "interval"),
    (lambda: gpustream.Telemetry(simulate=2.5), "simulate"),
    (lambda: gpustream.Telemetry(simulate="2"), "simulate"),
    (lambda: _sim_telemetry().stream(timeout="5"), "timeout"),
    (lambda: _sim_telemetry().events(timeout="5"), "timeout"),
    (lambda: _sim_telemetry().wait_for_first_samples(timeout="5"), "timeout"),
    (lambda: _sim_telemetry().subscribe(print, capacity="64"), "capacity"),
    (lambda: _sim_telemetry().subscribe(print, policy=1), "policy"),
    (lambda: _sim_telemetry().stream(capacity=2.0), "capacity"),
    (lambda: _sim_telemetry().latest(probe=1), "probe"),
    (lambda: _sim_telemetry().fits("1G"), "bytes"),
    (lambda: _sim_telemetry().best_device(1.5), "bytes"),
    (lambda: _sim_telemetry().window(name=3).__enter__(), "name"),
    (lambda: gpustream.connect(5), "url"),
    (lambda: gpustream.connect("ws://127.0.0.1:1", token=5), "token"),
    (lambda: gpustream.snapshot_from_json(b"{}"), "text"),
    (lambda: gpustream.set_log_level(3), "level"),
])
def test_wrong_argument_types_are_type_errors_naming_the_argument(call, argument):
    # Not pybind11's "RuntimeError: Unable to cast Python instance to C++ type".
    with pytest.raises(TypeError, match=rf"^{argument} must be .*, not "):
        call()


def test_latest_keeps_the_last_snapshots_after_stop():
    t = _sim_telemetry()
    with t:
        assert t.wait_for_first_samples(10)
        take(t.stream(timeout=10), 2)
        before = [(s.probe, s.sequence) for s in t.latest()]
    assert t.stopped
    after = t.latest()
    assert [(s.probe, s.sequence) for s in after] == before
    assert [s.probe for s in t.latest("simulated")] == ["simulated"]


def test_effective_intervals_say_what_each_probe_samples_at():
    # The host probe's minimum is 100 ms: a faster request is raised to it; the simulated probe
    # has none.
    t = gpustream.Telemetry(probes=["simulated", "host"], simulate=1, interval=0.02)
    assert t.effective_intervals == {}  # before start()
    with t:
        assert t.wait_for_first_samples(10)
        assert t.interval == 0.02
        assert t.effective_intervals == {"simulated": 0.02, "host": 0.1}
