"""What every tidy table takes from a raw file besides its rows: the
provenance sidecar's context (node, kernel, CPUs, repetition, ...) once the
file is checked against its recorded fingerprints, and the table shape of an
experiment that may have been skipped on a node."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from .. import integrity, paths
from ..provenance import sidecar_for
from ..readers import RawFormatError, read_metadata


def skippable_table(
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
        frames.append(frame.assign(**context(raw), skipped=skipped, **(network(raw) if network else {})))
    if not frames:
        raise RawFormatError("no raw files given")
    return pd.concat(frames, ignore_index=True)


def load_sidecar(raw: str | Path) -> dict[str, Any]:
    side = sidecar_for(raw)
    try:
        return json.loads(Path(side).read_text())
    except FileNotFoundError as e:
        raise RawFormatError(f"{raw}: provenance sidecar {side.name} is missing") from e


def network(raw: Path) -> dict[str, Any]:
    """The node's NIC kinds (``nic_kind``: "" where not recorded), which the
    HPC HUB claims read, and for perftest the RDMA device's link layer."""
    side = load_sidecar(raw)
    devices = (side.get("ib") or {}).get("device") or {}
    mine = devices.get(side["node"]["name"]) or {}
    return {
        "nic_kind": str((side.get("network") or {}).get("nic_kind") or ""),
        "link_layer": next((str(v) for k, v in mine.items() if k.endswith(".link_layer")), ""),
    }


def context(raw: Path) -> dict[str, Any]:
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
