"""A real nats-server on loopback, `gpustream serve --nats` publishing to it, and the
fleet_subscriber example receiving the snapshots on gpustream.<host>.<probe>; then the server
stops cleanly on SIGTERM. Exit 0 on success, 1 with a FAIL line otherwise."""
import argparse
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_helper import Server, fail, free_port, require_executable  # noqa: E402
from nats_helper import NATS_SERVER, start_nats, stop_nats  # noqa: E402


def parts_node(subject):
    return subject.split(".")[1]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--serve", required=True)
    p.add_argument("--subscriber", required=True)
    args = p.parse_args()
    require_executable(NATS_SERVER, "nats-server")
    port = free_port()
    nats = start_nats(port)
    server = None
    try:
        url = f"nats://127.0.0.1:{port}"
        # NATS does not replay: the subscriber counts the first 6 snapshots after it subscribed,
        # whenever that is (the server publishes every 0.2 s).
        sub = subprocess.Popen([args.subscriber, url, "--count", "6"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
        server = Server(args.serve, "--simulate", "2", "--probes", "simulated", "--listen",
                        "127.0.0.1:0", "--interval", "0.2", "--nats", url)
        try:
            out, err = sub.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            sub.kill()
            fail("fleet_subscriber received fewer than 6 snapshots within 60 s; server stderr:\n"
                 + "".join(server.stderr))
        if sub.returncode != 0:
            fail(f"fleet_subscriber exited with {sub.returncode}: {err}")
        lines = [l for l in out.splitlines() if l.strip()]
        print("\n".join(lines), flush=True)
        if len(lines) != 6:
            fail(f"expected 6 lines, got {len(lines)}")
        for line in lines:
            subject, node, devices, sequence = line.split()
            if node != "node=" + parts_node(subject):
                fail(f"the payload's node differs from the subject's: {line}")
            parts = subject.split(".")
            if len(parts) != 3 or parts[0] != "gpustream" or parts[2] != "simulated":
                fail(f"unexpected subject {subject}")
            if devices != "devices=2":
                fail(f"expected 2 simulated devices: {line}")
        seqs = [int(l.split()[3].split("=")[1]) for l in lines]
        if seqs != sorted(seqs) or len(set(seqs)) != len(seqs):
            fail(f"sequences not strictly increasing: {seqs}")
        if not any("publishing to NATS" in l for l in server.stderr):
            fail("serve did not say it publishes to NATS")
        server.stop()
        server = None
        print("OK", flush=True)
    finally:
        if server is not None:
            server.kill()
        stop_nats(nats)


if __name__ == "__main__":
    main()
