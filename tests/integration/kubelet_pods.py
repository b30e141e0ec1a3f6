"""`gpustream serve --simulate 2 --kubelet-socket SOCKET` against a fake kubelet serving the real
PodResources v1 gRPC service (tests/fakes/kubelet/fake_kubelet.cpp, from the same .proto) on a
unix socket: the device the kubelet says a pod holds carries that pod in /api/v1/snapshot, the
other none; a change is seen at the next refresh; a kubelet that hangs past the deadline, then
one that is gone, are counted absences (gpustream_kubelet_errors_total{reason}), logged once,
while the server keeps publishing and answering. Exit 0 on success, 1 with a FAIL line."""
import argparse
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_helper import Proc, Server, fail, http_get, http_ok, prom_value  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--serve", required=True)
    p.add_argument("--fake-kubelet", required=True)
    args = p.parse_args()
    folder = tempfile.mkdtemp(prefix="gpustream-kubelet-")
    socket_path = os.path.join(folder, "kubelet.sock")
    pods_file = os.path.join(folder, "pods")

    def write_pods(text):
        tmp = pods_file + ".new"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, pods_file)

    write_pods("")
    kubelet = Proc([args.fake_kubelet, socket_path, pods_file])
    kubelet.wait_line("the fake kubelet listening", "listening")
    server = Server(args.serve, "--simulate", "2", "--listen", "127.0.0.1:0", "--interval", "0.2",
                    "--kubelet-socket", socket_path, "--kubelet-refresh", "0.2")
    try:
        def devices():
            snaps = server.get_json("/api/v1/snapshot")["snapshots"]
            return [d for s in snaps for d in s["devices"]]

        ids = server.wait_until("two simulated devices", lambda: [d["id"] for d in devices()]
                                if len(devices()) == 2 else None)
        train = {"name": "train-0", "namespace": "ml", "container": "trainer"}
        write_pods(f"nvidia.com/gpu {ids[0]}::0 ml train-0 trainer\n"
                   f"nvidia.com/gpu {ids[0]}::1 ml train-0 trainer\n"
                   "example.com/nic eth1 default web nginx\n")

        def pods_of():
            return {d["id"]: d.get("pods", []) for d in devices()}

        server.wait_until("the kubelet's pod on the first device",
                          lambda: pods_of()[ids[0]] == [train])
        if pods_of()[ids[1]] != []:
            fail(f"the second device is held by nobody, got {pods_of()[ids[1]]}")
        metrics = http_ok(server.http, "/metrics")
        if prom_value(metrics, "gpustream_kubelet_up") != 1:
            fail("gpustream_kubelet_up is not 1:\n" + metrics)
        if prom_value(metrics, "gpustream_kubelet_gpus_held") != 1:
            fail("gpustream_kubelet_gpus_held is not 1")
        stats = server.get_json("/api/v1/stats")
        if not stats.get("kubelet", {}).get("up"):
            fail(f"/api/v1/stats has no kubelet up: {stats.get('kubelet')}")

        # A change: another pod holds the GPU.
        evaluator = {"name": "eval-3", "namespace": "ml", "container": "evaluator"}
        write_pods(f"nvidia.com/gpu {ids[0]} ml eval-3 evaluator\n")
        server.wait_until("the new holder", lambda: pods_of()[ids[0]] == [evaluator])

        # A kubelet that hangs: the 2 s deadline, the pods dropped, the server unaffected.
        write_pods("hang\n")
        seq0 = max(s["sequence"] for s in server.get_json("/api/v1/snapshot")["snapshots"])
        started = time.monotonic()
        while time.monotonic() - started < 1.0:  # while the List hangs: answers stay fast
            t = time.monotonic()
            status, body = http_get(server.http, "/healthz")
            if status != 200 or time.monotonic() - t > 1.0:
                fail(f"/healthz while the kubelet hung: HTTP {status} after "
                     f"{time.monotonic() - t:.2f} s: {body}")
            time.sleep(0.1)
        server.wait_until("a deadline error", lambda: (prom_value(
            http_ok(server.http, "/metrics"),
            'gpustream_kubelet_errors_total{reason="deadline"}') or 0) >= 1)
        server.wait_until("the pods dropped", lambda: pods_of()[ids[0]] == [])
        seq1 = max(s["sequence"] for s in server.get_json("/api/v1/snapshot")["snapshots"])
        if seq1 <= seq0:
            fail("no snapshot was published while the kubelet hung")

        # Gone: the socket removed; counted, retried, logged once per reason.
        kubelet.stop()
        if os.path.exists(socket_path):
            os.unlink(socket_path)
        server.wait_until("a socket_missing error", lambda: (prom_value(
            http_ok(server.http, "/metrics"),
            'gpustream_kubelet_errors_total{reason="socket_missing"}') or 0) >= 2)
        for reason in ("deadline", "socket_missing"):
            lines = server.lines_with(f"kubelet: no pod names ({reason}")
            if len(lines) != 1:
                fail(f"{len(lines)} log lines for {reason}, expected 1:\n" + "".join(server.stderr))
        server.stop()
    finally:
        server.kill()
        kubelet.stop()
        subprocess.run(["rm", "-rf", folder], check=False)
    print("PASS")


if __name__ == "__main__":
    main()
