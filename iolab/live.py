"""This checkout's processes: measurements still running, and what killed
runs left behind.

Killing only Snakemake (the OOM killer does) leaves its measurement job
running; a new run started beside it would measure the same thing on the
same CPUs, and keep a result disturbed by the other. Every measurement
(``iolab.measure``, however Snakemake was started) refuses to start while
another of this checkout runs, and the workflow refuses before planning
(``before_run``, however Snakemake was started):

    python -m iolab.live check [DIR]      # exit 1 with one line naming the PID

A run killed hard (SIGKILL, the OOM killer, a reboot) also leaves
Snakemake's lock, which ``before_run`` removes once nothing of a run is
alive, and temporary directories; each one's name carries its creator's
PID (``tempdir``), and ``remove_stale_tempdirs`` removes those of this
user whose creator is gone.

Programs a measurement starts get a temporary directory of their own
(``private_tmp``): Open MPI names its session directory after the host
(``ompi.<host>.<uid>``) and bpftrace its kernel headers after the kernel,
so in the shared one another user could make those folders first and have
them used.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from . import paths
from .native import program_sources

# What a measurement runs: the entry point, the native programs, Open MPI's launchers.
MEASURING = (
    *program_sources(),
    "mpirun",
    "orterun",
    "prterun",
    "orted",
    "prted",
    "bpftrace",
    "ib_send_lat",
    "ib_send_bw",
)
# Temporary directories iolab makes: a prefix, then the creating PID, then
# "-" (Open MPI's session directories of the netns hosts, from before its
# programs had a directory of their own, too).
_STALE = re.compile(r"^(?:iolab-(?:run|mpi|vm|nb|tmp)-|iol|ompi\.iol)(\d+)-")
# The shared temporary directory, as this process found it: iolab's own
# directories go there (named for their creator, each made private by
# mkdtemp), however TMPDIR is set for the programs a measurement starts.
SHARED_TMP = Path(tempfile.gettempdir())
# Where the programs a measurement starts put their temporary files: the
# C library's and Python's TMPDIR (bpftrace's kernel headers, anything
# else), Open MPI 4's session directory base (orte_tmpdir_base), Open MPI
# 5's (PRRTE's prte_tmpdir_base) and PMIx's server and system directories.
# Debian 12's Open MPI 4.1.4 moves its session directory (ompi.<host>.<uid>,
# with mpirun's contact file, hwloc's topology and PMIx's stores in it) for
# TMPDIR alone and for OMPI_MCA_orte_tmpdir_base alone; the prte names are
# Open MPI 5's, and PMIx follows the session directory there (each name
# set alone, where the session directory appeared).
PRIVATE_TMP_VARIABLES = (
    "TMPDIR",
    "OMPI_MCA_orte_tmpdir_base",
    "OMPI_MCA_prte_tmpdir_base",
    "PRTE_MCA_prte_tmpdir_base",
    "PMIX_SERVER_TMPDIR",
    "PMIX_SYSTEM_TMPDIR",
)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _ancestors(pid: int | None = None) -> set[int]:
    """A process (default: this one) and the ones that started it."""
    out, pid = set(), os.getpid() if pid is None else pid
    while pid > 1:
        out.add(pid)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            pid = int(stat[stat.rindex(")") + 2 :].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return out


def measurements(checkout: Path = paths.REPO) -> Iterator[tuple[int, str]]:
    """(pid, command line) of every measurement running for ``checkout``:
    the measurement entry point or a program it runs, started in the
    checkout or from its build. A program started by a measurement already
    named is part of it and not named again (its probes come and go)."""
    checkout = checkout.resolve()
    mine = _ancestors()
    found: dict[int, str] = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) in mine:
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            cwd = Path(os.readlink(proc / "cwd"))
        except OSError:
            continue
        words = [a.decode(errors="replace") for a in argv if a]
        if not words:
            continue
        measuring = ("iolab.measure" in words) or Path(words[0]).name in MEASURING
        here = cwd == checkout or str(checkout) in words[0]
        if measuring and here:
            found[int(proc.name)] = " ".join(words)
    for pid, command in sorted(found.items()):
        if not (_ancestors(pid) - {pid}) & found.keys():
            yield pid, command


def tempdir(prefix: str) -> tempfile.TemporaryDirectory[str]:
    """A temporary directory (mode 0700) in the shared one, named for this
    process, so that the next run can tell whether its creator still runs."""
    return tempfile.TemporaryDirectory(prefix=f"{prefix}{os.getpid()}-", dir=SHARED_TMP)


def private_tmp_env(directory: str | Path) -> dict[str, str]:
    """The variables that send a program's temporary files to ``directory``
    (PRIVATE_TMP_VARIABLES); refuses a directory that is not this user's
    alone (mode 0700), which would defeat the point."""
    info = os.lstat(directory)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or stat.S_IMODE(info.st_mode) & 0o077:
        raise PermissionError(f"{directory} is not a directory of this user's alone (mode 0700)")
    return {name: str(directory) for name in PRIVATE_TMP_VARIABLES}


@contextlib.contextmanager
def private_tmp() -> Iterator[Path]:
    """A temporary directory of this process's own (``tempdir``), set as
    TMPDIR and Open MPI's and PMIx's bases (PRIVATE_TMP_VARIABLES) for
    every program it starts, and as Python's; the environment is restored
    and the directory removed when the block ends."""
    with tempdir("iolab-tmp-") as directory:
        env = private_tmp_env(directory)
        before = {name: os.environ.get(name) for name in env}
        python_before = tempfile.tempdir
        os.environ.update(env)
        tempfile.tempdir = directory
        try:
            yield Path(directory)
        finally:
            tempfile.tempdir = python_before
            for name, value in before.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value


def remove_stale_tempdirs(root: Path | None = None) -> tuple[list[Path], list[str]]:
    """Remove this user's temporary directories (iolab's, its namespaces',
    and Open MPI's session directories of those namespaces' hosts) whose
    creating process is gone. Returns those removed, and one line for each
    that could not be removed (it is still there); a directory of another
    user is not this run's to remove, and is left alone."""
    root = Path(root or SHARED_TMP)
    removed, failed = [], []
    for entry in root.iterdir() if root.is_dir() else []:
        m = _STALE.match(entry.name)
        if not m or pid_alive(int(m.group(1))):
            continue
        try:
            info = entry.lstat()
        except FileNotFoundError:
            continue
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
            continue
        why = _remove_tree(entry)
        if os.path.lexists(entry):
            failed.append(f"could not remove {entry}, left by process {m.group(1)}: {why or 'it is still there'}")
        else:
            removed.append(entry)
    return removed, failed


def _remove_tree(path: Path) -> str:
    """Remove ``path`` and what is in it, as far as this user may; the first
    thing that could not be removed, and why ("": nothing failed)."""
    errors: list[str] = []

    def note(_function: object, where: str, exc: Any) -> None:
        errors.append(f"{where}: {getattr(exc[1], 'strerror', None) or exc[1]}")

    shutil.rmtree(path, onerror=note)
    return errors[0] if errors else ""


def beside(checkout: Path = paths.REPO) -> str | None:
    """Why a measurement of ``checkout`` must not start now: one line naming
    a measurement of it that is running (None: none is)."""
    for pid, command in measurements(checkout):
        return (
            f"a measurement of this checkout is still running (pid {pid}: {command[:120]}); "
            f"a new one would measure beside it: wait for it to end, or stop it with: kill {pid}"
        )
    return None


def _is_snakemake(words: list[str]) -> bool:
    """Whether a command line runs Snakemake (its script, or python -m snakemake)."""
    if Path(words[0]).name == "snakemake":
        return True
    rest = words[1:]
    return Path(words[0]).name.startswith("python") and (
        rest[:2] == ["-m", "snakemake"] or (bool(rest) and Path(rest[0]).name == "snakemake")
    )


def snakemake_runs(checkout: Path = paths.REPO) -> Iterator[int]:
    """The pid of every Snakemake working in ``checkout`` but this process
    and the ones that started it."""
    checkout = checkout.resolve()
    mine = _ancestors()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) in mine:
            continue
        try:
            words = [a.decode(errors="replace") for a in (proc / "cmdline").read_bytes().split(b"\0") if a]
            cwd = Path(os.readlink(proc / "cwd"))
        except OSError:
            continue
        if words and cwd == checkout and _is_snakemake(words):
            yield int(proc.name)


# What a run killed hard leaves of Snakemake's lock (.snakemake/locks/).
LOCKS = ".snakemake/locks"


def before_run(checkout: Path = paths.REPO) -> str | None:
    """What the workflow does before a run of ``checkout`` is planned: one
    line refusing it beside another Snakemake or a measurement still
    running there, else None, after removing what killed runs left (their
    lock, saying so, and their temporary directories). A live run is never
    unlocked."""
    for pid in snakemake_runs(checkout):
        return f"iolab: a snakemake run (pid {pid}) is already working in {checkout}; wait for it, or stop it first"
    why = beside(checkout)
    if why:
        return f"iolab: {why}"
    _, failed = remove_stale_tempdirs()
    for line in failed:
        print(f"iolab: {line}", file=sys.stderr)
    locks = sorted((checkout / LOCKS).glob("*.lock"))
    for lock in locks:
        lock.unlink(missing_ok=True)
    if locks:
        print(
            "iolab: removed the lock of a run that was killed (no snakemake process holds it); "
            "incomplete jobs run again",
            file=sys.stderr,
        )
    return None


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] != "check":
        print("usage: python -m iolab.live check [DIR]", file=sys.stderr)
        return 2
    why = beside(Path(args[1]) if len(args) > 1 else paths.REPO)
    if why:
        print(f"iolab: {why}", file=sys.stderr)
        return 1
    # Nothing of this checkout runs: what killed runs left may go.
    _, failed = remove_stale_tempdirs()
    for line in failed:
        print(f"iolab: {line}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
