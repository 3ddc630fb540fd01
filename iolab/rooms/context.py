"""What every tidy table takes from a raw file besides its rows: the
provenance sidecar's context (node, kernel, CPUs, repetition, ...) once the
file is checked against its recorded fingerprints, and the table shape of an
experiment that may have been skipped on a node."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
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


# The context of a node an experiment was left out of (no raw file, so no
# sidecar): the keys ``context`` gives, empty.
LEFT_OUT_CONTEXT: dict[str, Any] = {
    "kind": "",
    "mitigations": "",
    "kernel": "",
    "cpus": 0,
    "cpu_model": "",
    "cpu_identity": "",
    "memory_kb": 0,
    "steal_share": float("nan"),
    "hypervisor": "",
    "vmm": "",
    "rep": 0,
    "round": 0,
    "accel": "",
    "raw_file": "",
}


def left_out_table(left_out: Mapping[str, str], columns: Sequence[str]) -> pd.DataFrame:
    """One row per node the workflow left the experiment out of when it
    planned (node -> reason; iolab.privilege): no values, the reason in
    ``skipped``, as a skipped raw file's row, but from no raw file."""
    rows = [
        {**{c: None for c in columns}, **LEFT_OUT_CONTEXT, "node": node, "skipped": reason}
        for node, reason in sorted(left_out.items())
    ]
    return pd.DataFrame(rows)


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


def cpu_identity(identity: dict[str, Any]) -> str:
    """A CPU's identity in one phrase: vendor, family, model, stepping,
    microcode, clock and cache, those recorded."""
    i = {k: str(v) for k, v in identity.items() if v not in (None, "")}
    parts = [
        " ".join(
            p
            for p in (
                i.get("vendor", ""),
                f"family {i['family']}" if "family" in i else "",
                f"model {i['model']}" if "model" in i else "",
                f"stepping {i['stepping']}" if "stepping" in i else "",
            )
            if p
        ),
        f"microcode {i['microcode']}" if "microcode" in i else "",
        f"{float(i['mhz']):.0f} MHz" if i.get("mhz", "").replace(".", "", 1).isdigit() else "",
        f"cache {i['cache']}" if "cache" in i else "",
    ]
    return ", ".join(p for p in parts if p)


def _float(x: Any) -> float:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else float("nan")


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
        # The CPU as /proc/cpuinfo identifies it, the memory, and the share of
        # CPU time the hypervisor stole during the measurement (sidecars from
        # before these were recorded: "", 0, NaN).
        "cpu_identity": cpu_identity((side.get("cpu") or {}).get("identity") or {}),
        "memory_kb": int((side.get("host") or {}).get("memory_kb") or 0),
        "steal_share": _float((side.get("cpu") or {}).get("steal")),
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
        # The launch it was measured on (its kernel's boot id) and when: a
        # run's identity for the verdicts about the machine kind.
        "boot_id": str((side.get("host") or {}).get("boot_id") or ""),
        "started": str(side.get("started") or ""),
    }


# The tools a sidecar records (iolab.provenance), as the paper names them.
TOOLS = (
    ("cc", "compiler"),
    ("liburing", "liburing"),
    ("mpi", "MPI"),
    ("python", "Python"),
    ("go", "Go"),
    ("bpftrace", "bpftrace"),
)


# Where the repository defines the io_uring kernel ABI its liburing's
# headers predate; each feature's comment there names its first release.
URING_COMPAT = "native/common/uring_compat.h"


def uring_compat_newest(path: Path = paths.REPO / URING_COMPAT) -> str:
    """The newest Linux release whose io_uring ABI the repository defines
    itself: the highest "(Linux X.Y)" its header's comments name."""
    found = [(int(m[1]), int(m[2])) for m in re.finditer(r"\(Linux (\d+)\.(\d+)\)", path.read_text())]
    return "{}.{}".format(*max(found)) if found else ""


def software(table: pd.DataFrame) -> str:
    """The tools a run measured with, as the sidecar of ``table``'s first
    raw file recorded them; "" where it cannot be read. liburing is said
    with what the repository supplies beyond its headers."""
    if "raw_file" not in table or not len(table):
        return ""
    try:
        side = load_sidecar(paths.REPO / str(table["raw_file"].iloc[0]))
    except (RawFormatError, OSError, ValueError):
        return ""
    tools = side.get("toolchain") or {}
    # A version line that names its tool already ("go version go1.26",
    # "bpftrace v0.17") is given as it is, not after the label again.
    said = {
        key: str(tools[key]) if str(tools[key]).lower().startswith(label.lower()) else f"{label} {tools[key]}"
        for key, label in TOOLS
        if tools.get(key)
    }
    lacks = sorted(k for k, v in (tools.get("liburing_features") or {}).items() if v is False)
    if "liburing" in said and lacks:
        said["liburing"] += (
            f", whose headers lack {', '.join(lacks)}: the newer io_uring kernel ABI the servers use (up to "
            f"Linux {uring_compat_newest()}) is defined by the repository itself ({URING_COMPAT}), and each "
            "server probes the running kernel for it"
        )
    return "; ".join(said.values())
