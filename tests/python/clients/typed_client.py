"""A client written against gpustream's stubs only (test_typing.py runs mypy --strict on it):
every documented use of the module, so a stub that is missing or wrong fails the check."""
import logging
from typing import Dict, List, Optional, Union

import gpustream


def show(snap: gpustream.Snapshot) -> None:
    for dev in snap.devices:
        power: Union[int, float, None] = dev.metrics.get("power_watts")
        total: Union[int, float] = dev.metrics.get("memory_total_bytes", 0)
        r: gpustream.Reading = dev.reading("memory_used_bytes")
        used: Union[int, float, None] = r.value
        fallback: Union[int, float, str] = r.value_or("unknown")
        reasons: Dict[str, str] = dev.absent
        print(snap.probe, snap.sequence, snap.time, dev.id, dev.name, dev.vendor, power, total,
              used, fallback, r.source, r.reason, bool(r), reasons, dev.parent, dev.partitioned)
        try:
            print(dev["fan_rpm"])
        except gpustream.AbsentMetricError as e:
            print(e.metric, e.reason)
        except gpustream.UnknownMetricError as e:
            print(e.metric)
        if dev.mig is not None:
            print(dev.mig.profile, dev.mig.gpu_instance_id)
        for t, watts in dev.power_samples:
            print(t + 1, watts * 2.0)
        for p in dev.processes:
            mem: Optional[int] = p.gpu_memory_bytes
            job = p.slurm.job_id if p.slurm is not None else None
            ctr = p.container.runtime if p.container is not None else p.container_absent
            print(p.pid, p.name, mem, job, ctr, [e.name for e in p.engines])
        for engine in dev.engines:
            print(engine.name, engine.utilization_percent, engine.utilization.value)
    if snap.host is not None:
        print(snap.host.memory_total_bytes, [hp.rss_bytes for hp in snap.host.processes])
    for err in snap.errors:
        print(err.code, err.message, err.device)
    doc: Dict[str, object] = snap.to_dict()
    text: str = snap.to_json()
    again: gpustream.Snapshot = gpustream.snapshot_from_json(text)
    print(doc["probe"], again.device("x"))


def main() -> int:
    print(gpustream.__version__, gpustream.known_probes(), gpustream.known_metrics())
    gpustream.set_log_level("error")
    level: str = gpustream.log_level()
    gpustream.log_to_logging(logging.getLogger("mine"))
    gpustream.set_log_handler(lambda lvl, msg: print(lvl, msg))
    gpustream.set_log_handler(None)
    print(level)
    with gpustream.Telemetry(probes=["simulated"], simulate=2, interval=0.1) as t:
        firsts: List[gpustream.Snapshot] = t.wait_for_first_samples(timeout=5)
        for snap in firsts + t.latest() + t.latest("simulated"):
            show(snap)
        intervals: Dict[str, float] = t.effective_intervals
        print(t.interval, intervals, t.probe_names, t.setup_errors, t.stopped, t.stats())

        def on_snapshot(snap: gpustream.Snapshot) -> None:
            show(snap)

        def on_gap(gap: gpustream.Gap) -> None:
            print(gap.after_sequence, gap.missed, gap.reason)

        with t.subscribe(on_snapshot, policy="latest", capacity=4, on_gap=on_gap) as sub:
            print(sub.active, sub.delivered, sub.dropped, sub.lost, sub.gaps, sub.errors)
        with t.stream(devices=["a", "b"], timeout=1.0) as stream:
            for snap in stream:
                show(snap)
                break
            print(len(stream.gaps), stream.dropped, stream.lost)
        with t.events(timeout=0.1) as events:
            for ev in events:
                xid: Optional[int] = ev.xid
                print(ev.sequence, ev.time, ev.kind, ev.device, ev.data, xid, ev.to_dict())
        print([e.kind for e in t.recent_events()])
        with t.window("step", probes="simulated") as w:
            pass
        energy: Dict[str, float] = w.energy
        print(energy, w.duration, w.device("x"), [d.device_id for d in w.devices])
        s: Optional[gpustream.WindowSummary] = w.summary
        if s is not None:
            print(s.name, s.exact_edges, s.edge_errors, s.overhead.end_latency_ns, s.to_dict())
            for d in s.devices:
                joules: Optional[float] = d.energy_joules
                ms: gpustream.MetricSummary = d.metrics["power_watts"]
                print(joules, d.energy_method, d.fresh_coverage, ms.mean, ms.count, ms.source)
        best: Optional[gpustream.DeviceFit] = t.best_device(1 << 30)
        if best is not None:
            print(best.device_id, best.name, best.free_bytes, best.vendor, best.source)
        fits: List[gpustream.DeviceFit] = t.fits(1)
        me: gpustream.MyProcess = t.my_process()
        print(len(fits), me.pid, me.host_rss_bytes, [u.gpu_memory_bytes for u in me.devices])
    try:
        gpustream.Telemetry(interval=0)
    except gpustream.ConfigError as e:
        print(e)
    with gpustream.connect("ws://127.0.0.1:1", token="t", probes=["nvidia"]) as client:
        connected: bool = client.wait_connected(timeout=0.01)
        status: Dict[str, Union[str, int]] = client.status
        print(connected, status["state"], client.closed, client.latest())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
