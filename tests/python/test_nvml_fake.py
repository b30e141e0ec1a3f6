"""The module over a real vendor path: the NVIDIA probe against the fake libnvidia-ml.so.1
(tests/fakes/nvml), driven by a scenario file the test writes and rewrites."""
import os
import time

import pytest

import gpustream
from conftest import env_path, wait_for

GiB = 1 << 30


def scenario(path, used0, used1, my_bytes):
    pid = os.getpid()
    path.write_text(f"""devices=2
device.0.memory_total={16 * GiB}
device.0.memory_used={used0}
device.0.compute={pid}:{my_bytes}
device.1.memory_total={16 * GiB}
device.1.memory_used={used1}
device.1.compute=
""")


@pytest.fixture
def nvml(tmp_path, monkeypatch):
    path = tmp_path / "scenario.txt"
    scenario(path, 2 * GiB, 10 * GiB, 123456789)
    monkeypatch.setenv("GPUSTREAM_FAKE_NVML_SCENARIO", str(path))
    # lazy: NVML is initialised before each sample, so the fake reads the scenario again
    config = {"nvidia": {"library": env_path("GPUSTREAM_FAKE_NVML")}, "library_session": "lazy"}
    with gpustream.Telemetry(probes=["nvidia"], interval=0.05, config=config) as t:
        assert t.wait_for_first_samples(10)
        yield t, path


def test_snapshot_and_my_process_from_nvml(nvml):
    t, _ = nvml
    snap = t.latest("nvidia")[0]
    assert [d.vendor for d in snap.devices] == ["nvidia", "nvidia"]
    d0 = snap.devices[0]
    assert d0.metrics["memory_used_bytes"] == 2 * GiB
    assert d0.reading("memory_used_bytes").source == "nvml"
    mine = {d.device_id: d for d in t.my_process().devices}
    assert mine[d0.id].gpu_memory_bytes == 123456789 and mine[d0.id].exact
    assert mine[snap.devices[1].id].gpu_memory_bytes == 0


def test_best_device_follows_changes(nvml):
    t, path = nvml
    first = t.best_device(4 * GiB)
    assert first.device_id == t.latest()[0].devices[0].id
    assert t.best_device(15 * GiB) is None
    scenario(path, 12 * GiB, 1 * GiB, 0)  # device 0 fills up, device 1 frees memory
    other = t.latest()[0].devices[1].id
    wait_for(t, lambda: t.best_device(4 * GiB).device_id == other, "the planner to move")
    assert [f.device_id for f in t.fits(4 * GiB)] == [other]


def test_power_samples_from_the_driver_ring(tmp_path, monkeypatch):
    # The fake driver's power sample ring (wall-clock µs, as the test chooses): the samples come
    # as (monotonic_ns, watts) tuples on the snapshot's clock, the driver's spacing kept.
    now_us = time.time_ns() // 1000
    ring = ",".join(f"{now_us - 300_000 + k * 25_000}:{200_000 + k * 1000}" for k in range(6))
    path = tmp_path / "scenario.txt"
    path.write_text(f"devices=1\ndevice.0.power_samples={ring}\n")
    monkeypatch.setenv("GPUSTREAM_FAKE_NVML_SCENARIO", str(path))
    config = {"nvidia": {"library": env_path("GPUSTREAM_FAKE_NVML")}}
    # A long interval: the first snapshot, which takes every entry, stays the latest.
    with gpustream.Telemetry(probes=["nvidia"], interval=30, config=config) as t:
        assert t.wait_for_first_samples(10)
        snap = t.latest("nvidia")[0]
    samples = snap.devices[0].power_samples
    assert [w for _, w in samples] == [200.0 + k for k in range(6)]
    assert all(isinstance(ns, int) for ns, _ in samples)
    assert [b[0] - a[0] for a, b in zip(samples, samples[1:])] == [25_000_000] * 5
    assert samples[-1][0] <= snap.monotonic_ns <= time.monotonic_ns()
    assert snap.to_dict()["devices"][0]["power_samples"] == [list(s) for s in samples]
