"""Dependency checks with the exact package to install.

    python -m iolab.deps check build paper

Each missing dependency prints one line: what is missing and the apt (and
conda-forge) package that provides it. Exit status 1 if anything required is
missing.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Dependency:
    what: str
    apt: str
    conda: str
    present: Callable[[], bool]


def _exe(name: str) -> Callable[[], bool]:
    return lambda: shutil.which(name) is not None


def _module(name: str) -> Callable[[], bool]:
    return lambda: importlib.util.find_spec(name) is not None


def _header_links(header: str, lib: str) -> Callable[[], bool]:
    """True if ``#include <header>`` compiles and links with ``-l<lib>``."""

    def check() -> bool:
        cc = os.environ.get("CC", "cc")
        if shutil.which(cc) is None:
            return False
        with tempfile.TemporaryDirectory() as d:
            src = os.path.join(d, "t.c")
            with open(src, "w") as f:
                f.write(f"#include <{header}>\nint main(void){{return 0;}}\n")
            res = subprocess.run(
                [cc, src, "-o", os.path.join(d, "t"), f"-l{lib}"], capture_output=True, timeout=60, check=False
            )
        return res.returncode == 0

    return check


GROUPS: dict[str, list[Dependency]] = {
    "build": [
        Dependency("C compiler 'cc'", "build-essential", "c-compiler", _exe("cc")),
        Dependency("'make'", "make", "make", _exe("make")),
        Dependency("'pkg-config'", "pkg-config", "pkg-config", _exe("pkg-config")),
        Dependency(
            "liburing headers and library (liburing.h, -luring)",
            "liburing-dev",
            "liburing",
            _header_links("liburing.h", "uring"),
        ),
    ],
    "paper": [
        Dependency("Python module 'typst'", "the Python lock (./repro setup)", "typst", _module("typst")),
        Dependency("Python module 'papermill'", "the Python lock (./repro setup)", "papermill", _module("papermill")),
    ],
    "mpi": [
        Dependency("'mpicc'", "libopenmpi-dev", "openmpi", _exe("mpicc")),
        Dependency("'mpirun'", "openmpi-bin", "openmpi", _exe("mpirun")),
    ],
    "netns": [
        Dependency("'ip' (iproute2)", "iproute2", "iproute2", _exe("ip")),
    ],
    "trace": [
        Dependency("'bpftrace'", "bpftrace", "bpftrace", _exe("bpftrace")),
    ],
    "ib": [
        Dependency(
            "perftest's 'ib_send_lat' and 'ib_send_bw'",
            "perftest",
            "not packaged: build linux-rdma/perftest",
            lambda: _exe("ib_send_lat")() and _exe("ib_send_bw")(),
        ),
    ],
    "ssh": [
        Dependency("'ssh'", "openssh-client", "openssh", _exe("ssh")),
    ],
    "vm": [
        Dependency("'qemu-system-x86_64'", "qemu-system-x86", "qemu", _exe("qemu-system-x86_64")),
        Dependency("'busybox' (static)", "busybox-static", "busybox", _exe("busybox")),
    ],
    "slurm": [
        Dependency("'sbatch' (SLURM client)", "slurm-client", "slurm", _exe("sbatch")),
    ],
}


def missing(groups: Sequence[str]) -> list[str]:
    """One line per missing dependency in ``groups``."""
    lines = []
    for g in groups:
        for dep in GROUPS[g]:
            if not dep.present():
                how = dep.apt if dep.apt.startswith("the ") else f"apt-get install {dep.apt}"
                lines.append(f"missing dependency: {dep.what}; install it with: {how} (conda-forge: {dep.conda})")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m iolab.deps", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("action", choices=["check"])
    ap.add_argument("groups", nargs="+", choices=sorted(GROUPS))
    args = ap.parse_args(argv)
    lines = missing(args.groups)
    for line in lines:
        print(line, file=sys.stderr)
    return 1 if lines else 0


if __name__ == "__main__":
    sys.exit(main())
