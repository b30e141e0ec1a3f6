"""gpustream: GPU telemetry for Python (NVIDIA, AMD, Intel, Apple, simulated).

    import gpustream

    with gpustream.Telemetry(simulate=2, interval=0.1) as t:
        for snap in t.stream(timeout=5):
            for dev in snap.devices:
                print(dev.name, dev.metrics.get("power_watts"))
            break

See docs/python.md for the whole API, threads and the GIL, and exit behaviour. The package is
typed (PEP 561): the compiled part's types are in _gpustream.pyi.
"""

import atexit as _atexit
import logging as _logging
from types import TracebackType
from typing import Any, Dict, List, Optional, Sequence, Type, Union

from . import _gpustream
from ._gpustream import (  # noqa: F401  (re-exported)
    AbsentMetricError,
    ConfigError,
    Container,
    Device,
    DeviceFit,
    DeviceWindow,
    Engine,
    Event,
    EventStream,
    FitExclusion,
    FitPlan,
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
    UnknownMetricError,
    WindowOverhead,
    WindowSummary,
    connect,
    known_metrics,
    known_probes,
    log_level,
    set_log_handler,
    set_log_level,
    snapshot_from_json,
)
from ._version import __version__

__all__ = [
    "AbsentMetricError", "ConfigError", "Container", "Device", "DeviceFit", "DeviceWindow",
    "Engine", "Event", "EventStream", "FitExclusion", "FitPlan", "Gap", "Host", "HostProcess", "JsonError", "MetricSummary",
    "MigInstance", "MyDeviceUsage", "MyProcess", "Pod", "Process", "Reading", "RemoteClient",
    "SampleError", "SlurmJob", "Snapshot", "Stream", "Subscription", "Telemetry",
    "UnknownMetricError", "Window", "WindowOverhead", "WindowSummary", "__version__", "connect",
    "known_metrics", "known_probes", "log_level", "log_to_logging", "set_log_handler",
    "set_log_level", "snapshot_from_json",
]

_Names = Union[None, str, Sequence[str]]


class Window:
    """A named measurement window: ``with telemetry.window("step") as w: ...``.

    Inside the block the window collects; when the block ends (also by an exception) it is
    closed and ``w.summary`` holds the WindowSummary: per device the energy used and
    min/max/mean/last of each metric. ``w.energy``, ``w.devices`` and ``w.device(id)`` read the
    summary directly. Windows of different names may overlap.
    """

    def __init__(self, telemetry: Telemetry, name: str, probes: _Names = None,
                 devices: _Names = None) -> None:
        """A window `name` of `telemetry` over `probes` and `devices` (None: all); not open yet."""
        self._telemetry = telemetry
        self.name = name
        self._probes = probes
        self._devices = devices
        self.summary: Optional[WindowSummary] = None

    def __enter__(self) -> "Window":
        """Opens the window (a fresh sample of each windowed probe: the begin edge)."""
        self._telemetry._begin_window(self.name, self._probes, self._devices)
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        """Closes it (the end edge) and keeps its WindowSummary in ``summary``."""
        self.summary = self._telemetry._end_window(self.name)

    def _summary(self) -> WindowSummary:
        if self.summary is None:
            raise RuntimeError(f"window '{self.name}' has not ended yet")
        return self.summary

    @property
    def energy(self) -> Dict[str, float]:
        """{device_id: joules} of the devices whose energy over the window is known."""
        return self._summary().energy

    @property
    def devices(self) -> List[DeviceWindow]:
        """Per device (DeviceWindow) of the summary."""
        return self._summary().devices

    @property
    def duration(self) -> float:
        """Seconds between begin and end."""
        return self._summary().duration

    def device(self, device_id: str) -> Optional[DeviceWindow]:
        """The DeviceWindow of this device, or None."""
        return self._summary().device(device_id)

    def __repr__(self) -> str:
        state = "open" if self.summary is None else f"{len(self.summary.devices)} device(s)"
        return f"<gpustream.Window '{self.name}' {state}>"


def _window(self: Telemetry, name: str = "window", probes: _Names = None,
            devices: _Names = None) -> Window:
    """A measurement window as a context manager (see gpustream.Window)."""
    return Window(self, name, probes, devices)


setattr(Telemetry, "window", _window)


def _summary_to_dict(self: WindowSummary) -> Dict[str, Any]:
    """The summary as plain dicts (metric names as in the gpustream/1 documents)."""
    o = self.overhead
    return {
        "name": self.name,
        "begin_ns": self.begin_ns,
        "end_ns": self.end_ns,
        "duration": self.duration,
        "snapshots": self.snapshots,
        "missed_snapshots": self.missed_snapshots,
        "exact_edges": self.exact_edges,
        "edge_errors": list(self.edge_errors),
        "overhead": {
            "edge_samples": o.edge_samples,
            "failed_edge_samples": o.failed_edge_samples,
            "begin_latency_ns": o.begin_latency_ns,
            "end_latency_ns": o.end_latency_ns,
            "max_sample_latency_ns": o.max_sample_latency_ns,
            "caller_cpu_ns": o.caller_cpu_ns,
        },
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


setattr(WindowSummary, "to_dict", _summary_to_dict)

# The library's levels as Python logging's (trace below DEBUG, as logging has no such level).
_LOGGING_LEVELS = {"trace": 5, "debug": _logging.DEBUG, "info": _logging.INFO,
                   "warn": _logging.WARNING, "error": _logging.ERROR,
                   "critical": _logging.CRITICAL}


def log_to_logging(logger: Optional[_logging.Logger] = None) -> None:
    """Sends the library's log lines to Python's logging instead of stderr.

    Each line goes to ``logger`` (default: ``logging.getLogger("gpustream")``) at the matching
    level (warn -> WARNING, ...). Which lines the library writes at all is set_log_level()'s
    ('warn' by default); set_log_handler(None) gives them back to stderr.
    """
    target = logger if logger is not None else _logging.getLogger("gpustream")

    def handler(level: str, message: str) -> None:
        target.log(_LOGGING_LEVELS.get(level, _logging.WARNING), "%s", message)

    set_log_handler(handler)


# A Telemetry or a connection still running when the interpreter exits is stopped here, before
# the interpreter finalizes: the module's delivery threads then end while they can still take
# the GIL.
_atexit.register(_gpustream._stop_all)
