"""The system packages iolab installs, in groups, and which command needs
which: one table, which ./repro's commands install from, the README lists
and tests/test_readme.py holds the README to.

Debian 12's names (the one distribution this project tests). ./repro
itself installs the Python environment's two (python3, python3-venv,
``BOOTSTRAP``) before anything in Python can run; every other group is
installed here, by the command that needs it, and only when one of its
packages is missing. IOLAB_SKIP_APT=1: you installed them yourself.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .capabilities import RUNNERS


@dataclass(frozen=True)
class Group:
    name: str
    what: str
    packages: tuple[str, ...]


# What ./repro installs before it can run Python (repro's own list says the same).
BOOTSTRAP = ("python3", "python3-venv")

MEASURE = Group(
    "measure",
    "build and measure: the compiler, liburing, Open MPI, bpftrace, iproute2, perftest and its soft-RoCE "
    "provider, git (each raw file records its commit), and Debian's Go where no Go is on PATH",
    (
        "build-essential",
        "pkg-config",
        "liburing-dev",
        "openmpi-bin",
        "libopenmpi-dev",
        "bpftrace",
        "iproute2",
        "procps",
        "util-linux",
        "perftest",
        "ibverbs-providers",
        "git",
        "golang-go",
    ),
)
NODES = Group(
    "nodes",
    "node runners: the ssh client and server, SLURM and munge, QEMU with Debian's guest kernel and a static busybox",
    (
        "openssh-client",
        "openssh-server",
        "slurm-wlm",
        "munge",
        "qemu-system-x86",
        "linux-image-amd64",
        "busybox-static",
    ),
)
TESTS = Group(
    "tests",
    "the tests' own tools: Chromium and its driver (the notebooks and the site in a real browser) and "
    "pdftotext (the paper's text)",
    ("chromium", "chromium-driver", "poppler-utils"),
)
GROUPS = {g.name: g for g in (MEASURE, NODES, TESTS)}

# What a node of the inventory needs here, by its runner (iolab.capabilities;
# a node of this machine needs nothing beyond MEASURE); a node that drives
# peers reaches them with ssh.
RUNNER_PACKAGES: dict[str, tuple[str, ...]] = {name: r.packages for name, r in RUNNERS.items()}
PEERS = ("openssh-client",)


def for_nodes(nodes: Sequence[Mapping[str, Any]]) -> list[str]:
    """The packages an inventory's nodes need beyond MEASURE."""
    out: list[str] = []
    for node in nodes:
        out += RUNNER_PACKAGES.get(str(node.get("runner", "local")), ())
        if (node.get("mpi") or {}).get("peers") or (node.get("ib") or {}).get("peer"):
            out += PEERS
    return list(dict.fromkeys(out))


def for_run(nodes: Sequence[Mapping[str, Any]]) -> list[str]:
    """What a run of the workflow on these nodes needs: MEASURE and its nodes'."""
    return list(dict.fromkeys([*MEASURE.packages, *for_nodes(nodes)]))


def everything() -> list[str]:
    """Every group: what the test suite needs."""
    return list(dict.fromkeys(p for g in GROUPS.values() for p in g.packages))


class InstallError(RuntimeError):
    """Installing cannot go on; the message is one line saying what to do."""


def _wanted(packages: Iterable[str]) -> list[str]:
    # Debian's Go only where no Go toolchain is on PATH (a newer one may be).
    return [p for p in dict.fromkeys(packages) if not (p == "golang-go" and shutil.which("go"))]


def missing(packages: Iterable[str]) -> list[str]:
    """Those of ``packages`` dpkg does not list as installed."""
    wanted = _wanted(packages)
    if not wanted or shutil.which("dpkg-query") is None:
        return wanted
    res = subprocess.run(
        ["dpkg-query", "-W", "-f", "${Package} ${Status}\n", *wanted], capture_output=True, text=True, check=False
    )
    have = {ln.split()[0] for ln in res.stdout.splitlines() if ln.endswith(" install ok installed")}
    return [p for p in wanted if p not in have]


def install(packages: Iterable[str], why: str) -> None:
    """Install what of ``packages`` is missing, with apt-get (through sudo
    when not root); ``why`` names the command that needs them. Raises
    InstallError with one line when it cannot."""
    if os.environ.get("IOLAB_SKIP_APT") == "1":
        return
    absent = missing(packages)
    if not absent:
        return
    names = " ".join(absent)
    apt = shutil.which("apt-get")
    if apt is None:
        raise InstallError(
            f"{why} needs {names}, and apt-get is not here (iolab is tested on Debian 12): install them, "
            "then set IOLAB_SKIP_APT=1"
        )
    sudo: list[str] = []
    if os.geteuid() != 0:
        if shutil.which("sudo") is None:
            raise InstallError(
                f"{why} needs {names}: as root, run: apt-get install -y --no-install-recommends {names}; "
                "then run this command again"
            )
        sudo = ["sudo"]
    print(f"repro: {why} installs {names}", file=sys.stderr, flush=True)
    # sudo keeps no environment of ours: env sets apt's frontend under it.
    run = [*sudo, "env", "DEBIAN_FRONTEND=noninteractive", apt]
    for args in (["update", "-qq"], ["install", "-y", "-qq", "--no-install-recommends", *absent]):
        res = subprocess.run([*run, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False)
        if res.returncode != 0:
            last = (res.stderr.strip().splitlines() or ["(no message)"])[-1]
            raise InstallError(f"apt-get {args[0]} failed: {last}")
