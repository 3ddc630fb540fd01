"""Tidy table of the echo cells."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from ...presets import preset_server
from ...readers import RawFormatError, read_echo_csv
from ..context import context, load_sidecar
from ..room import Room


def echo_table(raw_files: Iterable[str | Path]) -> pd.DataFrame:
    """Tidy echo results: one row per node, repetition and cell, with the
    derived per-request costs. Per-request costs divide CPU time over the
    whole server run by the requests it echoed (bytes / request size), so
    warm-up is in both numerator and denominator."""
    frames = []
    for raw in sorted(Path(p) for p in raw_files):
        frame = read_echo_csv(raw)
        settings = load_sidecar(raw)["settings"]
        # Each cell's wall-clock time under load: the load generator's warm-up and
        # measured seconds (a setup's own, else the sweep's: files from before a
        # setup could set them have no duration or warmup column).
        measured_s = pd.to_numeric(frame["duration"], errors="coerce").fillna(float(settings.get("duration", "nan")))
        warmup_s = pd.to_numeric(frame["warmup"], errors="coerce").fillna(float(settings.get("warmup", "nan")))
        loaded_s = measured_s + warmup_s
        frame["duration"] = measured_s
        frame["warmup"] = warmup_s
        # Each preset's flags as the sweep ran them, so the table says what
        # every configuration was without its raw files.
        flags = {name: " ".join(preset_server(name, spec)[1]) for name, spec in (settings.get("presets") or {}).items()}
        frame = frame.assign(**context(raw), loaded_s=loaded_s, flags=frame["preset"].map(flags).fillna(""))
        # Requests in flight per connection: files from before a setup could
        # set it ran the sweep's one setting.
        frame["pipeline"] = (
            pd.to_numeric(frame["pipeline"], errors="coerce").fillna(int(settings.get("pipeline") or 1)).astype(int)
        )
        frames.append(frame)
    if not frames:
        raise RawFormatError("no raw files given")
    out = pd.concat(frames, ignore_index=True)
    ok = out["status"] == "ok"
    echoed = out["server_bytes"].where(ok) / out["bytes"]
    out["server_ns_per_request"] = out["server_cpu_ns"].where(ok) / echoed
    out["client_ns_per_request"] = out["client_cpu_ns"].where(ok) / echoed
    out["sqes_per_enter"] = (out["sqes"] / out["io_uring_enter"]).where(ok & out["server"].isin(["uring", "go-uring"]))
    out["events_per_wait"] = (out["events"] / out["waits"]).where(ok)
    # How busy each side kept a CPU: near 1 the side saturated it, and with
    # one CPU each, requests/s then measure the pair, not the server alone.
    # Both CPU times are whole processes', so they include the connecting
    # and the ramp-up before the clock (setup_s, where the load generator
    # reported it): over the warm-up and measured seconds alone, a
    # one-thread server read up to 1.06 of a CPU and a 2-CPU node 2.2.
    setup_s = pd.to_numeric(out["setup_s"], errors="coerce") if "setup_s" in out else pd.Series(0.0, out.index)
    out["busy_s"] = out["loaded_s"] + setup_s.fillna(0.0)
    out["client_busy"] = (out["client_cpu_ns"] / 1e9 / out["busy_s"]).where(ok)
    out["server_busy"] = (out["server_cpu_ns"] / 1e9 / out["busy_s"]).where(ok)
    # Where the server was pinned, the IPIs its CPUs took per request echoed.
    out["resched_ipis_per_request"] = (pd.to_numeric(out["server_resched_ipis"], errors="coerce") / echoed).where(
        ok & out["server_cpu"].notna()
    )
    # Provided buffers per receive completion (echo-uring with provided
    # buffers): above 1 only where bundles took effect.
    recv_buffers = pd.to_numeric(out["recv_buffers"], errors="coerce")
    out["buffers_per_recv"] = (recv_buffers / out["server_requests"]).where(ok & (recv_buffers > 0))
    # Chunks per send: above 1 only where gathered sends took effect.
    send_buffers = pd.to_numeric(out["send_buffers"], errors="coerce")
    sends = out["send_bufs_hist"].map(lambda h: sum(int(n) for n in str(h).split()) if h else 0)
    out["buffers_per_send"] = (send_buffers / sends.where(sends > 0)).where(ok & (send_buffers > 0))

    out["reason"] = out["reason"].astype(object).where(out["reason"].notna(), "")
    return out


ROOM = Room(("echo",), echo_table)
