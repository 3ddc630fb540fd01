"""Provenance sidecars: everything needed to interpret one raw file later."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from . import paths
from .hostfacts import HostFacts
from .nodes import Node

SIDECAR_SUFFIX = ".provenance.json"


def sidecar_for(raw: str | Path) -> Path:
    raw = Path(raw)
    return raw.with_name(raw.stem + SIDECAR_SUFFIX)


def utc_now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def git_state(repo: Path = paths.REPO) -> dict[str, Any]:
    """Commit and dirty flag of the working tree (None outside a checkout)."""

    def git(*args: str) -> str | None:
        try:
            res = subprocess.run(
                ["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=20, check=False
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        return res.stdout.strip() if res.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "dirty": bool(status) if status is not None else None}


def mitigation_state(vulns: Mapping[str, str], cmdline: str | None) -> str:
    """``off`` when the kernel was booted with mitigations=off, ``on`` when any
    vulnerability reports a mitigation, ``none-needed`` otherwise."""
    if cmdline and any(tok == "mitigations=off" for tok in cmdline.split()):
        return "off"
    if any(v.startswith("Mitigation") for v in vulns.values()):
        return "on"
    return "none-needed" if vulns else "unknown"


def build_info() -> dict[str, Any]:
    p = paths.NATIVE_BUILD / "build-info.json"
    try:
        return json.loads(p.read_text())
    except (OSError, ValueError):
        return {}


def steal_share(before: HostFacts, after: HostFacts | None) -> float | None:
    """The share of the node's CPU time the hypervisor stole between the
    two readings (None without both)."""
    a, b = before.cpu_jiffies, after.cpu_jiffies if after is not None else None
    if a is None or b is None or b[1] <= a[1]:
        return None
    return round((b[0] - a[0]) / (b[1] - a[1]), 6)


def capture(
    node: Node,
    experiment: str,
    settings: Mapping[str, Any],
    *,
    command: list[str] | None = None,
    placement: Mapping[str, Any] | None = None,
    started: str | None = None,
    extra: Mapping[str, Any] | None = None,
    facts: HostFacts,
    built_here: bool = True,
    facts_after: HostFacts | None = None,
) -> dict[str, Any]:
    """The sidecar for one raw file measured on ``node``, whose ``facts``
    were gathered on it (iolab.hostfacts) before the measurement and
    ``facts_after`` it (for the CPU time the hypervisor stole meanwhile);
    ``built_here``: its programs are this checkout's build (else the node
    built its own, with its ``cc``)."""
    build = build_info() if built_here else {}
    vulns = facts.vulnerabilities
    cmdline = facts.get("cmdline")
    host = {
        "hostname": facts.get("hostname"),
        # One running kernel: nodes that share it (namespaces, two names for
        # one machine) are not independent occasions (iolab.archive.study).
        "boot_id": facts.get("boot_id"),
        "kernel": facts.get("kernel"),
        "kernel_version": facts.get("kernel_version"),
        "machine": facts.get("machine"),
        "cmdline": cmdline,
        "memory_kb": facts.memory_kb,
    }
    cpu = {
        "model": facts.cpu_model,
        "count": facts.online_cpus,
        "allowed": facts.allowed_cpus,
        "identity": facts.cpu_identity,
        "steal": steal_share(facts, facts_after),
    }
    prov: dict[str, Any] = {
        "format": "iolab-provenance/1",
        "experiment": experiment,
        "node": node.as_dict(),
        "host": host,
        "cpu": {**cpu, "placement": dict(placement or {})},
        "mitigations": {"state": mitigation_state(vulns, cmdline), "vulnerabilities": vulns},
        "virtualization": {
            "kind": node.kind,
            "reason": node.kind_reason,
            "container": node.container,
            "hypervisor": node.hypervisor,
        },
        # Each NIC's driver and kind (an SR-IOV VF, paravirtual, emulated):
        # the HPC HUB claims count only on the seed's fabric.
        "network": {"nics": facts.nics, "nic_kind": facts.nic_summary},
        "toolchain": {
            "cc": build.get("cc_version") or facts.get("cc"),
            "cflags": build.get("cflags"),
            "liburing": build.get("liburing_version") if built_here else "built on the node",
            "liburing_features": build.get("liburing_features"),
            "mpi": facts.get("mpirun"),
            "python": sys.version.split()[0],
            "go": facts.get("go"),
            "bpftrace": facts.get("bpftrace"),
        },
        "git": git_state(),
        "settings": dict(settings),
        "command": command,
        "started": started or utc_now(),
        "finished": utc_now(),
    }
    if extra:
        prov.update(extra)
    return prov
