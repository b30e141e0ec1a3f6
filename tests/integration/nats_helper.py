"""A real nats-server on loopback for the integration tests (standard library only)."""
import os
import socket
import subprocess
import time

from serve_helper import fail, free_port

NATS_SERVER = "/usr/sbin/nats-server"


def wait_for_port(port, proc, timeout=20.0):
    """Returns once 127.0.0.1:port accepts a connection; FAIL when `proc` exits first or after
    `timeout` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            fail(f"nats-server exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.05)
    fail(f"nats-server did not accept connections within {timeout:g} s")


def start_nats(port, store=None, monitor=None):
    """nats-server on 127.0.0.1:port (JetStream in `store` when given, the monitoring port when
    given), once it accepts connections."""
    args = [NATS_SERVER, "-a", "127.0.0.1", "-p", str(port)]
    if store is not None:
        args += ["-js", "-sd", store]
    if monitor is not None:
        args += ["-m", str(monitor)]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for_port(port, proc)
    return proc


def start_nats_config(folder, name, body, port=None):
    """nats-server with the configuration `body` (written to folder/name.conf, listening on
    127.0.0.1:port, a free port when None); returns (process, port)."""
    port = port or free_port()
    conf = os.path.join(folder, f"{name}.conf")
    with open(conf, "w") as f:
        f.write(f"listen: 127.0.0.1:{port}\n{body}\n")
    proc = subprocess.Popen([NATS_SERVER, "-c", conf], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    wait_for_port(port, proc)
    return proc, port


def stop_nats(proc):
    if proc.poll() is None:
        proc.kill()
    proc.wait()
