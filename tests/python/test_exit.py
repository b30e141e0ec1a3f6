"""Interpreter exit with live objects (no stop(), no __exit__) must not hang nor crash.

Each case runs a fresh /usr/bin/python3 (sys.executable under ctest); the subprocess timeout is
the bound: a hang fails the test by timing out, it is not a measure of speed.
"""
import os
import subprocess
import sys

import pytest

PRELUDE = """
import threading, gpustream
t = gpustream.Telemetry(probes=["simulated"], simulate=2, interval=0.01)
t.start()
assert t.wait_for_first_samples(10)
"""

CASES = {
    "live_telemetry": "",
    "live_subscription": """
got = threading.Event()
sub = t.subscribe(lambda s: got.set())
assert got.wait(10)
""",
    "callback_running_at_exit": """
entered = threading.Event()
def cb(s):
    entered.set()
    sum(range(200000))  # Python work holding the GIL while the main thread exits
subs = [t.subscribe(cb, policy="lossless", capacity=1000) for _ in range(4)]
assert entered.wait(10)
""",
    "stream_on_a_daemon_thread": """
started = threading.Event()
def consume():
    for s in t.stream():
        started.set()
threading.Thread(target=consume, daemon=True).start()
assert started.wait(10)
""",
    "open_window": """
w = t.window("never-closed")
w.__enter__()
""",
    "stopped_from_a_callback": """
done = threading.Event()
def cb(s):
    t.stop()
    done.set()
sub = t.subscribe(cb)
assert done.wait(10)
""",
    "telemetry_in_a_cycle": """
class Holder: pass
h = Holder(); h.t = t; h.me = h; h.sub = t.subscribe(lambda s: h)
del t, h
""",
    "connect_retrying": """
import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
c = gpustream.connect(f"tcp://127.0.0.1:{port}")
sub = c.subscribe(lambda s: None)
""",
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_interpreter_exit_with_live_objects(case):
    code = PRELUDE + CASES[case] + "\nprint('end of script', flush=True)\n"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, env=os.environ.copy())
    assert proc.returncode == 0, f"exit code {proc.returncode}\nstderr:\n{proc.stderr}"
    assert "end of script" in proc.stdout
