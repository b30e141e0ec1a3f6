"""TLS on the real `gpustream serve --tls-cert --tls-key` (issue #28), with third-party clients
and the project's own: `openssl s_client` on both listeners (TLS 1.2+ only: TLS 1.1 refused),
`curl --cacert` on /metrics (and refused without the CA), a plaintext curl and a plaintext TCP
client told to use TLS (counted, closed), `gpustream watch --connect wss:// and tls:// --ca`
(a wrong CA refused in OpenSSL's words), mutual TLS with `--tls-client-ca` (curl without a
client certificate refused, with one accepted), a mismatched key refused at start, and SIGHUP
reloading the certificate for new connections; python3-websockets over wss:// with a clean
close. Exit 0 on success, 1 with a FAIL line."""
import asyncio
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_helper import Server, fail, parse_args, prom_value  # noqa: E402
from tls_pki import Pki  # noqa: E402


def s_client(address, ca, request, *extra, stream_seconds=None):
    """openssl s_client; with stream_seconds, what it printed in that time (a stream that does
    not end: rc None)."""
    host, port = address.rsplit(":", 1)
    try:
        r = subprocess.run(["openssl", "s_client", "-connect", f"{host}:{port}", "-CAfile", ca,
                            "-verify_return_error", "-servername", "localhost", "-ign_eof",
                            *extra], input=request, capture_output=True, text=True,
                           timeout=stream_seconds or 30)
    except subprocess.TimeoutExpired as e:
        if stream_seconds is None:
            raise
        def text(b):
            return b.decode() if isinstance(b, bytes) else (b or "")
        return None, text(e.stdout) + text(e.stderr)
    return r.returncode, r.stdout + r.stderr


def curl(url, *args):
    r = subprocess.run(["curl", "-sS", "--max-time", "10", *args, url], capture_output=True,
                       text=True, timeout=30)
    return r.returncode, r.stdout, r.stderr


def watch(gpustream, url, *args):
    r = subprocess.run([gpustream, "watch", "--json", *args, "--connect", url],
                       capture_output=True, text=True, timeout=60)
    return r.returncode, r.stdout, r.stderr


async def websocket_client(url, ca):
    import websockets  # Debian python3-websockets
    context = ssl.create_default_context(cafile=ca)
    async with websockets.connect(url, ssl=context, open_timeout=10) as ws:
        hello = json.loads(await asyncio.wait_for(ws.recv(), 10))
        if hello.get("type") != "hello":
            return f"first message {hello}"
        while True:
            m = json.loads(await asyncio.wait_for(ws.recv(), 10))
            if m.get("type") == "snapshot":
                break
        await ws.close()
        if ws.close_code != 1000:
            return f"close code {ws.close_code}"
    return "ok"


def main():
    args = parse_args()
    for tool in ("openssl", "curl"):
        if not shutil.which(tool):
            fail(f"{tool} is missing: install the Debian package '{tool}'")
    gpustream = args.serve.split()[0]
    d = tempfile.mkdtemp(prefix="gpustream-tls-")
    pki = Pki(d)
    ca = pki.ca("ca")
    cert, key = pki.leaf(ca, "server", "IP:127.0.0.1,DNS:localhost")
    other_ca = pki.ca("other-ca")
    # The files the server reads (replaced for the SIGHUP reload below).
    live_cert, live_key = os.path.join(d, "live.crt"), os.path.join(d, "live.key")
    shutil.copy(cert, live_cert)
    shutil.copy(key, live_key)

    server = Server(args.serve, "--simulate", "1", "--probes", "simulated", "--interval", "0.1",
                    "--listen", "127.0.0.1:0", "--tcp", "127.0.0.1:0",
                    "--tls-cert", live_cert, "--tls-key", live_key)
    try:
        server.wait_for_line(f"at https://{server.http}/")
        server.wait_for_line(f"WebSocket stream at wss://{server.http}/ws")
        server.wait_for_line(f"TCP stream at tls://{server.tcp}")

        # openssl s_client on the HTTP listener: verified, TLS 1.3, /healthz answers.
        rc, out = s_client(server.http, ca[0],
                           f"GET /healthz HTTP/1.1\r\nHost: {server.http}\r\n"
                           "Connection: close\r\n\r\n")
        if rc != 0 or "Verify return code: 0 (ok)" not in out or "HTTP/1.1 200" not in out:
            fail(f"s_client on the HTTP listener (rc {rc}):\n{out}")
        if "TLSv1.3" not in out:
            fail(f"s_client did not negotiate TLS 1.3:\n{out}")
        print("ok: openssl s_client https: verified, TLS 1.3, /healthz 200", flush=True)
        # ... and on the TCP listener: the hello line comes over TLS.
        rc, out = s_client(server.tcp, ca[0], "", stream_seconds=2)
        if "Verify return code: 0 (ok)" not in out or '"type":"hello"' not in out:
            fail(f"s_client on the TCP listener (rc {rc}):\n{out}")
        print("ok: openssl s_client on the TCP listener: hello over TLS", flush=True)
        # TLS 1.1 is refused by the server (the client is allowed to offer it).
        rc, out = s_client(server.http, ca[0], "", "-tls1_1", "-cipher", "DEFAULT@SECLEVEL=0")
        if rc == 0 and "Verify return code: 0 (ok)" in out and "TLSv1.1" in out:
            fail(f"a TLS 1.1 handshake succeeded:\n{out}")
        print("ok: TLS 1.1 refused", flush=True)

        # curl with the CA; without it curl refuses the certificate (exit 60).
        rc, body, err = curl(f"https://{server.http}/metrics", "--cacert", ca[0])
        if rc != 0 or prom_value(body, "gpustream_tls_handshakes_total") is None:
            fail(f"curl --cacert https:///metrics: rc {rc} {err}\n{body[:500]}")
        rc, _, err = curl(f"https://{server.http}/metrics")
        if rc != 60:
            fail(f"curl without the CA: rc {rc} (expected 60: certificate refused) {err}")
        rc, _, err = curl(f"https://localhost:{server.http.rsplit(':', 1)[1]}/healthz",
                          "--cacert", ca[0])
        if rc != 0:
            fail(f"curl https://localhost (a name in the certificate): rc {rc} {err}")
        print("ok: curl --cacert (by address and by name); refused without the CA", flush=True)

        # A plaintext curl is told to use https:// and closed; a plaintext TCP client too.
        rc, body, err = curl(f"http://{server.http}/metrics", "-i")
        if "400 Bad Request" not in body or "This port speaks TLS: use https://" not in body:
            fail(f"plaintext curl: rc {rc} {err}\n{body}")
        host, port = server.tcp.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=10) as s:
            s.sendall(b'{"type":"subscribe"}\n')
            got = b""
            while True:
                chunk = s.recv(4096)
                if not chunk:
                    break
                got += chunk
        if b"this port speaks TLS: connect with tls://HOST:PORT" not in got:
            fail(f"plaintext TCP client got {got!r}")
        rc, body, err = curl(f"https://{server.http}/metrics", "--cacert", ca[0])
        plain = prom_value(body, 'gpustream_tls_handshake_failures_total{reason="plaintext"}')
        if plain != 2:
            fail(f"plaintext failures counted: {plain} (expected 2)")
        old_protocol = prom_value(body, 'gpustream_tls_handshake_failures_total{reason="protocol"}')
        if old_protocol != 1:
            fail(f"the TLS 1.1 attempt counted as protocol failures: {old_protocol} (expected 1)")
        rc, body, err = curl(f"https://{server.http}/api/v1/stats", "--cacert", ca[0])
        tls_stats = json.loads(body)["server"]["tls"]
        if tls_stats["handshake_failures"]["plaintext"] != 2 or tls_stats["handshakes"] < 3:
            fail(f"/api/v1/stats server.tls: {tls_stats}")
        if sum("spoke plaintext" in line for line in server.stderr) != 2:  # once per listener
            fail("the plaintext clients were not logged once per listener:\n" +
                 "".join(server.stderr))
        print("ok: plaintext HTTP and TCP clients told to use TLS, counted, logged once",
              flush=True)

        # The project's own client: watch --connect wss:// and tls:// with --ca.
        for url in (f"wss://{server.http}/ws", f"tls://{server.tcp}"):
            rc, out, err = watch(gpustream, url, "--count", "2", "--ca", ca[0])
            if rc != 0 or len(out.splitlines()) != 2:
                fail(f"watch --connect {url}: rc {rc}\n{err}")
        rc, out, err = watch(gpustream, f"wss://{server.http}/ws", "--duration", "1.5",
                             "--ca", other_ca[0])
        if rc == 0 or "unable to get local issuer certificate" not in err:
            fail(f"watch with the wrong CA: rc {rc}\n{err}")
        print("ok: watch --connect wss:// and tls:// --ca; a wrong CA named", flush=True)

        # A third-party WebSocket client (python3-websockets) over wss:// with the CA: hello, a
        # snapshot, and a clean close handshake (close frames and close_notify both ways).
        rc = asyncio.run(websocket_client(f"wss://{server.http}/ws", ca[0]))
        if rc != "ok":
            fail(f"python3-websockets over wss://: {rc}")
        print("ok: python3-websockets over wss://: hello, a snapshot, a clean close", flush=True)

        # SIGHUP: a certificate from another CA for new connections.
        cert2, key2 = pki.leaf(other_ca, "server2", "IP:127.0.0.1")
        shutil.copy(cert2, live_cert + ".tmp")
        shutil.copy(key2, live_key + ".tmp")
        os.replace(live_key + ".tmp", live_key)
        os.replace(live_cert + ".tmp", live_cert)
        server.proc.send_signal(signal.SIGHUP)
        server.wait_for_line("the TLS certificate and key were reloaded")
        rc, _, err = curl(f"https://{server.http}/healthz", "--cacert", other_ca[0])
        if rc != 0:
            fail(f"after the reload, curl with the new CA: rc {rc} {err}")
        rc, _, _ = curl(f"https://{server.http}/healthz", "--cacert", ca[0])
        if rc != 60:
            fail(f"after the reload, the old CA still verifies: rc {rc}")
        # A broken key on reload keeps the running certificate.
        with open(live_key, "w") as f:
            f.write("not a key\n")
        server.proc.send_signal(signal.SIGHUP)
        server.wait_for_line("cannot reload TLS")
        rc, _, err = curl(f"https://{server.http}/healthz", "--cacert", other_ca[0])
        if rc != 0:
            fail(f"after a failed reload: rc {rc} {err}")
        print("ok: SIGHUP reloads the certificate; a broken one keeps the old", flush=True)
    finally:
        server.stop()

    # Mutual TLS.
    clients_ca = pki.ca("clients-ca")
    node_cert, node_key = pki.leaf(clients_ca, "node1")
    rogue_cert, rogue_key = pki.leaf(other_ca, "rogue")
    server = Server(args.serve, "--simulate", "1", "--probes", "simulated", "--interval", "0.1",
                    "--listen", "127.0.0.1:0", "--tls-cert", cert, "--tls-key", key,
                    "--tls-client-ca", clients_ca[0])
    try:
        url = f"https://{server.http}/healthz"
        rc, _, err = curl(url, "--cacert", ca[0])
        if rc == 0:
            fail("mutual TLS: a client without a certificate was admitted")
        rc, _, err = curl(url, "--cacert", ca[0], "--cert", rogue_cert, "--key", rogue_key)
        if rc == 0:
            fail("mutual TLS: a certificate from another CA was admitted")
        rc, body, err = curl(url, "--cacert", ca[0], "--cert", node_cert, "--key", node_key)
        if rc != 0:
            fail(f"mutual TLS: the client certificate was refused: rc {rc} {err}")
        rc, out, err = watch(gpustream, f"wss://{server.http}/ws", "--count", "1", "--ca", ca[0],
                             "--cert", node_cert, "--key", node_key)
        if rc != 0:
            fail(f"mutual TLS: watch --cert: rc {rc}\n{err}")
        rc, body, _ = curl(f"https://{server.http}/metrics", "--cacert", ca[0], "--cert",
                           node_cert, "--key", node_key)
        refused = prom_value(body,
                         'gpustream_tls_handshake_failures_total{reason="client_certificate"}')
        if not refused or refused < 2:
            fail(f"mutual TLS refusals counted: {refused}")
        print("ok: mutual TLS: no certificate and a foreign one refused (counted); node1 in",
              flush=True)
    finally:
        server.stop()

    # A key that does not belong to the certificate: refused at start, naming both files.
    r = subprocess.run(args.serve.split() + ["--simulate", "1", "--listen", "127.0.0.1:0",
                                             "--tls-cert", cert, "--tls-key", key2],
                       capture_output=True, text=True, timeout=30)
    if r.returncode == 0 or f"{key2} does not belong to the certificate in {cert}" not in r.stderr:
        fail(f"a mismatched key: rc {r.returncode}\n{r.stderr}")
    print("ok: a mismatched key is refused at start", flush=True)
    shutil.rmtree(d, ignore_errors=True)
    print("PASS", flush=True)


if __name__ == "__main__":
    main()
