"""Where an io_uring preset's extra cost at large messages comes from
(iolab.rooms.echo.perbyte), on small synthetic echo tables: a preset
whose counts per echoed request stay those of the smallest size while
its cost grows with the bytes is said to spend a per-byte cost, not more
operations, its cause unexplained; one whose counts grow is not (the
negative control); one near epoll's cost is not named."""

from __future__ import annotations

import pandas as pd

from iolab.rooms.echo import perbyte

SIZES = (128, 512, 16384, 65536)
EPOLL_NS = {128: 5600.0, 512: 5100.0, 16384: 8600.0, 65536: 33700.0}


def cells(preset: str, server: str, ns: dict[int, float], ops: dict[int, float], reps: int = 6) -> list[dict]:
    """One preset's cells at c = 50, our setup: server CPU per request and
    ``ops[size]`` of each operation per echoed request (1 000 echoed)."""
    rows = []
    for rep in range(1, reps + 1):
        drift = 1 + 0.01 * (rep % 3)
        for size in SIZES:
            n = ops[size] * 1000 if server == "uring" else 0.0
            rows.append(
                {
                    "node": "local", "server": server, "preset": preset, "connections": 50, "bytes": size,
                    "status": "ok", "rep": rep, "client": "event-loop-uring", "layout": "pinned", "pipeline": 1,
                    "server_ns_per_request": ns[size] * drift, "server_bytes": 1000 * size,
                    "sqes": n, "cqes": 2 * n, "recv_buffers": n, "send_buffers": n,
                    "nobufs": 0.0, "rearms": 0.0, "short_writes": 0.0,
                }
            )  # fmt: skip
    return rows


def table(ops: dict[int, float]) -> pd.DataFrame:
    """epoll; a ring 1.13 ns per byte dearer at 16-64 KiB with ``ops``
    operations per request; a ring about as dear as epoll."""
    per_byte = {b: 5700.0 if b < 1024 else EPOLL_NS[b] + 1.13 * b for b in SIZES}
    near = {b: EPOLL_NS[b] * 1.05 for b in SIZES}
    return pd.DataFrame(
        cells("epoll", "epoll", EPOLL_NS, dict.fromkeys(SIZES, 0.0))
        + cells("defer_taskrun_multishot", "uring", per_byte, ops)
        + cells("buf_ring", "uring", near, dict.fromkeys(SIZES, 1.0))
    )


def test_the_same_operations_at_a_higher_cost_are_a_per_byte_cost_left_unexplained() -> None:
    view = perbyte.excess_per_byte(table(dict.fromkeys(SIZES, 1.0)))
    row = view[(view["preset"] == "defer_taskrun_multishot") & (view["bytes"] == 65536)].iloc[0]
    assert abs(row["excess_ns_per_byte"] - 1.13) < 0.02 and row["sqes"] == row["sqes_smallest"] == 1.0
    text = perbyte.sentence(view)
    assert "defer_taskrun_multishot spent" in text and "not more operations" in text and "unexplained" in text
    assert "buf_ring" not in text  # 5 % over epoll: no clear extra cost to explain


def test_operations_that_grow_with_the_bytes_are_not_called_a_per_byte_cost() -> None:
    # The negative control: one operation per 4 KiB buffer, as the older
    # ring's 4 KiB provided buffers give; the counts grow with the size.
    view = perbyte.excess_per_byte(table({b: max(1.0, b / 4096) for b in SIZES}))
    text = perbyte.sentence(view)
    assert "defer_taskrun_multishot spent" in text
    assert "not more operations" not in text and "unexplained" not in text
    assert "SQEs 1, 4 and 16" in text and "more operations per request" in text
    # The buffers' size is read from the counts: 64 KiB over 16 buffers.
    assert "each receive buffer holding about 4 KiB of the message" in text
    # ... and with 64 KiB buffers (one per message) nothing is said of it.
    one = perbyte.sentence(perbyte.excess_per_byte(table(dict.fromkeys(SIZES, 1.0))))
    assert "each receive buffer holding" not in one


def test_nothing_is_said_without_epoll_or_a_clear_extra_cost() -> None:
    echo = table(dict.fromkeys(SIZES, 1.0))
    assert perbyte.excess_per_byte(echo[echo["preset"] != "epoll"]).empty
    assert perbyte.sentence(perbyte.excess_per_byte(echo[echo["preset"] != "defer_taskrun_multishot"])) == ""
