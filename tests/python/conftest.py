"""Shared fixtures of the Python module's tests (run by ctest: tests/python/CMakeLists.txt).

Waiting is driven by the snapshots themselves (iterating a stream with a timeout as the bound),
never by sleeping; a bound that runs out fails the test with a message.
"""
import os
import sys

import pytest

import gpustream

SOURCE_DIR = os.environ.get("GPUSTREAM_SOURCE_DIR",
                            os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
sys.path.insert(0, os.path.join(SOURCE_DIR, "tests", "integration"))


def env_path(name):
    """A path ctest passes (tests/python/CMakeLists.txt); fails clearly when it is not built."""
    value = os.environ.get(name)
    if not value:
        pytest.fail(f"{name} is not set: run these tests through ctest (tests/python)")
    if not os.path.exists(value):
        pytest.fail(f"{name}={value} does not exist: build it first (cmake --build build)")
    return value


def take(iterable, n):
    """The first n items of an iterator (a stream with a timeout bounds the wait)."""
    out = []
    for item in iterable:
        out.append(item)
        if len(out) == n:
            break
    return out


def wait_for(telemetry, predicate, what, snapshots=200, timeout=10.0):
    """Consumes up to `snapshots` snapshots of `telemetry` until predicate() is true."""
    if predicate():
        return
    with telemetry.stream(timeout=timeout) as stream:
        for i, _ in enumerate(stream):
            if predicate():
                return
            if i >= snapshots:
                break
    assert predicate(), f"timed out waiting for {what}"


@pytest.fixture
def sim():
    """A running Telemetry with two simulated GPUs sampled every 20 ms."""
    with gpustream.Telemetry(probes=["simulated"], simulate=2, interval=0.02) as t:
        assert t.wait_for_first_samples(10), "the simulated probe published nothing"
        yield t
