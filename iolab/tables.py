"""Loaders from raw files to tidy tables (one row per observation).

Raw probe files are CSV with ``# key=value`` metadata lines; each has a
provenance sidecar. Tidy tables join the two, so every row says which node,
repetition and raw file it came from. ``python -m iolab.tables`` writes them
as Parquet together with a ``.sources.json`` listing the raw files (with
SHA-256) that the figure manifest links to.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from . import atomic, integrity, paths
from .formats import (
    IB_COLUMNS,
    OSU_PREFIX,
    REFERENCE_BENCH,
    bench_method,
    histograms_path,
    launch_rows,
    launch_selection,
)
from .presets import preset_server
from .provenance import sidecar_for
from .readers import (
    TRACE_COLUMNS,
    RawFormatError,
    read_echo_csv,
    read_histograms_csv,
    read_ib_csv,
    read_latency_csv,
    read_metadata,
    read_mpi_csv,
    read_raw_csv,
    read_trace_csv,
    read_unavailable,
    read_zc_usage,
    sha256,
)
from .registry import REGISTRY

_RAW_NAME = re.compile(r"^rep\d+\.csv$")  # not rep<N>.histograms.csv


def ib_table(raw_files: Iterable[str | Path]) -> pd.DataFrame:
    """Tidy perftest results: one row per node, repetition, program, size and
    metric (``value``); none where the experiment was skipped (``skipped``
    then holds the reason, on one row without values)."""
    return _skippable_table(raw_files, read_ib_csv, IB_COLUMNS, _network)


def _skippable_table(
    raw_files: Iterable[str | Path],
    read: Callable[[Path], pd.DataFrame],
    columns: Sequence[str],
    network: Callable[[Path], dict[str, Any]] | None = None,
) -> pd.DataFrame:
    """The raw files' rows with their context; a file of a skipped run gives
    one row without values and the reason in ``skipped``."""
    frames = []
    for raw in sorted(Path(p) for p in raw_files):
        frame = read(raw)
        skipped = read_metadata(raw).get("skipped", "")
        if frame.empty:
            frame = pd.DataFrame([{c: None for c in columns}])
        frames.append(frame.assign(**_context(raw), skipped=skipped, **(network(raw) if network else {})))
    if not frames:
        raise RawFormatError("no raw files given")
    return pd.concat(frames, ignore_index=True)


def load_sidecar(raw: str | Path) -> dict[str, Any]:
    side = sidecar_for(raw)
    try:
        return json.loads(Path(side).read_text())
    except FileNotFoundError as e:
        raise RawFormatError(f"{raw}: provenance sidecar {side.name} is missing") from e


def _network(raw: Path) -> dict[str, Any]:
    """The node's NIC kinds (``nic_kind``: "" where not recorded), which the
    HPC HUB claims read, and for perftest the RDMA device's link layer."""
    side = load_sidecar(raw)
    devices = (side.get("ib") or {}).get("device") or {}
    mine = devices.get(side["node"]["name"]) or {}
    return {
        "nic_kind": str((side.get("network") or {}).get("nic_kind") or ""),
        "link_layer": next((str(v) for k, v in mine.items() if k.endswith(".link_layer")), ""),
    }


def _context(raw: Path) -> dict[str, Any]:
    """Columns every tidy row carries from its raw file's sidecar, once the
    file (and any measured with it) is checked against the fingerprints the
    sidecar recorded (iolab.integrity: an edited file stops the build)."""
    side = load_sidecar(raw)
    try:
        integrity.verify(raw)
    except integrity.EditedRawError as e:
        raise RawFormatError(str(e)) from e
    return {
        "node": side["node"]["name"],
        "kind": side["node"]["kind"],
        "mitigations": side["mitigations"]["state"],
        "kernel": side["host"]["kernel"],
        # The CPUs the node has: claims that need more are "not testable here".
        "cpus": int((side.get("cpu") or {}).get("count") or 0),
        "cpu_model": str((side.get("cpu") or {}).get("model") or ""),
        # The hypervisor the node reported, and the virtual machine monitor
        # its kernel command line names (inferred: none reports it).
        "hypervisor": str((side.get("virtualization") or {}).get("hypervisor") or ""),
        "vmm": "Firecracker" if "firecracker" in str((side.get("host") or {}).get("cmdline", "")).lower() else "",
        "rep": int(side["settings"]["rep"]),
        # 0: a repetition planned in advance; k: added by adaptive precision's round k.
        "round": int(side["settings"].get("round", 0)),
        # "tcg": an emulated guest, for functional tests only (see load()).
        "accel": side.get("accel") or "",
        "raw_file": paths.relative(raw),
    }


def probe_table(raw_files: Iterable[str | Path]) -> pd.DataFrame:
    """Tidy cost-probe samples: one row per timed batch, warm-up flagged.

    ``ns_per_call`` subtracts the probe's measured timer-pair cost from the
    batch time before dividing by the system calls in it; ``ns_per_sqe``
    divides that by the SQEs per call (io_uring modes, n > 0).
    """
    frames = []
    for raw in sorted(Path(p) for p in raw_files):
        frame = read_raw_csv(raw)
        timer = float(read_metadata(raw).get("timer_overhead_ns", 0.0))
        per_call = (frame["ns"] - timer) / frame["calls"]
        frame = frame.assign(
            **_context(raw),
            timer_overhead_ns=timer,
            ns_per_call=per_call,
            ns_per_sqe=per_call / frame["n"].where(frame["n"] > 0),
        )
        frames.append(frame)
    if not frames:
        raise RawFormatError("no raw files given")
    out = pd.concat(frames, ignore_index=True)
    out["warmup"] = out["warmup"].astype(bool)
    return out


def send_zc_table(raw_files: Iterable[str | Path]) -> pd.DataFrame:
    """probe_table's rows of cost-probe send-zc, each zero-copy cell with
    its notifications and the copies they reported (``zc_notifications``,
    ``zc_copied``: per repetition and cell, measured batches only; 0 for
    plain send)."""
    files = sorted(Path(p) for p in raw_files)
    table = probe_table(files)
    usage = pd.concat([read_zc_usage(raw).assign(raw_file=paths.relative(raw)) for raw in files], ignore_index=True)
    table = table.merge(usage, on=["raw_file", "variant", "bytes"], how="left", validate="many_to_one")
    return table.fillna({"zc_notifications": 0, "zc_copied": 0}).astype({"zc_notifications": int, "zc_copied": int})


def trace_table(raw_files: Iterable[str | Path]) -> pd.DataFrame:
    """Tidy bpftrace results: one row per node, repetition, workload and map.
    Empty (with the skip reason in ``skipped``) where tracing was unavailable."""
    return _skippable_table(raw_files, read_trace_csv, TRACE_COLUMNS)


def echo_table(raw_files: Iterable[str | Path]) -> pd.DataFrame:
    """Tidy echo results: one row per node, repetition and cell, with the
    derived per-request costs. Per-request costs divide CPU time over the
    whole server run by the requests it echoed (bytes / request size), so
    warm-up is in both numerator and denominator."""
    frames = []
    for raw in sorted(Path(p) for p in raw_files):
        frame = read_echo_csv(raw)
        settings = load_sidecar(raw)["settings"]
        # Each cell's wall-clock time under load: the load generator's warm-up and measured seconds.
        loaded_s = float(settings.get("duration", "nan")) + float(settings.get("warmup", "nan"))
        # Each preset's flags as the sweep ran them, so the table says what
        # every configuration was without its raw files.
        flags = {name: " ".join(preset_server(name, spec)[1]) for name, spec in (settings.get("presets") or {}).items()}
        frame = frame.assign(**_context(raw), loaded_s=loaded_s, flags=frame["preset"].map(flags).fillna(""))
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
    out["client_busy"] = (out["client_cpu_ns"] / 1e9 / out["loaded_s"]).where(ok)
    out["server_busy"] = (out["server_cpu_ns"] / 1e9 / out["loaded_s"]).where(ok)
    # Where the server was pinned, the IPIs its CPUs took per request echoed.
    out["resched_ipis_per_request"] = (pd.to_numeric(out["server_resched_ipis"], errors="coerce") / echoed).where(
        ok & out["server_cpu"].notna()
    )
    out["reason"] = out["reason"].astype(object).where(out["reason"].notna(), "")
    return out


# What each MPI launch decided and ran, as columns of its samples.
LAUNCH_COLUMNS = (
    "oversubscribed",
    "binding",
    "selection",
    "algorithm",
    "pinned",
    "sync",
    "hosts",
    "rate_mbit",
    "peers",
    "fabric",
    "timer_ns",
)


def launch_columns(rec: dict[str, Any], bench: str) -> dict[str, Any]:
    """The LAUNCH_COLUMNS of one benchmark's samples under launch record ``rec``."""
    meta = rec.get("probe_meta", {})
    algorithm = meta.get("algorithms", {}).get(bench.removeprefix(OSU_PREFIX), {})
    group = rec.get("group") or {}
    cluster = rec.get("cluster") or {}
    # Ranks of one benchmark on distinct processors; else the launch's spread.
    procs = meta.get("processors")
    spread = [k for k in group.get("ranks_per_node", []) if k]
    return {
        "oversubscribed": rec["oversubscribed"],
        "binding": rec["binding"],
        "selection": launch_selection(rec),
        "algorithm": algorithm.get("algorithm", ""),
        "pinned": bool(algorithm.get("pinned", False)),
        "sync": "self" if bench in ("pingpong", "osu_latency", REFERENCE_BENCH) else meta.get("sync", ""),
        "hosts": len(set(procs)) if procs else (len(cluster.get("hosts", [])) or len(spread) or 1),
        "rate_mbit": cluster.get("rate_mbit"),
        "peers": ",".join(group.get("nodes", [])[1:]),
        # What one clock reading costs, inside every timed iteration (0 where
        # the probe predates recording it).
        "timer_ns": float(meta.get("timer_overhead_ns", 0.0)),
        # The launch's fabric kind (launches recorded before it: "").
        "fabric": (rec.get("fabric") or {}).get("kind", ""),
    }


def _launch_of_each_row(raw: Path, frame: pd.DataFrame) -> tuple[list[dict[str, Any]], np.ndarray]:
    """The launch records of an MPI raw file and, per row, the index of the
    record it was measured under; rows that disagree with their record are
    a RawFormatError."""
    try:
        records, counts = launch_rows(raw)
    except ValueError as e:
        raise RawFormatError(f"{raw}: {e}") from e
    if sum(counts) != len(frame):
        raise RawFormatError(f"{raw}: {len(frame)} rows but {sum(counts)} under '# launch:' records")
    launch_index = np.repeat(np.arange(len(records)), counts)
    program = np.where(frame["bench"] == REFERENCE_BENCH, "mpi-pingpong-ref", "mpi-probe")
    method = frame["bench"].map(bench_method).to_numpy()
    seen = set(zip(launch_index.tolist(), frame["transport"], frame["ranks"].astype(int), program, method, strict=True))
    for i, *key in sorted(seen):
        rec = records[i]
        want = (rec["transport"], int(rec["ranks"]), rec["program"], rec.get("method", "probe"))
        if tuple(key) != want:
            raise RawFormatError(f"{raw}: rows {tuple(key)} under the launch record of {want}")
    return records, launch_index


def mpi_table(raw_files: Iterable[str | Path]) -> pd.DataFrame:
    """Tidy MPI samples: one row per node, repetition, launch, iteration and
    rank, with what each launch decided (oversubscription, binding) and what
    ran (collective algorithm selection and algorithm, synchronisation, tbf
    rate, and for the nodes transport the peers the ranks spanned besides
    ``node``)."""
    frames = []
    for raw in sorted(Path(p) for p in raw_files):
        frame = read_mpi_csv(raw)
        records, launch_index = _launch_of_each_row(raw, frame)
        per_launch: dict[tuple[int, str], dict[str, Any]] = {}
        cols: dict[str, list[Any]] = {c: [] for c in LAUNCH_COLUMNS}
        for index, bench in zip(launch_index.tolist(), frame["bench"], strict=True):
            if (index, bench) not in per_launch:
                per_launch[index, bench] = launch_columns(records[index], bench)
            for c in LAUNCH_COLUMNS:
                cols[c].append(per_launch[index, bench][c])
        frames.append(frame.assign(**cols, **_context(raw), nic_kind=_network(raw)["nic_kind"]))
    if not frames:
        raise RawFormatError("no raw files given")
    out = pd.concat(frames, ignore_index=True)
    out["late"] = out["late"].astype(bool)
    out["rate_mbit"] = pd.to_numeric(out["rate_mbit"], errors="coerce")
    return out


def latency_table(raw_files: Iterable[str | Path]) -> pd.DataFrame:
    """Tidy open-loop latency results: one row per node, repetition and
    cell, with the cell's raw latency buckets (``hist_low_ns``,
    ``hist_count``: lists) so that analysis can merge repetitions."""
    frames = []
    for raw in sorted(Path(p) for p in raw_files):
        frame = read_latency_csv(raw)
        buckets = read_histograms_csv(histograms_path(raw))
        frame = frame.assign(**_context(raw))
        frame["hist_low_ns"] = [buckets.get(int(o), ([], []))[0] for o in frame["order"]]
        frame["hist_count"] = [buckets.get(int(o), ([], []))[1] for o in frame["order"]]
        frames.append(frame)
    if not frames:
        raise RawFormatError("no raw files given")
    out = pd.concat(frames, ignore_index=True)
    out["achieved_over_offered"] = (out["rps"] / out["offered_rps"]).where(out["phase"] == "open")
    return out


# experiment -> the function that builds its tidy table (iolab.registry's ``tidy``).
TABLES: dict[str, Callable[[Iterable[str | Path]], pd.DataFrame]] = {
    name: globals()[e.tidy] for name, e in REGISTRY.items()
}


def unavailable_configurations(raw_files: Iterable[str | Path]) -> pd.DataFrame:
    """Presets each raw file reported as unavailable, with the reason."""
    rows = [{"raw_file": paths.relative(p), **u} for p in raw_files for u in read_unavailable(p)]
    return pd.DataFrame(rows, columns=["raw_file", "preset", "reason"])


def raw_files_under(root: str | Path, experiment: str) -> list[Path]:
    """Every raw file of ``experiment`` below ``root``
    (``<node>/<experiment>/<run key>/rep<N>.csv``)."""
    return sorted(p for p in Path(root).glob(f"*/{experiment}/*/rep*.csv") if _RAW_NAME.match(p.name))


# What a notebook opened by hand reads: the pipeline's latest tidy table when
# there is one, else the small raw dataset shipped with the repository.
AUTO = "auto"
REFERENCE = "data/reference"


def resolve(experiment: str, source: str | Path) -> Path:
    """``source`` as a path; ``"auto"`` is results/tables/<experiment>.parquet
    when the pipeline has built it, and the shipped reference data otherwise."""
    if str(source) != AUTO:
        return paths.resolve(source)
    table = paths.resolve(f"results/tables/{experiment}.parquet")
    return table if table.exists() else paths.resolve(REFERENCE)


def load(
    experiment: str, source: str | Path, include_emulated: bool = False, reps: Sequence[int] | None = None
) -> pd.DataFrame:
    """The tidy table for ``experiment`` from a Parquet file, a raw-data root
    such as ``data/reference`` (how notebooks open without measuring), or
    ``"auto"`` (``resolve``). ``reps``: only these repetitions (empty or
    None: all). Rows measured in an emulated (TCG) guest are labelled
    accel=tcg in the table and left out here unless ``include_emulated``:
    they are for functional tests, never for performance figures."""
    src = resolve(experiment, source)
    if src.suffix == ".parquet":
        table = pd.read_parquet(src)
    else:
        files = raw_files_under(src, experiment)
        if not files:
            raise RawFormatError(f"no {experiment} raw files under {src}")
        table = TABLES[experiment](files)
    if reps:
        table = table[table["rep"].isin(list(reps))].reset_index(drop=True)
        if table.empty:
            raise RawFormatError(f"{experiment}: no repetition {sorted(reps)} in {paths.relative(src)}")
    return table if include_emulated else performance_rows(table)


def describe_all(sources: dict[str, str]) -> str:
    """``describe`` for every table a notebook reads (skipping "": not run)."""
    return "\n".join(describe(e, src) for e, src in sources.items() if src)


def describe(experiment: str, source: str | Path) -> str:
    """One line saying which data a table holds: where it comes from, the
    nodes, when it was measured and at which commit (from the sidecars)."""
    src = resolve(experiment, source)
    if src.suffix == ".parquet":
        raws = table_raw_files(src)
        origin = "the pipeline's latest run" if str(source) == AUTO else "a pipeline table"
    else:
        raws = raw_files_under(src, experiment)
        origin = "the reference data shipped with iolab" if src == paths.resolve(REFERENCE) else "raw files"
    sides = [load_sidecar(r) for r in raws if Path(sidecar_for(r)).exists()]
    if not sides:
        return f"{experiment}: {paths.relative(src)} ({origin})"
    nodes = sorted({s["node"]["name"] for s in sides})
    started = sorted(s["started"] for s in sides)
    commits = sorted(
        {(s["git"].get("commit") or "none")[:7] + (" (dirty)" if s["git"].get("dirty") else "") for s in sides}
    )
    return (
        f"{experiment}: {paths.relative(src)} ({origin}); node {', '.join(nodes)}; measured "
        f"{started[0][:16]} to {started[-1][:16]} UTC; commit {', '.join(commits)}; "
        f"{len({int(s['settings']['rep']) for s in sides})} repetitions"
    )


def performance_rows(table: pd.DataFrame) -> pd.DataFrame:
    """Rows fit for performance figures: not from an emulated (TCG) guest."""
    if "accel" not in table.columns:
        return table
    return table[table["accel"] != "tcg"].reset_index(drop=True)


def table_raw_files(table: str | Path) -> list[Path]:
    """The raw files a Parquet table was built from (its .sources.json),
    resolved against the checkout the table lives in (<root>/results/tables/),
    which need not be this one. A table written by other means has no
    sources list: then there is nothing to trace, and the list is empty."""
    table = Path(table)
    root = table.resolve().parent.parent.parent
    return [p if (p := Path(r["raw"])).is_absolute() else root / p for r in table_sources(table)]


def table_sources(table: str | Path) -> list[dict[str, Any]]:
    """The entries of a table's .sources.json ([] when it has none)."""
    listing = sources_path(table)
    return json.loads(listing.read_text())["raw"] if listing.exists() else []


def sources_path(table: str | Path) -> Path:
    table = Path(table)
    return table.with_name(table.stem + ".sources.json")


def write_table(experiment: str, raw_files: Sequence[str | Path], output: str | Path) -> None:
    frame = TABLES[experiment](raw_files)
    with atomic.atomic_path(output) as tmp:
        frame.to_parquet(tmp, index=False)
    sources = [
        {
            "raw": paths.relative(p),
            "sha256": sha256(p),
            "provenance": paths.relative(sidecar_for(p)),
            # The latency buckets beside it, where the table reads them.
            **(
                {"histograms": paths.relative(h), "histograms_sha256": sha256(h)}
                if "histograms.csv" in REGISTRY[experiment].table_reads and (h := histograms_path(p)).exists()
                else {}
            ),
        }
        for p in sorted(map(Path, raw_files))
    ]
    atomic.write_json(sources_path(output), {"table": paths.relative(output), "raw": sources})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m iolab.tables", description="Build a tidy Parquet table from raw files."
    )
    ap.add_argument("experiment", choices=sorted(TABLES))
    ap.add_argument("--output", required=True, type=Path)
    ap.add_argument("raw", nargs="+", type=Path)
    args = ap.parse_args(argv)
    try:
        write_table(args.experiment, args.raw, args.output)
    except RawFormatError as e:
        print(f"iolab: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
