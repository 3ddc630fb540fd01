"""A missing dependency is named with the exact package to install."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import REPO, snakemake, tool_env


def path_without(tmp_path: Path, *missing: str) -> str:
    """A PATH holding links to the usual tools except ``missing``."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in (
        "bash",
        "sh",
        "env",
        "make",
        "pkg-config",
        "cat",
        "head",
        "cut",
        "mkdir",
        "mv",
        "rm",
        "cmp",
        "uname",
        "mktemp",
        "tee",
        "touch",
        "printf",
        "git",
        "cc",
        "gcc",
        "as",
        "ld",
        "collect2",
        "dirname",
        "readlink",
        "sed",
        "grep",
        # the SLURM executor plugin runs `which` when snakemake loads it
        "which",
    ):
        if tool in missing:
            continue
        found = shutil.which(tool)
        if found:
            (bindir / tool).symlink_to(found)
    return str(bindir)


def test_missing_compiler_names_build_essential(tmp_path: Path) -> None:
    env = dict(os.environ, PATH=path_without(tmp_path, "cc", "gcc"))
    res = subprocess.run(
        [sys.executable, "-m", "iolab.deps", "check", "build"], env=env, capture_output=True, text=True, cwd=REPO
    )
    assert res.returncode == 1
    assert "missing dependency: C compiler 'cc'; install it with: apt-get install build-essential" in res.stderr


def test_missing_liburing_names_liburing_dev(tmp_path: Path) -> None:
    # A compiler that cannot see the system's headers and libraries stands in
    # for a machine without liburing-dev.
    fake = tmp_path / "fakecc"
    fake.write_text(f'#!/bin/sh\nexec {shutil.which("cc")} --sysroot=/nonexistent "$@"\n')
    fake.chmod(0o755)
    env = dict(os.environ, CC=str(fake))
    res = subprocess.run(
        [sys.executable, "-m", "iolab.deps", "check", "build"], env=env, capture_output=True, text=True, cwd=REPO
    )
    assert res.returncode == 1
    assert (
        "missing dependency: liburing headers and library (liburing.h, -luring); "
        "install it with: apt-get install liburing-dev"
    ) in res.stderr
    # The native build's own configure step says the same thing.
    out = tmp_path / "build"
    res = subprocess.run(
        ["bash", str(REPO / "native" / "configure.sh"), str(out)],
        env=dict(os.environ, CC=str(fake)),
        capture_output=True,
        text=True,
    )
    assert res.returncode == 1
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "apt-get install" in lines[0], res.stderr


def test_pipeline_stops_with_the_package_name(workflow: Path, tmp_path: Path) -> None:
    env = tool_env()
    env["PATH"] = path_without(tmp_path, "cc", "gcc") + os.pathsep + str(Path(sys.executable).parent)
    res = snakemake(workflow, "--cores", "1", "native/build/cost-probe", env=env)
    assert res.returncode != 0
    assert "apt-get install build-essential" in res.stdout + res.stderr
