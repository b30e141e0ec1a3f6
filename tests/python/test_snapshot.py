"""Snapshots as Python objects: attribute access and to_dict() == the SDK's gpustream/1 JSON."""
import json

import pytest

import gpustream


def test_to_dict_is_exactly_the_sdk_json_document(sim):
    for snap in sim.latest():
        # to_json() is the SDK's text encoder (the wire form); to_dict() comes from its value
        # encoder: both must give the same document, key order included.
        doc = json.loads(snap.to_json())
        assert snap.to_dict() == doc
        assert list(snap.to_dict().keys()) == list(doc.keys())
        assert doc["schema"] == "gpustream/1"
        assert [d.to_dict() for d in snap.devices] == doc["devices"]


def test_attributes_match_the_json_document(sim):
    snap = sim.latest("simulated")[0]
    doc = snap.to_dict()
    assert snap.probe == doc["probe"] == "simulated"
    assert snap.sequence == doc["sequence"]
    assert len(snap.devices) == 2
    for dev, jdev in zip(snap.devices, doc["devices"]):
        assert dev.id == jdev["id"]
        assert dev.name == jdev["name"]
        assert dev.vendor == "simulated"
        assert snap.device(dev.id).id == dev.id
        # metrics/absent are the document's own maps; reading() adds the source
        assert dev.metrics == jdev["metrics"]
        assert dev.absent == jdev["absent"]
        for name, value in dev.metrics.items():
            assert dev.reading(name).source == jdev["sources"][name]
            assert dev[name] == value
        # absent metrics are absent, with their reason, never 0
        for name, reason in dev.absent.items():
            assert name not in dev.metrics
            r = dev.reading(name)
            assert not r and r.value is None and r.reason == reason
            with pytest.raises(KeyError, match="absent"):
                dev[name]
        assert [p.pid for p in dev.processes] == [p["pid"] for p in jdev["processes"]]
    assert snap.device("no-such-device") is None


def test_byte_counts_are_ints_as_in_the_document(sim):
    dev = sim.latest()[0].devices[0]
    assert isinstance(dev.metrics["memory_total_bytes"], int)
    assert isinstance(dev.metrics["power_watts"], float)


def test_unknown_metric_is_a_clear_value_error(sim):
    dev = sim.latest()[0].devices[0]
    with pytest.raises(ValueError, match=r"unknown metric 'power' \(known: .*power_watts"):
        dev.reading("power")


def test_metric_errors_are_key_errors_with_the_metric_and_the_reason(sim):
    dev = sim.latest()[0].devices[0]
    # An unknown name: UnknownMetricError, both a KeyError (dev[name] is a mapping) and a
    # ValueError (what reading() raised before), from dev[name] and reading() alike.
    assert issubclass(gpustream.UnknownMetricError, KeyError)
    assert issubclass(gpustream.UnknownMetricError, ValueError)
    for call in (lambda: dev["power"], lambda: dev.reading("power")):
        with pytest.raises(gpustream.UnknownMetricError, match="unknown metric 'power'") as e:
            call()
        assert e.value.metric == "power" and e.value.reason is None
    # An absent metric: AbsentMetricError, a KeyError (old code catching KeyError still works).
    assert issubclass(gpustream.AbsentMetricError, KeyError)
    name, reason = next(iter(dev.absent.items()))
    with pytest.raises(gpustream.AbsentMetricError, match=f"metric '{name}' is absent") as e:
        dev[name]
    assert (e.value.metric, e.value.reason) == (name, reason)
    assert gpustream.known_metrics()[:3] == ["utilization_percent", "memory_utilization_percent",
                                             "memory_used_bytes"]
    assert set(dev.metrics) | set(dev.absent) == set(gpustream.known_metrics())


def test_byte_counts_and_counts_are_ints_everywhere(sim):
    dev = sim.latest()[0].devices[0]
    for name in ("memory_total_bytes", "memory_used_bytes"):
        assert isinstance(dev.reading(name).value, int), name
        assert isinstance(dev.reading(name).value_or(None), int), name
        assert isinstance(dev[name], int), name
        assert isinstance(dev.metrics[name], int), name
    assert isinstance(dev.reading("power_watts").value, float)
    assert isinstance(dev["power_watts"], float)
    # Counts (ECC errors, the PCIe link's width...) too, as a document can carry them.
    doc = sim.latest()[0].to_dict()
    doc["devices"][0]["metrics"].update({"ecc_corrected_volatile": 3.0, "pcie_link_width": 16,
                                         "pcie_rx_bytes_per_second": 1000.0})
    doc["devices"][0]["sources"].update({"ecc_corrected_volatile": "nvml",
                                         "pcie_link_width": "nvml",
                                         "pcie_rx_bytes_per_second": "nvml"})
    for k in ("ecc_corrected_volatile", "pcie_link_width", "pcie_rx_bytes_per_second"):
        doc["devices"][0]["absent"].pop(k, None)
        doc["devices"][0].get("absent_sources", {}).pop(k, None)
    d = gpustream.snapshot_from_json(json.dumps(doc)).devices[0]
    assert d["ecc_corrected_volatile"] == 3 and isinstance(d["ecc_corrected_volatile"], int)
    assert isinstance(d.reading("pcie_link_width").value, int)
    assert isinstance(d["pcie_rx_bytes_per_second"], float)  # a rate stays a float


def test_snapshot_from_json_round_trip_and_errors(sim):
    snap = sim.latest()[0]
    again = gpustream.snapshot_from_json(snap.to_json())
    assert again.to_dict() == snap.to_dict()
    with pytest.raises(gpustream.JsonError, match=r"\$"):
        gpustream.snapshot_from_json('{"schema": "gpustream/1", "probe": 3}')


def test_process_slurm_job_is_an_object_or_none(sim):
    # The Slurm job of a process: a SlurmJob with the known parts, None outside Slurm, and
    # slurm_absent "unrecognized" for a cgroup with Slurm's mark in an unknown shape.
    doc = sim.latest()[0].to_dict()
    proc = {"pid": 7, "name": "train", "gpu_memory_bytes": 4096, "gpu_utilization_percent": None,
            "host_rss_bytes": None, "per_process_exact": True, "engines": []}
    job = {"job_id": "1235", "step": "batch", "uid": 1000, "user": "alice",
           "array_job_id": "1230", "array_task_id": "5"}
    doc["devices"][0]["processes"] = [dict(proc, slurm=job),
                                      dict(proc, pid=8, slurm={"job_id": "9"}),
                                      dict(proc, pid=9, slurm_absent="unrecognized"),
                                      dict(proc, pid=10)]
    snap = gpustream.snapshot_from_json(json.dumps(doc))
    procs = snap.devices[0].processes
    s = procs[0].slurm
    assert isinstance(s, gpustream.SlurmJob)
    assert (s.job_id, s.step, s.uid, s.user, s.array_job_id, s.array_task_id) == (
        "1235", "batch", 1000, "alice", "1230", "5")
    assert repr(s) == "<gpustream.SlurmJob 1235.batch>"
    assert (procs[1].slurm.job_id, procs[1].slurm.step, procs[1].slurm.uid) == ("9", "", None)
    assert procs[2].slurm is None and procs[2].slurm_absent == "unrecognized"
    assert procs[3].slurm is None and procs[3].slurm_absent is None
    back = snap.to_dict()["devices"][0]["processes"]
    assert back[0]["slurm"] == job
    assert back[1]["slurm"] == {"job_id": "9"}
    assert "slurm" not in back[3] and "slurm_absent" not in back[3]


def test_process_pod_and_device_pods_from_the_kubelet(sim):
    # The kubelet's names: Process.pod a Pod (name, namespace, container) or None with
    # pod_absent saying why; Device.pods the containers holding the device.
    doc = sim.latest()[0].to_dict()
    proc = {"pid": 7, "name": "train", "gpu_memory_bytes": 4096, "gpu_utilization_percent": None,
            "host_rss_bytes": None, "per_process_exact": True, "engines": []}
    who = {"name": "train-0", "namespace": "ml", "container": "trainer"}
    other = {"name": "infer-1", "namespace": "ml", "container": "server"}
    doc["devices"][0]["processes"] = [dict(proc, pod=who),
                                      dict(proc, pid=8, pod_absent="ambiguous"),
                                      dict(proc, pid=9)]
    doc["devices"][0]["pods"] = [who, other]
    snap = gpustream.snapshot_from_json(json.dumps(doc))
    dev = snap.devices[0]
    procs = dev.processes
    p = procs[0].pod
    assert isinstance(p, gpustream.Pod)
    assert (p.name, p.namespace, p.container) == ("train-0", "ml", "trainer")
    assert repr(p) == "<gpustream.Pod ml/train-0 trainer>"
    assert procs[0].pod_absent is None
    assert procs[1].pod is None and procs[1].pod_absent == "ambiguous"
    assert procs[2].pod is None and procs[2].pod_absent is None
    assert [(k.name, k.container) for k in dev.pods] == [("train-0", "trainer"),
                                                         ("infer-1", "server")]
    assert snap.devices[1].pods == []
    back = snap.to_dict()["devices"]
    assert back[0]["processes"][0]["pod"] == who
    assert back[0]["pods"] == [who, other]
    assert "pods" not in back[1]
    assert "pod" not in back[0]["processes"][2] and "pod_absent" not in back[0]["processes"][2]


def test_process_gtt_memory_bytes_is_known_or_none(sim):
    # AMD GTT per process: an int when the source says (0 included), None when it does not, and
    # the document carries the key only when it is known.
    doc = sim.latest()[0].to_dict()
    proc = {"pid": 7, "name": "train", "gpu_memory_bytes": 4096, "gpu_utilization_percent": None,
            "host_rss_bytes": None, "per_process_exact": True, "engines": []}
    doc["devices"][0]["processes"] = [dict(proc, gtt_memory_bytes=23068672),
                                      dict(proc, pid=8, gtt_memory_bytes=0),
                                      dict(proc, pid=9)]
    snap = gpustream.snapshot_from_json(json.dumps(doc))
    procs = snap.devices[0].processes
    assert [p.gtt_memory_bytes for p in procs] == [23068672, 0, None]
    assert isinstance(procs[0].gtt_memory_bytes, int)
    back = snap.to_dict()["devices"][0]["processes"]
    assert [p.get("gtt_memory_bytes") for p in back] == [23068672, 0, None]
    assert "gtt_memory_bytes" not in back[2]


def test_power_samples_are_monotonic_ns_watts_tuples(sim):
    # The driver's own power readings: [monotonic_ns, watts] pairs in the document, (ns, W)
    # tuples in Python, the key left out when there are none; a reader refuses a list out of
    # order or after the snapshot.
    doc = sim.latest()[0].to_dict()
    assert "power_samples" not in doc["devices"][0]
    assert sim.latest()[0].devices[0].power_samples == []
    t = doc["monotonic_ns"]
    doc["devices"][0]["power_samples"] = [[t - 40_000_000, 250.5], [t - 20_000_000, 301]]
    snap = gpustream.snapshot_from_json(json.dumps(doc))
    assert snap.devices[0].power_samples == [(t - 40_000_000, 250.5), (t - 20_000_000, 301.0)]
    assert isinstance(snap.devices[0].power_samples[0][0], int)
    assert snap.to_dict()["devices"][0]["power_samples"] == [[t - 40_000_000, 250.5],
                                                             [t - 20_000_000, 301.0]]
    assert json.loads(snap.to_json()) == snap.to_dict()
    for bad, why in (([[t - 1, 1.0], [t - 2, 1.0]], "strictly increasing"),
                     ([[t + 1, 1.0]], "after the snapshot"),
                     ([[t - 1, -1.0]], "negative"),
                     ([[t - 1]], r"\[monotonic_ns, watts\]")):
        doc["devices"][0]["power_samples"] = bad
        with pytest.raises(gpustream.JsonError, match=why):
            gpustream.snapshot_from_json(json.dumps(doc))
