"""The library's log lines in Python: set_log_level(), set_log_handler(), log_to_logging().

The line used is the scheduler's warning for an interval below a probe's minimum (the host
probe's is 100 ms), logged when the probe is found available. Each case runs in a fresh
interpreter: the library may warn once per process."""
import os
import subprocess
import sys

import pytest

import gpustream

FAST_HOST = ("import logging, threading\n"
             "import gpustream\n"
             "{setup}\n"
             "with gpustream.Telemetry(probes=['host'], interval=0.01) as t:\n"
             "    assert t.wait_for_first_samples(10)\n"
             "{after}\n")
LINE = "probe host: interval 10 ms is below the source's minimum of 100 ms"


def run(setup="", after=""):
    """(stdout, stderr) of a fresh interpreter sampling the host probe too fast."""
    proc = subprocess.run([sys.executable, "-c", FAST_HOST.format(setup=setup, after=after)],
                          capture_output=True, text=True, timeout=60, env=os.environ.copy())
    assert proc.returncode == 0, proc.stderr
    return proc.stdout, proc.stderr


def test_set_log_level_silences_the_stderr_warnings():
    assert LINE in run()[1]  # the default: warnings on stderr
    assert run("gpustream.set_log_level('off')") == ("", "")
    assert run("gpustream.set_log_level('error')") == ("", "")


def test_log_level_round_trip_and_errors():
    assert gpustream.log_level() == "warn"
    try:
        gpustream.set_log_level("error")
        assert gpustream.log_level() == "error"
    finally:
        gpustream.set_log_level("warn")
    with pytest.raises(ValueError, match="level must be 'trace'"):
        gpustream.set_log_level("loud")
    with pytest.raises(TypeError, match="handler must be None or callable"):
        gpustream.set_log_handler(3)


def test_a_handler_gets_the_lines_instead_of_stderr():
    # Delivered on a thread of the module (never the one that logged, never the caller's);
    # set_log_handler(None) delivers what is queued first.
    setup = ("main = threading.get_ident()\n"
             "def handler(level, message):\n"
             "    print(level, threading.get_ident() != main, message)\n"
             "gpustream.set_log_handler(handler)")
    out, err = run(setup, "gpustream.set_log_handler(None)")
    assert err == ""
    assert f"warn True {LINE}" in out.splitlines()[0]


def test_log_to_logging():
    setup = ("logging.basicConfig(format='%(name)s %(levelname)s %(message)s')\n"
             "gpustream.log_to_logging()")
    out, err = run(setup, "gpustream.set_log_handler(None)")
    assert f"gpustream WARNING {LINE}" in err.splitlines()[0], err


def test_a_handler_left_installed_at_exit_is_stopped_by_the_atexit_hook():
    out, err = run("gpustream.set_log_handler(lambda level, message: print(level, message))")
    assert err == "" and LINE in out
