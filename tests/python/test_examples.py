"""examples/python: each example runs on the simulated probe and says what it promises."""
import os
import subprocess
import sys

from conftest import SOURCE_DIR

EXAMPLES = os.path.join(SOURCE_DIR, "examples", "python")


def run(name, *args):
    proc = subprocess.run([sys.executable, os.path.join(EXAMPLES, name), *args],
                          capture_output=True, text=True, timeout=120, env=os.environ.copy())
    assert proc.returncode == 0, f"{name} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def test_planner_picks_a_device_and_reacts():
    out = run("planner.py", "--simulate", "2", "--bytes", str(1 << 30), "--changes", "3")
    assert "fits on" in out
    assert out.count("update:") == 3


def test_sampling_loop_reports_energy_and_peak_memory_per_step():
    out = run("sampling_loop.py", "--simulate", "2", "--steps", "3")
    steps = [line for line in out.splitlines() if line.startswith("step ")]
    assert len(steps) == 3 * 2, out  # one line per step and device
    for line in steps:
        assert " J" in line and "peak" in line


def test_python_bench_runs():
    """bench/python_bench.py in its tiny mode: it must not rot (figures: docs/benchmarks.md)."""
    proc = subprocess.run([sys.executable, os.path.join(SOURCE_DIR, "bench", "python_bench.py"),
                           "--quick"], capture_output=True, text=True, timeout=120,
                          env=os.environ.copy())
    assert proc.returncode == 0, proc.stderr
    assert "x CPU" in proc.stdout
