"""gpustream.connect() against a real `gpustream serve` on a loopback port."""
import pytest

import gpustream
from conftest import env_path, take


@pytest.fixture(scope="module")
def server():
    from serve_helper import Server  # tests/integration/serve_helper.py
    s = Server(env_path("GPUSTREAM_CLI") + " serve", "--simulate", "2", "--interval", "0.05",
               "--listen", "127.0.0.1:0", "--tcp", "127.0.0.1:0")
    yield s
    s.stop()


@pytest.mark.parametrize("scheme", ["ws", "tcp"])
def test_connect_streams_and_subscribes(server, scheme):
    address = server.http if scheme == "ws" else server.tcp
    with gpustream.connect(f"{scheme}://{address}") as remote:
        assert remote.wait_connected(10), remote.status
        snaps = take(remote.stream(probes="simulated", timeout=10), 3)
        assert len(snaps) == 3
        assert all(s.probe == "simulated" and len(s.devices) == 2 for s in snaps)
        assert snaps[0].to_dict()["schema"] == "gpustream/1"
        got = []
        with remote.subscribe(got.append, policy="latest", probes=["simulated"]):
            take(remote.stream(probes="simulated", timeout=10), 3)
        assert got and all(s.probe == "simulated" for s in got)
        assert "simulated" in [s.probe for s in remote.latest()]
        assert remote.status["state"] == "connected"
    assert remote.closed
    with pytest.raises(RuntimeError, match="stopped"):
        remote.stream()


def test_stream_ends_when_the_client_closes(server):
    remote = gpustream.connect(f"ws://{server.http}", probes=["simulated"])
    stream = remote.stream(timeout=10)
    assert take(stream, 1)
    remote.close()
    assert take(stream, 1) == []


def test_bad_url_is_a_value_error():
    with pytest.raises(ValueError, match="http"):
        gpustream.connect("http://127.0.0.1:1")


def test_nothing_listening_is_reported_in_the_status():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    with gpustream.connect(f"tcp://127.0.0.1:{port}") as remote:
        assert not remote.wait_connected(0.5)
        assert remote.status["state"] in ("connecting", "disconnected")


def test_token(tmp_path):
    from serve_helper import Server
    token = tmp_path / "token"
    token.write_text("s3cret-token-for-the-python-test\n")
    token.chmod(0o600)
    s = Server(env_path("GPUSTREAM_CLI") + " serve", "--simulate", "1", "--interval", "0.05",
               "--listen", "127.0.0.1:0", "--token", str(token))
    try:
        with gpustream.connect(f"ws://{s.http}", token="wrong") as remote:
            assert not remote.wait_connected(2)
            assert remote.status["connections"] == 0
        with gpustream.connect(f"ws://{s.http}",
                               token="s3cret-token-for-the-python-test") as remote:
            assert remote.wait_connected(10), remote.status
            assert take(remote.stream(probes="simulated", timeout=10), 1)
    finally:
        s.stop()


@pytest.mark.parametrize("scheme", ["ws", "tcp"])
def test_fit_asks_the_server(server, scheme):
    address = server.http if scheme == "ws" else server.tcp
    with gpustream.connect(f"{scheme}://{address}") as remote:
        assert remote.wait_connected(10), remote.status
        take(remote.stream(timeout=10), 1)  # the server has sampled its devices
        fits = remote.fits(0)  # the same DeviceFit objects as Telemetry.fits()
        assert len(fits) == 2 and all(isinstance(f, gpustream.DeviceFit) for f in fits)
        first = fits[0]
        assert first.node == "" and first.free_bytes > 0 and first.device_id.startswith("sim-")
        assert first.source in ("simulated", "derived")
        assert remote.fits(2**64 - 1) == []
        assert remote.best_device(0).device_id == first.device_id
        assert len(remote.fits(0, limit=1)) == 1
        with pytest.raises(ValueError, match="limit"):
            remote.fits(0, limit=0)
        for bad in (-1, 2**64):
            with pytest.raises(ValueError, match="bytes"):
                remote.fits(bad)
        with pytest.deprecated_call():  # the old dict answer
            answer = remote.fit(0)
        assert answer["bytes"] == 0 and answer["total"] == 2 and not answer["truncated"]
        assert answer["fits"][0]["device"] == answer["fits"][0]["device_id"] == first.device_id
    with pytest.raises(RuntimeError, match="not connected"):
        remote.fits(0)


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory):
    """`gpustream serve` with TLS on both listeners, its CA and another CA."""
    from serve_helper import Server
    from tls_pki import Pki  # tests/integration/tls_pki.py: openssl at test time
    pki = Pki(str(tmp_path_factory.mktemp("pki")))
    ca = pki.ca("ca")
    cert, key = pki.leaf(ca, "server", "IP:127.0.0.1,DNS:localhost")
    other = pki.ca("other")
    s = Server(env_path("GPUSTREAM_CLI") + " serve", "--simulate", "1", "--interval", "0.05",
               "--listen", "127.0.0.1:0", "--tcp", "127.0.0.1:0", "--tls-cert", cert,
               "--tls-key", key)
    yield s, ca[0], other[0]
    s.stop()


@pytest.mark.parametrize("scheme", ["wss", "tls"])
def test_connect_over_tls_with_a_ca_file(tls_server, scheme):
    server, ca, _ = tls_server
    address = server.http if scheme == "wss" else server.tcp
    with gpustream.connect(f"{scheme}://{address}", ca=ca) as remote:
        assert remote.wait_connected(10), remote.status
        assert take(remote.stream(timeout=10), 2)


def test_connect_over_tls_with_the_wrong_ca_names_the_verification_failure(tls_server):
    server, _, other = tls_server
    with gpustream.connect(f"wss://{server.http}/ws", ca=other) as remote:
        reasons = []
        for _ in range(50):  # each wait is bounded; the status flips between attempts
            assert not remote.wait_connected(0.2)
            reasons.append(remote.status.get("reason", ""))
            if "unable to get local issuer certificate" in reasons[-1]:
                break
        assert "certificate verify failed: unable to get local issuer certificate" in reasons[-1], \
            reasons


def test_an_unreadable_ca_file_is_a_value_error(tls_server):
    server, _, _ = tls_server
    with pytest.raises(ValueError, match="CA file /nonexistent/ca.pem"):
        gpustream.connect(f"wss://{server.http}/ws", ca="/nonexistent/ca.pem")
