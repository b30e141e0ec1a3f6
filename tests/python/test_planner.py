"""The planner in Python, locally (Telemetry) and remotely (connect()), in one shape: fits()
and best_device() return gpustream.DeviceFit, fit_plan() a gpustream.FitPlan with what was left
out and why (exclude=, and the health rule: a device with a fatal event such as an Xid 79 within
fatal_event_window seconds), over the fake libnvidia-ml.so.1 whose events fire on demand."""
import pytest

import gpustream
from conftest import env_path, take
from test_nvml_mig_events import GPU0, MIG0, MIG1, fake_nvml, nvml  # noqa: F401 (fixtures)

GiB = 1 << 30


def fire_and_wait(events, trigger, xid):
    trigger.fire("xid", xid)
    got = take(events, 1)
    assert [e.xid for e in got] == [xid], "no event within 10 s"


def test_a_local_planner_leaves_out_a_sick_gpu_and_says_why(nvml):
    t, trigger = nvml
    before = t.fits(GiB)
    assert all(isinstance(f, gpustream.DeviceFit) for f in before)
    assert {MIG0, MIG1} <= {f.device_id for f in before}
    assert t.fit_plan(GiB).excluded == []
    with t.events(timeout=10) as events:
        fire_and_wait(events, trigger, 79)  # on GPU 0: both its MIG instances are out
    ids = [f.device_id for f in t.fits(GiB)]
    assert MIG0 not in ids and MIG1 not in ids
    plan = t.fit_plan(GiB)
    assert isinstance(plan, gpustream.FitPlan)
    out = {x.device.device_id: x for x in plan.excluded}
    assert set(out) == {MIG0, MIG1}
    assert out[MIG0].reason == "fatal_event"
    assert out[MIG0].detail.startswith(f"xid 79 on its GPU {GPU0} ")
    assert isinstance(out[MIG0].device, gpustream.DeviceFit)
    best = t.best_device(GiB)
    assert best is None or best.device_id not in (MIG0, MIG1)
    # The health rule off, and exclusions by id.
    assert {MIG0, MIG1} <= {f.device_id for f in t.fits(GiB, fatal_event_window=0)}
    plan = t.fit_plan(GiB, exclude=[MIG0], fatal_event_window=0)
    assert [(x.device.device_id, x.reason) for x in plan.excluded] == [(MIG0, "excluded")]
    # Wrong arguments name themselves.
    with pytest.raises(TypeError, match="exclude"):
        t.fits(GiB, exclude=MIG0)
    with pytest.raises(ValueError, match="fatal_event_window"):
        t.fits(GiB, fatal_event_window=-1)
    with pytest.raises(TypeError, match="fatal_event_window"):
        t.fits(GiB, fatal_event_window="1h")


def test_an_application_xid_does_not_count(nvml):
    t, trigger = nvml
    with t.events(timeout=10) as events:
        fire_and_wait(events, trigger, 13)  # a graphics engine exception: the job's fault
    assert t.fit_plan(GiB).excluded == []


def test_a_remote_planner_has_the_local_shape(fake_nvml):
    from serve_helper import Server  # tests/integration/serve_helper.py
    server = Server(env_path("GPUSTREAM_CLI") + " serve", "--probes", "nvidia", "--nvml-library",
                    env_path("GPUSTREAM_FAKE_NVML"), "--interval", "0.05",
                    "--listen", "127.0.0.1:0")
    try:
        with gpustream.connect(f"ws://{server.http}") as remote:
            assert remote.wait_connected(10), remote.status
            take(remote.stream(timeout=10), 1)  # the server has sampled its devices
            fits = remote.fits(GiB)
            assert fits and all(isinstance(f, gpustream.DeviceFit) for f in fits)
            mig0 = next(f for f in fits if f.device_id == MIG0)
            assert (mig0.node, mig0.probe, mig0.vendor) == ("", "nvidia", "nvidia")
            assert mig0.source in ("nvml", "derived")
            assert mig0.free_bytes == 19 * GiB and mig0.age_seconds >= 0
            assert remote.best_device(GiB).device_id == fits[0].device_id
            assert remote.best_device(2**64 - 1) is None
            assert len(remote.fits(0, limit=1)) == 1
            with remote.events(timeout=10) as events:
                fire_and_wait(events, fake_nvml, 79)
            plan = remote.fit_plan(GiB)
            out = {x.device.device_id: x for x in plan.excluded}
            assert set(out) == {MIG0, MIG1}
            assert out[MIG0].reason == "fatal_event" and "xid 79" in out[MIG0].detail
            assert MIG0 not in [f.device_id for f in remote.fits(GiB)]
            assert MIG0 in [f.device_id for f in remote.fits(GiB, fatal_event_window=0)]
            plan = remote.fit_plan(GiB, exclude=[MIG1], fatal_event_window=0)
            assert [(x.device.device_id, x.reason) for x in plan.excluded] == [(MIG1, "excluded")]
            # The old dict answer still works, with a DeprecationWarning and device_id too.
            with pytest.deprecated_call():
                old = remote.fit(0)
            assert all(f["device_id"] == f["device"] for f in old["fits"])
    finally:
        server.stop()
