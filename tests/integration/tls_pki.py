"""A throw-away PKI for the TLS tests, made with Debian's `openssl` at test time (nothing is
committed): CAs and certificates (EC P-256) signed by them, as PEM files in a directory."""
import os
import subprocess


def _openssl(*args):
    r = subprocess.run(["openssl", *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("openssl " + " ".join(args) + " failed:\n" + r.stderr)


class Pki:
    def __init__(self, directory):
        self.dir = directory

    def path(self, name):
        return os.path.join(self.dir, name)

    def ca(self, name):
        """A self-signed CA: returns (cert file, key file)."""
        crt, key = self.path(name + ".crt"), self.path(name + ".key")
        _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                 "-keyout", key, "-out", crt, "-days", "30", "-subj", f"/CN={name}",
                 "-addext", "basicConstraints=critical,CA:TRUE",
                 "-addext", "keyUsage=critical,keyCertSign,cRLSign")
        return crt, key

    def leaf(self, ca, name, sans=None, days=2):
        """A certificate signed by `ca` (a (cert, key) pair), with subject alternative names
        `sans` (e.g. "IP:127.0.0.1,DNS:localhost"): returns (cert file, key file)."""
        crt, key = self.path(name + ".crt"), self.path(name + ".key")
        args = ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                "-keyout", key, "-out", crt, "-days", str(days), "-subj", f"/CN={name}",
                "-CA", ca[0], "-CAkey", ca[1],
                "-addext", "basicConstraints=CA:FALSE",
                "-addext", "extendedKeyUsage=serverAuth,clientAuth"]
        if sans:
            args += ["-addext", f"subjectAltName={sans}"]
        _openssl(*args)
        return crt, key
