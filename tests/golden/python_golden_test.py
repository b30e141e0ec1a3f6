"""Golden outputs of the Python module (python/): each golden snapshot (tests/golden/data/snapshot)
read with gpustream.snapshot_from_json, then its to_json() (byte-identical to the file), its
to_dict() and the plain attributes and repr() of the snapshot and its devices, compared with
tests/golden/data/python/<name>.json. GPUSTREAM_UPDATE_GOLDEN=1 rewrites them (docs/testing.md).

Run by ctest (tests/CMakeLists.txt, golden.python_to_dict) with PYTHONPATH at the build's module.
"""
import json
import os

import pytest

import gpustream

SOURCE_DIR = os.environ.get("GPUSTREAM_SOURCE_DIR",
                            os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
DATA = os.path.join(SOURCE_DIR, "tests", "golden", "data")
NAMES = ["full", "failed", "extremes", "simulated_1", "simulated_2"]
PLAIN = (str, int, float, bool, type(None))


def plain(value):
    """`value` when it is made of plain Python values only, else None (left out)."""
    if isinstance(value, PLAIN):
        return value
    if isinstance(value, (list, tuple)) and all(isinstance(x, PLAIN) for x in value):
        return list(value)
    if isinstance(value, dict) and all(isinstance(v, PLAIN) for v in value.values()):
        return dict(value)
    return None


def attributes(obj):
    out = {}
    for name in sorted(dir(obj)):
        if name.startswith("_"):
            continue
        value = getattr(obj, name)
        if callable(value):
            continue
        p = plain(value)
        if p is not None or value is None:
            out[name] = p
        else:
            out[name] = "<" + type(value).__name__ + ">"
    return out


def typed(value):
    """JSON of `value` with each number's Python type kept visible (1 vs 1.0 is in the text)."""
    return json.dumps(value, ensure_ascii=False, sort_keys=False, indent=1)


def check(name, actual):
    path = os.path.join(DATA, "python", name + ".json")
    if os.environ.get("GPUSTREAM_UPDATE_GOLDEN") == "1":
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(actual)
        return
    assert os.path.exists(path), f"golden file missing: {path} (GPUSTREAM_UPDATE_GOLDEN=1)"
    with open(path, encoding="utf-8") as f:
        expected = f.read()
    if expected != actual:
        import difflib
        diff = "".join(list(difflib.unified_diff(expected.splitlines(True), actual.splitlines(True),
                                                 path, "actual"))[:40])
        pytest.fail(f"output differs from the golden file {path}\n{diff}")


@pytest.mark.parametrize("name", NAMES)
def test_snapshot_to_dict_and_attributes(name):
    with open(os.path.join(DATA, "snapshot", name + ".json"), encoding="utf-8") as f:
        text = f.read()
    snap = gpustream.snapshot_from_json(text)
    assert snap.to_json() == text
    doc = {
        "to_dict": snap.to_dict(),
        "attributes": attributes(snap),
        "repr": repr(snap),
        "devices": [{"to_dict_equals_snapshot_part": d.to_dict() == snap.to_dict()["devices"][i],
                     "attributes": attributes(d),
                     "repr": repr(d)} for i, d in enumerate(snap.devices)],
    }
    check(name, typed(doc) + "\n")
