"""A stream client written from docs/protocol.md alone (issue 18, item 14): Debian's
python3-websockets for WebSocket, plain sockets for TCP JSON lines. Each case is what a client
author reads in the doc and relies on: hello, auth, projected subscribe, filters, resume, gaps,
and every way a connection ends. Each case starts its own `gpustream serve` on loopback.

    protocol_client.py --serve '/path/gpustream serve' --case NAME   (or --case all)

Exit 0 when the case holds, 1 with a FAIL line saying which promise broke."""
import argparse
import asyncio
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_helper import Server, fail  # noqa: E402
from protocol_cases import CASES_SUBSCRIBE  # noqa: E402
from protocol_lifecycle import CASES_LIFECYCLE  # noqa: E402
from protocol_resume import CASES_RESUME  # noqa: E402

CASES = {**CASES_SUBSCRIBE, **CASES_RESUME, **CASES_LIFECYCLE}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--serve", required=True)
    p.add_argument("--case", required=True, help="one of: all, " + ", ".join(CASES))
    a = p.parse_args()
    names = list(CASES) if a.case == "all" else [a.case]
    for name in names:
        if name not in CASES:
            fail(f"unknown case {name!r}; known: {', '.join(CASES)}")
        flags, coro = CASES[name]
        with tempfile.TemporaryDirectory(prefix="gpustream-client-") as tmp:
            extra = [f.format(tmp=tmp) for f in flags]
            for f in flags:
                if f.startswith("{tmp}/token"):
                    with open(f.format(tmp=tmp), "w") as t:
                        t.write("s3cret\r\n")
                if f.startswith("{tmp}/config"):
                    with open(f.format(tmp=tmp), "w") as t:
                        json.dump({"history": 16}, t)
            server = Server(a.serve, "--listen", "127.0.0.1:0", "--tcp", "127.0.0.1:0",
                            "--probes", "simulated,host", *extra)
            try:
                asyncio.run(asyncio.wait_for(coro(server), 90))
            except SystemExit:
                server.kill()
                raise
            except asyncio.TimeoutError:
                server.kill()
                fail(f"{name}: did not finish within 90 s")
            except Exception as e:  # noqa: BLE001 — any client error is a failure
                server.kill()
                fail(f"{name}: {type(e).__name__}: {e}")
            if server.proc.poll() is None:
                server.stop()
            elif server.proc.returncode != 0:
                fail(f"{name}: the server exited with {server.proc.returncode}")
        print(f"PASS: {name}", flush=True)


if __name__ == "__main__":
    main()
