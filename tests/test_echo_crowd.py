"""A crowd of clients that send and never read does not starve a new
client of any echo server (the cap on the provided buffers one connection
may hold, in echo-uring); without the cap, it does."""

from __future__ import annotations

import os
import selectors
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from echo_support import SERVERS, STRUCTURAL, Server, connect, start_server

# A crowd of clients that send and never read, and one that must still be
# served: the crowd keeps sending what its sockets take, up to 8 MiB each,
# before and while the probe asks for its echoes.
NON_READERS = 200
PROBE_ECHOES = 4
# Starved means never served: not even once the crowd has stopped sending.
# How long the crowd sends is the machine's pace, not the server's: the
# probe of few_buffers (16 buffers of 512 B) is answered within 0.03 s of
# the crowd's last byte, which came 2.2-3.7 s after the probe quiet and
# 22-33 s beside four busy loops; its ASan build took 5.3-11.9 s quiet and
# passed any fixed bound of 20 s beside the loops. So an echo counts as
# starved when the crowd has sent nothing for CROWD_QUIET_S and the echo
# has still not come; without the cap the crowd stops at once (the stuck
# connections hold every buffer) and the probe is never answered.
CROWD_QUIET_S = 10.0
# Only so that a broken test cannot hang the suite: the crowd's 1.6 GB took
# at most 33 s to send beside the busy loops.
PROBE_CAP_S = 600.0
CROWD_BYTES = 8 << 20


@pytest.fixture(
    params=[pytest.param(s, id=s[0], marks=() if s[0] in STRUCTURAL else pytest.mark.full) for s in SERVERS]
)
def crowded_server(request: pytest.FixtureRequest, native_build: Path) -> Iterator[Server]:
    """Every configuration, optimised build; the structural ones by default."""
    yield from start_server((request.param, "opt"), native_build)


def test_a_crowd_of_non_readers_does_not_starve_a_new_client(crowded_server: Server) -> None:
    waits = crowd_and_probe(crowded_server)
    assert all(w is not None for w in waits), (
        f"echo {waits.index(None) + 1} of {PROBE_ECHOES} not answered {CROWD_QUIET_S} s after "
        f"{NON_READERS} clients that never read had stopped sending"
    )
    print(f"probe waits beside {NON_READERS} non-readers: " + ", ".join(f"{w * 1e3:.1f} ms" for w in waits if w))
    counters = crowded_server.stop()
    assert counters["accepted"] == NON_READERS + 1


def test_without_the_cap_the_crowd_starves_the_new_client(native_build: Path) -> None:
    # The negative control: send bundles without the cap (--hold-share 0).
    ((_, program, flags),) = [s for s in SERVERS if s[0] == "send_bundle"]
    server = Server(native_build / program, [*flags, "--hold-share", "0"], san=False)
    try:
        waits = crowd_and_probe(server)
        assert None in waits, f"the probe was served without the cap too: {waits}"
    finally:
        server.stop()


def crowd_and_probe(server: Server) -> list[float | None]:
    """The probe's wait for each of its echoes beside a crowd that sends and
    never reads (None: not answered CROWD_QUIET_S after the crowd stopped
    sending; the echoes after it are not asked)."""
    crowd = []
    stop = threading.Event()
    sent = [0] * NON_READERS
    last_sent = [time.monotonic()]

    def pump() -> None:
        block = os.urandom(64 << 10)
        while not stop.is_set():
            for i, s in enumerate(crowd):
                try:
                    while sent[i] < CROWD_BYTES:
                        sent[i] += s.send(block)
                        last_sent[0] = time.monotonic()
                except (BlockingIOError, OSError):
                    pass
            time.sleep(0.01)

    def answered(probe: socket.socket, msg: bytes) -> bool:
        got, started = b"", time.monotonic()
        with selectors.DefaultSelector() as sel:
            sel.register(probe, selectors.EVENT_READ)
            while len(got) < len(msg):
                now = time.monotonic()
                if now - last_sent[0] > CROWD_QUIET_S or now - started > PROBE_CAP_S:
                    return False
                if sel.select(timeout=0.2):
                    chunk = probe.recv(len(msg) - len(got))
                    if not chunk:
                        return False
                    got += chunk
        return got == msg

    try:
        for _ in range(NON_READERS):
            s = connect(server.port)
            s.setblocking(False)
            crowd.append(s)
        pumping = threading.Thread(target=pump, daemon=True)
        pumping.start()
        time.sleep(2.0)
        probe = connect(server.port)
        waits: list[float | None] = []
        for i in range(PROBE_ECHOES):
            msg = bytes([i]) * 64
            start = time.monotonic()
            probe.sendall(msg)
            if not answered(probe, msg):
                waits.append(None)
                break
            waits.append(time.monotonic() - start)
        probe.close()
    finally:
        stop.set()
        for s in crowd:
            s.close()
    return waits
