"""Cases of protocol_client.py about sequence numbers: resuming with `since` (after a reconnect,
straight from hello, after a server restart) and the two kinds of `gap`, each accounted exactly
(protocol.md: "Resuming", "Slow clients", `gap`)."""
import asyncio

from protocol_conn import expect, open_conn, snapshots
from protocol_cases import check
from wire import LossLedger


def latest_sequence(server):
    """The newest snapshot's sequence; 0 before the first one (a server just started)."""
    return max((s["sequence"] for s in server.get_json("/api/v1/snapshot")["snapshots"]), default=0)


async def case_resume(server):
    """Reconnect and subscribe with the last sequence received: every later one, once, in order.
    A `since` beyond the server's last sequence (a previous server process) resumes from 0."""
    server.wait_until("the first snapshots", lambda: server.get_json("/api/v1/snapshot")["snapshots"])
    for tr in ("tcp", "ws"):
        c = await open_conn(tr, server)
        await expect(c, "hello")
        last = (await snapshots(c, 5))[-1]["sequence"]
        await c.close()
        server.wait_until("10 more snapshots", lambda: latest_sequence(server) >= last + 10)
        c = await open_conn(tr, server)
        await expect(c, "hello")
        await c.send({"type": "subscribe", "since": last, "fields": ["power_watts"]})
        ack = await expect(c, "subscribed")
        check(ack.get("since") == last, f"{tr}: subscribed.since {ack.get('since')} != {last}")
        got = [s["sequence"] for s in await snapshots(c, 25)]
        check(got == list(range(last + 1, last + 26)),
              f"{tr}: resume from {last} is not exactly {last + 1}..{last + 25}: {got}")
        await c.close()

    c = await open_conn("tcp", server)
    h = await expect(c, "hello")
    check(h["last_sequence"] < h["history_capacity"], "the test expects a young server")
    await c.send({"type": "subscribe", "since": 10 ** 15})
    ack = await expect(c, "subscribed")
    check(ack.get("since") == 0, f"a since beyond the last sequence: subscribed.since {ack.get('since')}")
    got = [s["sequence"] for s in await snapshots(c, 10)]
    check(got == list(range(1, 11)), f"resume from 0 should start at the first sequence, 1: {got}")
    await c.close()


async def case_resume_from_hello(server):
    """protocol.md, hello: "A client that wants to be sure it misses nothing can always subscribe
    with since: last_sequence" — subscribing 0.6 s after hello (at 20 Hz, a dozen snapshots
    later) must still give every sequence after last_sequence exactly once (issue 18, item 10)."""
    server.wait_until("the first snapshots", lambda: server.get_json("/api/v1/snapshot")["snapshots"])
    for tr in ("tcp", "ws"):
        c = await open_conn(tr, server)
        h = await expect(c, "hello")
        await asyncio.sleep(0.6)
        await c.send({"type": "subscribe", "since": h["last_sequence"]})
        seqs, acked = [], False
        while not acked or len(seqs) < 40:
            m = await c.recv()
            if m["type"] == "subscribed":
                acked = True
            elif m["type"] == "snapshot":
                seqs.append(m["sequence"])
            else:
                raise AssertionError(f"{tr}: unexpected {m}")
        dups = sorted({s for s in seqs if seqs.count(s) > 1})
        check(not dups, f"{tr}: resuming from hello duplicated {len(dups)} sequence(s): {dups}")
        first = h["last_sequence"] + 1
        check(seqs == list(range(first, first + len(seqs))),
              f"{tr}: not every sequence after {h['last_sequence']} once and in order: {seqs}")
        await c.close()


async def case_gap_history(server):
    """History of 16: a resume from 1 gets a `history_too_old` gap, then exactly what follows."""
    c = await open_conn("ws", server)
    h = await expect(c, "hello")
    check(h["history_capacity"] == 16, f"history_capacity {h['history_capacity']}, config says 16")
    await c.close()
    server.wait_until("60 snapshots", lambda: latest_sequence(server) >= 60)
    for tr in ("tcp", "ws"):
        c = await open_conn(tr, server)
        await expect(c, "hello")
        await c.send({"type": "subscribe", "since": 1})
        ack = await expect(c, "subscribed")
        check(ack.get("since") == 1, f"{tr}: subscribed {ack}")
        ledger = LossLedger()
        ledger.start(1)
        gap = await expect(c, "gap", skip=())
        check(gap.get("reason") == "history_too_old" and gap["after_sequence"] >= 1 and gap["missed"] >= 30,
              f"{tr}: expected a history_too_old gap of at least 30 after 1: {gap}")
        ledger.gap(gap)
        for s in await snapshots(c, 30):
            ledger.snapshot(s["sequence"])
        check(not ledger.violations, f"{tr}: {ledger.violations}")
        await c.close()


async def case_gap_slow(server):
    """A reader that stops reading (4 KiB receive buffer, --send-queue 4) gets a
    `dropped_slow_subscriber` gap whose numbers account exactly for what it missed."""
    server.wait_until("the first snapshots", lambda: server.get_json("/api/v1/snapshot")["snapshots"])
    for tr in ("tcp", "ws"):
        c = await open_conn(tr, server, rcvbuf=4096)
        h = await expect(c, "hello", skip=())
        ledger = LossLedger()
        ledger.start(h["last_sequence"])
        reasons = set()

        def other(m):
            check(m["type"] == "gap", f"{tr}: unexpected {m}")
            reasons.add(m.get("reason"))
            ledger.gap(m)
        for _ in range(4):
            c.stall()
            await asyncio.sleep(3.0)  # below the 5 s after which a full queue disconnects
            c.resume()
            for s in await snapshots(c, 40, on_other=other):
                ledger.snapshot(s["sequence"])
            if ledger.gaps:
                break
        check(ledger.gaps, f"{tr}: no gap after 4 stalls of 3 s (the kernel buffered everything?)")
        check(reasons == {"dropped_slow_subscriber"}, f"{tr}: gap reasons {reasons}")
        for s in await snapshots(c, 20, on_other=other):
            ledger.snapshot(s["sequence"])
        check(not ledger.violations, f"{tr}: {ledger.violations[:5]}")
        print(f"{tr}: {ledger.gaps} gap(s), {ledger.missed} missed, {ledger.snapshots} received, "
              "accounted exactly", flush=True)
        await c.close()


FAST = ["--simulate", "2", "--interval", "0.05"]
CASES_RESUME = {
    "resume": (FAST, case_resume),
    "resume_from_hello": (FAST, case_resume_from_hello),
    "gap_history": (FAST + ["--config", "{tmp}/config.json"], case_gap_history),
    "gap_slow": (["--simulate", "64", "--interval", "0.02", "--send-queue", "4"], case_gap_slow),
}
