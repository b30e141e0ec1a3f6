"""telemetry.window(name): summaries with energy per device and min/max/mean per metric."""
import pytest

from conftest import take


def test_window_has_energy_and_metric_summaries(sim):
    with sim.window("step") as w:
        take(sim.stream(timeout=10), 5)  # the "work": five sampling intervals
    s = w.summary
    assert s.snapshots >= 2 and s.duration > 0
    assert len(s.devices) == 2
    for d in s.devices:
        assert d.energy_joules > 0
        assert d.energy_kind == "counter"
        assert w.energy[d.device_id] == d.energy_joules
        p = d.metrics["power_watts"]
        # mean is sum / count in the SDK: it may pass max by an ulp when every reading is equal
        assert p.min <= p.max and p.mean == pytest.approx(min(max(p.mean, p.min), p.max))
        assert p.count == d.samples
        assert "temperature_celsius" in d.metrics
        assert "fan_rpm" not in d.metrics  # absent in every sample: not summarized
    doc = s.to_dict()
    assert doc["devices"][0]["metrics"]["power_watts"]["max"] == s.devices[0].metrics[
        "power_watts"].max


def test_named_windows_overlap(sim):
    with sim.window("epoch") as epoch:
        with sim.window("step") as step:
            take(sim.stream(timeout=10), 3)
        take(sim.stream(timeout=10), 3)
    assert epoch.summary.snapshots > step.summary.snapshots
    for dev_id, joules in step.energy.items():
        assert epoch.energy[dev_id] > joules


def test_window_filter_and_errors(sim):
    dev = sim.latest()[0].devices[1].id
    with sim.window("one", devices=[dev]) as w:
        take(sim.stream(timeout=10), 3)
    assert [d.device_id for d in w.devices] == [dev]
    with sim.window("dup"):
        with pytest.raises(ValueError, match="window 'dup' is already open"):
            with sim.window("dup"):
                pass
    with pytest.raises(ValueError, match="no open window named 'never'"):
        sim._end_window("never")
    with pytest.raises(RuntimeError, match="has not ended"):
        sim.window("x").energy


def test_a_window_with_no_sample_inside_still_has_exact_edges(sim):
    # Nothing happens between begin and end: the edges are fresh samples of their own, so the
    # window has both edges and energy even though no periodic sample fell inside it.
    with sim.window("instant") as w:
        pass
    s = w.summary
    assert s.name == "instant"
    assert s.exact_edges
    assert s.edge_errors == []
    assert s.overhead.edge_samples >= 2 and s.overhead.failed_edge_samples == 0
    # Each edge waited for its fresh sample: what that cost is measured, never a placeholder 0.
    assert s.overhead.begin_latency_ns > 0 and s.overhead.end_latency_ns > 0
    for d in s.devices:
        assert d.begin_edge == "sampled" and d.end_edge == "sampled"
        assert d.end_edge_ns >= d.begin_edge_ns
        assert d.energy_joules is not None and d.energy_joules >= 0
        assert d.estimated_joules == 0


COVERAGE_KEYS = ("energy_method", "power_readings", "driver_power_samples", "largest_gap_ns",
                 "update_period_ns", "fresh_coverage", "shorter_than_update_period",
                 "coverage_reason", "counter_changes", "ignored_power_samples",
                 "ignored_power_samples_reason")


def test_window_says_how_its_energy_was_obtained(sim):
    # The simulated GPUs have an energy counter that moves at every sample: the counter is used,
    # nothing is integrated, and what the stream cannot tell is None, never 0.
    with sim.window("covered") as w:
        take(sim.stream(timeout=10), 5)
    s = w.summary
    for d in s.devices:
        assert d.energy_method == "counter"
        assert d.counter_changes >= 1
        assert d.power_readings == 0 and d.driver_power_samples == 0
        assert d.largest_gap_ns is None
        assert d.ignored_power_samples == 0 and d.ignored_power_samples_reason == ""
        if d.update_period_ns is None:
            # It changed at every reading: its period is below what the stream can see.
            assert d.fresh_coverage is None and d.shorter_than_update_period is None
            assert "energy counter" in d.coverage_reason
        else:
            assert d.update_period_ns > 0 and 0 <= d.fresh_coverage <= 1
            assert d.coverage_reason == ""
        assert f"by {d.energy_method}" in repr(d)
    # The same figures in the summary's dict form (its only wire form), with the edges.
    doc = s.to_dict()
    assert doc["name"] == "covered" and doc["exact_edges"] == s.exact_edges
    for d, dd in zip(s.devices, doc["devices"]):
        for key in COVERAGE_KEYS + ("begin_edge", "end_edge", "begin_edge_ns", "end_edge_ns",
                                    "estimated_joules"):
            assert dd[key] == getattr(d, key), key


def test_a_window_with_no_sample_inside_has_an_energy_method(sim):
    with sim.window("instant") as w:
        pass
    for d in w.summary.devices:
        assert d.energy_method in ("counter", "integrated", "edges")
        # Between the two edge samples nothing else was read: power (if used) has 2 readings.
        if d.energy_method != "counter":
            assert d.power_readings == 2 and d.largest_gap_ns is not None
