"""gpustream: GPU telemetry for Python (NVIDIA, AMD, Intel, Apple, simulated).

    import gpustream

    with gpustream.Telemetry(simulate=2, interval=0.1) as t:
        for snap in t.stream(timeout=5):
            for dev in snap.devices:
                print(dev.name, dev.metrics.get("power_watts"))
            break

See docs/python.md for the whole API, threads and the GIL, and exit behaviour.
"""

import atexit as _atexit

from . import _gpustream
from ._gpustream import (  # noqa: F401  (re-exported)
    AbsentMetricError,
    ConfigError,
    Device,
    DeviceFit,
    DeviceWindow,
    Engine,
    Event,
    EventStream,
    Gap,
    Host,
    HostProcess,
    JsonError,
    MetricSummary,
    MigInstance,
    MyDeviceUsage,
    MyProcess,
    Pod,
    Process,
    Reading,
    RemoteClient,
    SampleError,
    SlurmJob,
    Snapshot,
    Stream,
    Subscription,
    Telemetry,
    WindowSummary,
    connect,
    known_probes,
    snapshot_from_json,
)

__all__ = [
    "AbsentMetricError", "ConfigError", "Device", "DeviceFit", "DeviceWindow", "Engine", "Event",
    "EventStream", "Gap", "Host", "HostProcess", "JsonError", "MetricSummary", "MigInstance",
    "MyDeviceUsage", "MyProcess", "Pod", "Process",
    "Reading", "RemoteClient", "SampleError", "SlurmJob", "Snapshot", "Stream", "Subscription",
    "Telemetry", "Window", "WindowSummary", "connect", "known_probes", "snapshot_from_json",
]


class Window:
    """A named measurement window: ``with telemetry.window("step") as w: ...``.

    Inside the block the window collects; when the block ends (also by an exception) it is
    closed and ``w.summary`` holds the WindowSummary: per device the energy used and
    min/max/mean/last of each metric. ``w.energy``, ``w.devices`` and ``w.device(id)`` read the
    summary directly. Windows of different names may overlap.
    """

    def __init__(self, telemetry, name, probes=None, devices=None):
        self._telemetry = telemetry
        self.name = name
        self._probes = probes
        self._devices = devices
        self.summary = None

    def __enter__(self):
        self._telemetry._begin_window(self.name, self._probes, self._devices)
        return self

    def __exit__(self, exc_type, exc, tb):
        self.summary = self._telemetry._end_window(self.name)
        return False

    def _summary(self):
        if self.summary is None:
            raise RuntimeError(f"window '{self.name}' has not ended yet")
        return self.summary

    @property
    def energy(self):
        """{device_id: joules} of the devices whose energy over the window is known."""
        return self._summary().energy

    @property
    def devices(self):
        return self._summary().devices

    @property
    def duration(self):
        return self._summary().duration

    def device(self, device_id):
        return self._summary().device(device_id)

    def __repr__(self):
        state = "open" if self.summary is None else f"{len(self.summary.devices)} device(s)"
        return f"<gpustream.Window '{self.name}' {state}>"


def _window(self, name="window", probes=None, devices=None):
    """A measurement window as a context manager (see gpustream.Window)."""
    return Window(self, name, probes, devices)


Telemetry.window = _window


def _summary_to_dict(self):
    """The summary as plain dicts (metric names as in the gpustream/1 documents)."""
    return {
        "name": self.name,
        "begin_ns": self.begin_ns,
        "end_ns": self.end_ns,
        "snapshots": self.snapshots,
        "missed_snapshots": self.missed_snapshots,
        "exact_edges": self.exact_edges,
        "edge_errors": list(self.edge_errors),
        "devices": [
            {
                "device_id": d.device_id,
                "probe": d.probe,
                "samples": d.samples,
                "energy_joules": d.energy_joules,
                "energy_kind": d.energy_kind,
                "energy_counter_resets": d.energy_counter_resets,
                "begin_edge": d.begin_edge,
                "end_edge": d.end_edge,
                "begin_edge_ns": d.begin_edge_ns,
                "end_edge_ns": d.end_edge_ns,
                "estimated_joules": d.estimated_joules,
                # coverage (docs/python.md, "Coverage"): None where it cannot be known
                "energy_method": d.energy_method,
                "power_readings": d.power_readings,
                "driver_power_samples": d.driver_power_samples,
                "largest_gap_ns": d.largest_gap_ns,
                "update_period_ns": d.update_period_ns,
                "fresh_coverage": d.fresh_coverage,
                "shorter_than_update_period": d.shorter_than_update_period,
                "coverage_reason": d.coverage_reason,
                "counter_changes": d.counter_changes,
                "ignored_power_samples": d.ignored_power_samples,
                "ignored_power_samples_reason": d.ignored_power_samples_reason,
                "metrics": {
                    name: {"min": s.min, "max": s.max, "mean": s.mean, "last": s.last,
                           "count": s.count, "source": s.source}
                    for name, s in d.metrics.items()
                },
            }
            for d in self.devices
        ],
    }


WindowSummary.to_dict = _summary_to_dict

# A Telemetry or a connection still running when the interpreter exits is stopped here, before
# the interpreter finalizes: the module's delivery threads then end while they can still take
# the GIL.
_atexit.register(_gpustream._stop_all)
