"""NATS credentials end to end against a real nats-server (loopback, a config file written here):
agents (`gpustream serve --listen off --nats URL`) and `gpustream fleet` with a user and its
password file, an nkey user (seed and public key made here from an OpenSSL ed25519 key), a token
file over TLS with a CA made here by `openssl`, mutual TLS (a client certificate), and an
operator-mode server (a memory resolver) with .creds files whose JWTs are signed here with
OpenSSL. Asserts: the right credentials → the agent publishes and the fleet shows its node; a
wrong password or an unknown account → both log NATS's own "Authorization Violation" (the agent
keeps running, the fleet exits 1, neither crashes); a server certificate from an unknown CA →
both log "unable to get local issuer certificate"; no secret in /proc/PID/cmdline nor in any log
line; a missing credential file → exit 2 naming the flag and the file.
Exit 0 on success, 1 with a FAIL line otherwise."""
import argparse
import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_helper import Proc, fail, fleet_states, require_executable, write_secret  # noqa: E402
from nats_helper import NATS_SERVER  # noqa: E402
from nats_helper import start_nats_config as start_nats  # noqa: E402

OPENSSL = "/usr/bin/openssl"
PASSWORD = "pw-Secret-4f9a2c7e"  # never on a command line nor in a log
FLEET_PASSWORD = "pw-Fleet-81d3e0b5"
TOKEN = "tok-Secret-77c1a9d2"
SECRETS = (PASSWORD, FLEET_PASSWORD, TOKEN)


def crc16(data):
    """CRC-16/XMODEM, the nkey checksum."""
    crc = 0
    for b in data:
        crc ^= b << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc


def nkey_encode(raw):
    raw = raw + crc16(raw).to_bytes(2, "little")
    return base64.b32encode(raw).decode().rstrip("=")


def make_nkey(folder, name, prefix):
    """An nkey from an OpenSSL ed25519 key: (its PEM file, seed 'S...', public key)."""
    pem = os.path.join(folder, f"{name}.pem")
    subprocess.run([OPENSSL, "genpkey", "-algorithm", "ed25519", "-out", pem], check=True,
                   capture_output=True)
    private = subprocess.run([OPENSSL, "pkey", "-in", pem, "-outform", "DER"], check=True,
                             capture_output=True).stdout[-32:]
    public = subprocess.run([OPENSSL, "pkey", "-in", pem, "-pubout", "-outform", "DER"],
                            check=True, capture_output=True).stdout[-32:]
    seed_prefix = 18 << 3
    seed = nkey_encode(bytes([seed_prefix | (prefix >> 5), (prefix & 31) << 3]) + private)
    return pem, seed, nkey_encode(bytes([prefix]) + public)


OPERATOR, ACCOUNT, USER = 14 << 3, 0, 20 << 3  # the nkey prefixes: 'O', 'A', 'U'


def make_user_nkey(folder):
    """An nkey user: (seed 'SU...', public key 'U...')."""
    _, seed, public = make_nkey(folder, "nkey-user", USER)
    return seed, public


def b64url(data):
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def make_jwt(signer_pem, issuer, subject, name, nats):
    """A NATS JWT (v2) signed with `signer_pem` (ed25519 over 'header.claims')."""
    claims = {"iat": int(time.time()), "iss": issuer, "name": name, "sub": subject, "nats": nats}
    digest = hashlib.sha256(json.dumps(claims, sort_keys=True).encode()).digest()
    claims["jti"] = base64.b32encode(digest).decode().rstrip("=")
    signed = (b64url(json.dumps({"typ": "JWT", "alg": "ed25519-nkey"}).encode()) + "."
              + b64url(json.dumps(claims).encode()))
    message = signer_pem + ".msg"
    with open(message, "w") as f:
        f.write(signed)
    signature = subprocess.run([OPENSSL, "pkeyutl", "-sign", "-inkey", signer_pem, "-rawin",
                                "-in", message], check=True, capture_output=True).stdout
    return signed + "." + b64url(signature)


def make_operator(folder):
    """An operator and one account with a memory resolver: (server config, a function that
    writes a .creds file for a new user of that account, or of another account if `foreign`)."""
    op_pem, _, op_pub = make_nkey(folder, "operator", OPERATOR)
    unlimited = {"subs": -1, "data": -1, "payload": -1, "imports": -1, "exports": -1,
                 "wildcards": True, "conn": -1, "leaf": -1}
    accounts = {}
    for name in ("fleet-account", "unknown-account"):
        pem, _, pub = make_nkey(folder, name, ACCOUNT)
        accounts[name] = (pem, pub, make_jwt(op_pem, op_pub, pub, name,
                                             {"limits": unlimited, "type": "account",
                                              "version": 2}))
    _, fleet_pub, fleet_jwt = accounts["fleet-account"]
    operator_jwt = make_jwt(op_pem, op_pub, op_pub, "op", {"type": "operator", "version": 2})
    config = (f'operator: "{operator_jwt}"\n'
              f'resolver: MEMORY\nresolver_preload: {{ {fleet_pub}: "{fleet_jwt}" }}')

    def creds(user, account="fleet-account"):
        acct_pem, acct_pub, _ = accounts[account]
        _, seed, pub = make_nkey(folder, user, USER)
        token = make_jwt(acct_pem, acct_pub, pub, user,
                         {"pub": {}, "sub": {}, "subs": -1, "data": -1, "payload": -1,
                          "type": "user", "version": 2})
        path = os.path.join(folder, f"{user}.creds")
        with open(path, "w") as f:
            f.write(f"-----BEGIN NATS USER JWT-----\n{token}\n------END NATS USER JWT------\n\n"
                    f"-----BEGIN USER NKEY SEED-----\n{seed}\n------END USER NKEY SEED------\n")
        os.chmod(path, 0o600)
        return path

    return config, creds


def make_ca_and_server_cert(folder, name):
    """A CA and a server certificate for 127.0.0.1 it signs: (ca.pem, server.pem, server.key)."""
    ca_key, ca = os.path.join(folder, f"{name}-ca.key"), os.path.join(folder, f"{name}-ca.pem")
    key, csr = os.path.join(folder, f"{name}.key"), os.path.join(folder, f"{name}.csr")
    cert, ext = os.path.join(folder, f"{name}.pem"), os.path.join(folder, f"{name}.ext")
    run = lambda *a: subprocess.run([OPENSSL, *a], check=True, capture_output=True)  # noqa: E731
    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", ca_key, "-out", ca,
        "-days", "1", "-subj", f"/CN={name} test CA")
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr,
        "-subj", "/CN=127.0.0.1")
    with open(ext, "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\n")
    run("x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial",
        "-out", cert, "-days", "1", "-extfile", ext)
    return ca, cert, key


def agent(gpustream, url, node, *auth):
    return Proc([gpustream, "serve", "--listen", "off", "--nats", url, "--node", node,
                 "--simulate", "1", "--probes", "simulated", "--interval", "0.2",
                 "--nats-full-every", "2", *auth])


def fleet(gpustream, url, *auth):
    return Proc([gpustream, "fleet", "--listen", "127.0.0.1:0", "--nats", url, "--stale", "5",
                 *auth])


def fleet_nodes(f):
    line = f.wait_line("the fleet listens", "listening http ")
    return fleet_states(line.split()[2])


def wait_nodes(f, want, timeout=20.0):
    deadline = time.monotonic() + timeout
    got = {}
    while time.monotonic() < deadline:
        got = fleet_nodes(f)
        if all(got.get(n) == "up" for n in want):
            return got
        time.sleep(0.1)
    fail(f"the fleet does not show {want} up: {got}\n{f.text()}")


def cmdline(pid):
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return f.read().decode(errors="replace")


def no_secret_in(what, text):
    for s in SECRETS:
        if s in text:
            fail(f"a secret is visible in {what}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--gpustream", required=True)
    args = p.parse_args()
    require_executable(NATS_SERVER, "nats-server")
    require_executable(OPENSSL, "openssl")
    g = args.gpustream
    folder = tempfile.mkdtemp(prefix="gpustream-natsauth-")
    procs = []
    try:
        seed, public = make_user_nkey(folder)
        nkey_file = os.path.join(folder, "user.nk")
        with open(nkey_file, "w") as f:
            f.write(seed + "\n" + public + "\n")
        os.chmod(nkey_file, 0o600)
        pw = write_secret(folder, "agent.password", PASSWORD)
        fleet_pw = write_secret(folder, "fleet.password", FLEET_PASSWORD)
        wrong = write_secret(folder, "wrong.password", "not-the-password")
        token = write_secret(folder, "token", TOKEN)

        # 1. Users with passwords and an nkey user (JetStream: the agents' key-value state).
        srv, port = start_nats(folder, "users", (
            f'jetstream {{ store_dir: "{folder}/js" }}\n'
            "authorization { users = [\n"
            f'  {{ user: node1, password: "{PASSWORD}" }}\n'
            f'  {{ user: fleet, password: "{FLEET_PASSWORD}" }}\n'
            f'  {{ nkey: "{public}" }}\n'
            "] }"))
        procs.append(srv)
        url = f"nats://127.0.0.1:{port}"

        a1 = agent(g, url, "pw-node", "--nats-user", "node1", "--nats-password-file", pw)
        procs.append(a1)
        a2 = agent(g, url, "nkey-node", "--nats-nkey", nkey_file)
        procs.append(a2)
        f1 = fleet(g, url, "--nats-user", "fleet", "--nats-password-file", fleet_pw)
        procs.append(f1)
        print("fleet sees", wait_nodes(f1, ["pw-node", "nkey-node"]), flush=True)
        a1.wait_line("the password agent connects", "NATS: connected to")
        a2.wait_line("the nkey agent connects", "NATS: connected to")
        for proc in (a1, a2, f1):
            no_secret_in(f"/proc/{proc.proc.pid}/cmdline", cmdline(proc.proc.pid))
        if pw not in cmdline(a1.proc.pid):
            fail("the agent's command line does not even name its password file")

        # A wrong password: NATS's own words in both logs; the agent keeps running.
        bad = agent(g, url, "bad-node", "--nats-user", "node1", "--nats-password-file", wrong)
        procs.append(bad)
        line = bad.wait_line("the agent names the refusal", "Authorization Violation")
        if "no server answers" in line:
            fail(f"the agent calls a refusal silence: {line}")
        time.sleep(1.5)  # several reconnect attempts (every 1 s): still running, logged once
        if bad.proc.poll() is not None:
            fail(f"the agent with a wrong password exited {bad.proc.returncode}:\n{bad.text()}")
        if bad.text().count("Authorization Violation") != 1:
            fail(f"the refusal is not logged once:\n{bad.text()}")
        r = subprocess.run([g, "fleet", "--listen", "127.0.0.1:0", "--nats", url, "--nats-user",
                            "fleet", "--nats-password-file", wrong], capture_output=True,
                           text=True, timeout=30)
        if r.returncode != 1 or "Authorization Violation" not in r.stderr:
            fail(f"fleet, wrong password: expected exit 1 naming Authorization Violation, got "
                 f"{r.returncode}: {r.stderr}")
        print("wrong password:", line.strip(), flush=True)

        # A missing or unreadable credential file: a usage error naming the flag and the file.
        for flag in ("--nats-password-file", "--nats-token-file", "--nats-nkey", "--nats-ca",
                     "--nats-creds"):
            missing = os.path.join(folder, "absent-" + flag.strip("-"))
            extra = ["--nats-user", "node1"] if flag == "--nats-password-file" else []
            r = subprocess.run([g, "serve", "--listen", "off", "--nats", url, *extra, flag,
                                missing], capture_output=True, text=True, timeout=30)
            if r.returncode != 2 or flag not in r.stderr or missing not in r.stderr:
                fail(f"serve {flag} MISSING: expected exit 2 naming both, got {r.returncode}: "
                     f"{r.stderr}")
        r = subprocess.run([g, "fleet", "--nats", url, "--nats-user", "fleet"],
                           capture_output=True, text=True, timeout=30)
        if r.returncode != 2 or "--nats-password-file" not in r.stderr:
            fail(f"fleet --nats-user alone: expected exit 2, got {r.returncode}: {r.stderr}")
        for proc in (a1, a2, f1, bad):
            no_secret_in("a log", proc.text())
            rc = proc.stop()
            if rc != 0:
                fail(f"exit {rc} after SIGTERM:\n{proc.text()}")
        srv.terminate()
        srv.wait()

        # 2. TLS with a private CA and a token.
        ca, cert, key = make_ca_and_server_cert(folder, "nats")
        srv2, port2 = start_nats(folder, "tls", (
            f'tls {{ cert_file: "{cert}", key_file: "{key}" }}\n'
            f'authorization {{ token: "{TOKEN}" }}'))
        procs.append(srv2)
        url2 = f"tls://127.0.0.1:{port2}"
        a3 = agent(g, url2, "tls-node", "--nats-token-file", token, "--nats-ca", ca,
                   "--nats-kv-bucket", "off")
        procs.append(a3)
        f2 = fleet(g, url2, "--nats-token-file", token, "--nats-ca", ca, "--kv-bucket", "off")
        procs.append(f2)
        print("TLS fleet sees", wait_nodes(f2, ["tls-node"]), flush=True)
        # Without the CA, the server's certificate is refused, in OpenSSL's words.
        untrusted = agent(g, url2, "untrusted", "--nats-token-file", token)
        procs.append(untrusted)
        line = untrusted.wait_line("the agent names the TLS failure",
                                   "unable to get local issuer certificate")
        print("untrusted:", line.strip(), flush=True)
        r = subprocess.run([g, "fleet", "--listen", "127.0.0.1:0", "--nats", url2,
                            "--nats-token-file", token], capture_output=True, text=True,
                           timeout=30)
        if r.returncode != 1 or "unable to get local issuer certificate" not in r.stderr:
            fail(f"fleet without the CA: expected exit 1 naming the TLS failure, got "
                 f"{r.returncode}: {r.stderr}")
        for proc in (a3, f2, untrusted):
            no_secret_in(f"/proc/{proc.proc.pid}/cmdline", cmdline(proc.proc.pid))
            no_secret_in("a log", proc.text())
            rc = proc.stop()
            if rc != 0:
                fail(f"exit {rc} after SIGTERM:\n{proc.text()}")
        srv2.terminate()
        srv2.wait()

        # 3. Mutual TLS: the server verifies a client certificate signed by the same CA.
        client_key, client_csr = os.path.join(folder, "client.key"), os.path.join(folder, "c.csr")
        client_cert = os.path.join(folder, "client.pem")
        subprocess.run([OPENSSL, "req", "-newkey", "rsa:2048", "-nodes", "-keyout", client_key,
                        "-out", client_csr, "-subj", "/CN=agent"], check=True, capture_output=True)
        subprocess.run([OPENSSL, "x509", "-req", "-in", client_csr, "-CA", ca, "-CAkey",
                        ca[:-len("-ca.pem")] + "-ca.key", "-CAcreateserial", "-out",
                        client_cert, "-days", "1"], check=True, capture_output=True)
        srv3, port3 = start_nats(folder, "mtls", (
            f'tls {{ cert_file: "{cert}", key_file: "{key}", ca_file: "{ca}", verify: true }}'))
        procs.append(srv3)
        url3 = f"tls://127.0.0.1:{port3}"
        mtls = ["--nats-ca", ca, "--nats-cert", client_cert, "--nats-key", client_key]
        a4 = agent(g, url3, "mtls-node", *mtls, "--nats-kv-bucket", "off")
        procs.append(a4)
        f3 = fleet(g, url3, *mtls, "--kv-bucket", "off")
        procs.append(f3)
        print("mutual TLS fleet sees", wait_nodes(f3, ["mtls-node"]), flush=True)
        r = subprocess.run([g, "fleet", "--listen", "127.0.0.1:0", "--nats", url3, "--nats-ca",
                            ca], capture_output=True, text=True, timeout=30)
        if r.returncode != 1 or "cannot connect" not in r.stderr:
            fail(f"fleet without its certificate: expected exit 1, got {r.returncode}: "
                 f"{r.stderr}")
        print("no client certificate:", r.stderr.strip(), flush=True)
        r = subprocess.run([g, "serve", "--listen", "off", "--nats", url3, "--nats-cert",
                            client_cert], capture_output=True, text=True, timeout=30)
        if r.returncode != 2 or "--nats-key" not in r.stderr:
            fail(f"--nats-cert without --nats-key: expected exit 2, got {r.returncode}")
        for proc in (a4, f3):
            rc = proc.stop()
            if rc != 0:
                fail(f"exit {rc} after SIGTERM:\n{proc.text()}")
        srv3.terminate()
        srv3.wait()

        # 4. Operator mode (a memory resolver): .creds files, JWTs signed here with OpenSSL.
        config, creds = make_operator(folder)
        srv4, port4 = start_nats(folder, "operator", config)
        procs.append(srv4)
        url4 = f"nats://127.0.0.1:{port4}"
        a5 = agent(g, url4, "creds-node", "--nats-creds", creds("agent"), "--nats-kv-bucket",
                   "off")
        procs.append(a5)
        f4 = fleet(g, url4, "--nats-creds", creds("fleet"), "--kv-bucket", "off")
        procs.append(f4)
        print("operator-mode fleet sees", wait_nodes(f4, ["creds-node"]), flush=True)
        # A user of an account the server does not know: refused, in NATS's words.
        stranger = creds("stranger", "unknown-account")
        a6 = agent(g, url4, "stranger", "--nats-creds", stranger, "--nats-kv-bucket", "off")
        procs.append(a6)
        line = a6.wait_line("the agent names the refusal", "Authorization Violation")
        print("unknown account:", line.strip(), flush=True)
        r = subprocess.run([g, "fleet", "--listen", "127.0.0.1:0", "--nats", url4,
                            "--nats-creds", stranger], capture_output=True, text=True,
                           timeout=30)
        if r.returncode != 1 or "Authorization Violation" not in r.stderr:
            fail(f"fleet, unknown account: expected exit 1 naming Authorization Violation, got "
                 f"{r.returncode}: {r.stderr}")
        for proc in (a5, f4, a6):
            rc = proc.stop()
            if rc != 0:
                fail(f"exit {rc} after SIGTERM:\n{proc.text()}")
        print("OK", flush=True)
    finally:
        for proc in procs:
            if isinstance(proc, Proc):
                proc.stop()
            elif proc.poll() is None:
                proc.kill()
                proc.wait()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
