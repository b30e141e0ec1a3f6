"""MIG instances and GPU events in Python, over the fake libnvidia-ml.so.1 (tests/fakes/nvml):
GPU 0 in MIG mode with two instances, GPU 1 without MIG; events fired on demand through the
fake's event_trigger file (read by whichever process waits for NVML events: this one, or a
`gpustream serve` it started)."""
import os

import pytest

import gpustream
from conftest import env_path, take, wait_for

GiB = 1 << 30
GPU0 = "GPU-aaaaaaaa-1111-2222-3333-444444444444"
GPU1 = "GPU-bbbbbbbb-1111-2222-3333-444444444444"
MIG0 = "MIG-11111111-2222-3333-4444-555555555555"
MIG1 = "MIG-66666666-2222-3333-4444-555555555555"
EVENT_LIMIT = 1024  # EventLimits::queue: events a subscriber keeps when it falls behind


def write_scenario(path, trigger):
    path.write_text(f"""devices=2
event_trigger={trigger}
device.0.uuid={GPU0}
device.0.name=NVIDIA A100-SXM4-40GB
device.0.memory_total={40 * GiB}
device.0.memory_used={3 * GiB}
device.0.mig_mode=1
device.0.mig.0.uuid={MIG0}
device.0.mig.0.gi=1
device.0.mig.0.ci=0
device.0.mig.0.profile=3g.20gb
device.0.mig.0.memory_total={20 * GiB}
device.0.mig.0.memory_used={1 * GiB}
device.0.mig.1.uuid={MIG1}
device.0.mig.1.gi=5
device.0.mig.1.ci=2
device.0.mig.1.profile=1g.5gb
device.0.mig.1.memory_total={5 * GiB}
device.0.mig.1.memory_used={2 * GiB}
device.1.uuid={GPU1}
device.1.name=NVIDIA L4
""")


class Trigger:
    """Fires events in the fake NVML: the file is written under another name, then renamed
    (the fake never reads half of it)."""

    def __init__(self, path):
        self.path = path

    def fire(self, type_, data=0, device=0, count=1):
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(f"device={device}\ntype={type_}\ndata={data}\ncount={count}\n")
        os.rename(tmp, self.path)


@pytest.fixture
def fake_nvml(tmp_path, monkeypatch):
    trigger = tmp_path / "trigger"
    scenario = tmp_path / "scenario.txt"
    write_scenario(scenario, trigger)
    monkeypatch.setenv("GPUSTREAM_FAKE_NVML_SCENARIO", str(scenario))
    return Trigger(trigger)


@pytest.fixture
def nvml(fake_nvml):
    config = {"nvidia": {"library": env_path("GPUSTREAM_FAKE_NVML")}}
    with gpustream.Telemetry(probes=["nvidia"], interval=0.05, config=config) as t:
        assert t.wait_for_first_samples(10)
        yield t, fake_nvml


def test_mig_instances_are_devices_with_their_parent(nvml):
    t, _ = nvml
    snap = t.latest("nvidia")[0]
    assert [d.id for d in snap.devices] == [GPU0, MIG0, MIG1, GPU1]
    gpu0, mig0, mig1, gpu1 = snap.devices

    assert gpu0.partitioned and gpu0.parent is None and gpu0.mig is None
    assert not gpu1.partitioned and gpu1.parent is None and gpu1.mig is None

    assert mig0.parent == GPU0 and not mig0.partitioned
    assert isinstance(mig0.mig, gpustream.MigInstance)
    assert (mig0.mig.gpu_instance_id, mig0.mig.compute_instance_id, mig0.mig.profile) == \
        (1, 0, "3g.20gb")
    assert (mig1.mig.gpu_instance_id, mig1.mig.compute_instance_id, mig1.mig.profile) == \
        (5, 2, "1g.5gb")
    assert "1g.5gb" in repr(mig1.mig)
    # The instance's own memory; what NVML has only per GPU is absent, never the parent's.
    assert mig0.metrics["memory_total_bytes"] == 20 * GiB
    assert mig1.metrics["memory_used_bytes"] == 2 * GiB
    assert mig0.absent["power_watts"] == "unsupported"
    assert mig0.reading("temperature_celsius").reason == "unsupported"
    # The same as the gpustream/1 document says.
    doc = snap.to_dict()["devices"]
    assert doc[1]["parent"] == GPU0
    assert doc[1]["mig"] == {"gpu_instance_id": 1, "compute_instance_id": 0, "profile": "3g.20gb"}
    assert doc[0]["partitioned"] is True


def test_an_xid_reaches_an_event_stream(nvml):
    t, trigger = nvml
    with t.events(timeout=10) as events:
        trigger.fire("xid", 79)
        got = take(events, 1)
    assert len(got) == 1, "no event within 10 s"
    e = got[0]
    assert isinstance(e, gpustream.Event)
    assert (e.kind, e.xid, e.data, e.device, e.probe, e.sequence) == \
        ("xid", 79, 79, GPU0, "nvidia", 1)
    assert e.time == e.time_unix_ns / 1e9 and e.time_unix_ns > 0
    assert e.to_dict() == {"sequence": 1, "time_unix_ns": e.time_unix_ns, "probe": "nvidia",
                           "device": GPU0, "kind": "xid", "data": 79}
    assert "xid 79" in repr(e)
    assert [x.sequence for x in t.recent_events()] == [1]
    assert events.dropped == 0


def test_event_kinds_and_device_filter(nvml):
    t, trigger = nvml
    with t.events(devices=[GPU1], timeout=10) as only1, t.events(timeout=10) as every:
        trigger.fire("ecc_double", device=0)
        assert [e.kind for e in take(every, 1)] == ["ecc_double_bit"]
        trigger.fire("xid", 48, device=1)
        got = take(only1, 1)
    assert [(e.device, e.kind, e.xid) for e in got] == [(GPU1, "xid", 48)]
    assert got[0].sequence == 2  # the GPU 0 event before it was not this stream's: a hole


def test_an_event_storm_is_bounded_for_a_stream_that_does_not_read(nvml):
    t, trigger = nvml
    storm = 3 * EVENT_LIMIT
    events = t.events(timeout=0)
    trigger.fire("xid", 31, count=storm)
    wait_for(t, lambda: t.recent_events() and t.recent_events()[-1].sequence == storm,
             "the storm to be published", snapshots=2000)
    got = list(events)  # what the stream kept, without waiting (timeout 0)
    assert len(got) == EVENT_LIMIT
    assert events.dropped == storm - EVENT_LIMIT
    assert [e.sequence for e in got] == list(range(storm - EVENT_LIMIT + 1, storm + 1))


def test_an_event_stream_ends_when_the_telemetry_stops(nvml):
    t, _ = nvml
    events = t.events()
    t.stop()
    assert take(events, 1) == []
    with pytest.raises(RuntimeError, match="stopped"):
        t.events()


def test_events_of_a_remote_server(fake_nvml):
    from serve_helper import Server  # tests/integration/serve_helper.py
    server = Server(env_path("GPUSTREAM_CLI") + " serve", "--probes", "nvidia", "--nvml-library",
                    env_path("GPUSTREAM_FAKE_NVML"), "--interval", "0.05",
                    "--listen", "127.0.0.1:0")
    try:
        with gpustream.connect(f"ws://{server.http}") as remote:
            assert remote.wait_connected(10), remote.status
            snap = take(remote.stream(timeout=10), 1)[0]
            mig0 = snap.device(MIG0)
            assert mig0.parent == GPU0 and mig0.mig.profile == "3g.20gb"
            assert snap.device(GPU0).partitioned
            with remote.events(timeout=10) as events:
                fake_nvml.fire("xid", 63)
                got = take(events, 1)
            assert [(e.device, e.kind, e.xid) for e in got] == [(GPU0, "xid", 63)]
            assert [e.xid for e in remote.recent_events()] == [63]
    finally:
        server.stop()
