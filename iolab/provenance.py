"""Provenance sidecars: everything needed to interpret one raw file later."""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import shutil
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
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text(errors="replace").strip()
    except OSError:
        return None


def _first_line(argv: list[str]) -> str | None:
    if not shutil.which(argv[0]):
        return None
    try:
        res = subprocess.run(argv, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    out = (res.stdout or res.stderr).strip().splitlines()
    return out[0] if out else None


def git_state(repo: Path = paths.REPO) -> dict[str, Any]:
    """Commit and dirty flag of the working tree (None outside a checkout)."""
    def git(*args: str) -> str | None:
        try:
            res = subprocess.run(["git", "-C", str(repo), *args], capture_output=True,
                                 text=True, timeout=20, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return res.stdout.strip() if res.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "dirty": bool(status) if status is not None else None}


def mitigations() -> dict[str, str]:
    d = Path("/sys/devices/system/cpu/vulnerabilities")
    out: dict[str, str] = {}
    if d.is_dir():
        for f in sorted(d.iterdir()):
            v = _read(str(f))
            if v is not None:
                out[f.name] = v
    return out


def mitigation_state(vulns: Mapping[str, str], cmdline: str | None) -> str:
    """``off`` when the kernel was booted with mitigations=off, ``on`` when any
    vulnerability reports a mitigation, ``none-needed`` otherwise."""
    if cmdline and any(tok == "mitigations=off" for tok in cmdline.split()):
        return "off"
    if any(v.startswith("Mitigation") for v in vulns.values()):
        return "on"
    return "none-needed" if vulns else "unknown"


def cpu_model() -> str | None:
    info = _read("/proc/cpuinfo") or ""
    for line in info.splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or None


def build_info() -> dict[str, Any]:
    p = paths.NATIVE_BUILD / "build-info.json"
    try:
        return json.loads(p.read_text())
    except (OSError, ValueError):
        return {}


def capture(
    node: Node,
    experiment: str,
    settings: Mapping[str, Any],
    *,
    command: list[str] | None = None,
    placement: Mapping[str, Any] | None = None,
    started: str | None = None,
    extra: Mapping[str, Any] | None = None,
    facts: HostFacts | None = None,
) -> dict[str, Any]:
    """The sidecar for one raw file measured on ``node``: this machine, or
    the node ``facts`` were gathered on (iolab.hostfacts)."""
    build = build_info()
    if facts is None:
        uname = os.uname()
        vulns = mitigations()
        cmdline = _read("/proc/cmdline")
        host = {"hostname": uname.nodename, "kernel": uname.release, "kernel_version": uname.version,
                "machine": uname.machine, "cmdline": cmdline}
        cpu = {"model": cpu_model(), "count": os.cpu_count(), "allowed": sorted(os.sched_getaffinity(0))}
        cc, mpi = build.get("cc_version") or _first_line(["cc", "--version"]), _first_line(["mpirun", "--version"])
    else:
        vulns = facts.vulnerabilities
        cmdline = facts.get("cmdline")
        host = {"hostname": facts.get("hostname"), "kernel": facts.get("kernel"),
                "kernel_version": facts.get("kernel_version"), "machine": facts.get("machine"),
                "cmdline": cmdline}
        cpu = {"model": facts.cpu_model, "count": facts.cpu_count, "allowed": None}
        cc, mpi = facts.get("cc"), facts.get("mpirun")
        build = {}  # the node built its own programs; its compiler is in ``cc``
    prov: dict[str, Any] = {
        "format": "iolab-provenance/1",
        "experiment": experiment,
        "node": node.as_dict(),
        "host": host,
        "cpu": {**cpu, "placement": dict(placement or {})},
        "mitigations": {"state": mitigation_state(vulns, cmdline), "vulnerabilities": vulns},
        "virtualization": {"kind": node.kind, "reason": node.kind_reason,
                           "container": node.container, "hypervisor": node.hypervisor},
        "toolchain": {
            "cc": cc,
            "cflags": build.get("cflags"),
            "liburing": build.get("liburing_version") if facts is None else "built on the node",
            "liburing_features": build.get("liburing_features"),
            "mpi": mpi,
            "python": sys.version.split()[0],
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
