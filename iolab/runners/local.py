"""Run a native program on this machine, capturing its output to a file."""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .. import hostfacts, live, paths
from ..capabilities import RUNNER_CAPABILITIES
from ..inventory import NodeEntry
from .base import RunError, RunResult

PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    # If the launcher is killed (even with SIGKILL), the probe must not keep
    # running and writing into a file nobody will ever accept.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class LocalRunner:
    """This machine."""

    name = "local"
    name = "local"
    capabilities = RUNNER_CAPABILITIES[name]
    mpi_launcher = "mpirun"
    # A session's scratch directory (session()), else one of this runner's own.
    _scratch: Path | None = None
    _own_scratch: tempfile.TemporaryDirectory[str] | None = None

    @staticmethod
    def skip_reason(entry: NodeEntry) -> str | None:
        """This machine can always run."""
        return None

    def run(
        self,
        argv: list[str],
        stdout_path: Path,
        timeout: float = 3600.0,
        error_line: Callable[[str], str] | None = None,
        env: Mapping[str, str] | None = None,
        name: str | None = None,
    ) -> RunResult:
        """Run ``argv`` with standard output written to ``stdout_path``.

        Raises RunError with one line on failure: by default the program's
        last stderr line, so a user sees why (a refused flag, a missing kernel
        feature); ``error_line`` picks the line for launchers such as mpirun
        whose last lines are banners. ``name`` labels the command in errors.
        ``env``: variables added to the environment for this command.
        """
        label = name or Path(argv[0]).name
        if not Path(argv[0]).exists() and shutil.which(argv[0]) is None:
            raise RunError(f"{argv[0]} not found: build it first (snakemake native/build/{Path(argv[0]).name})")
        start = time.monotonic()
        with open(stdout_path, "w") as out:
            try:
                proc = subprocess.run(
                    argv,
                    stdout=out,
                    stderr=subprocess.PIPE,
                    text=True,
                    timeout=timeout,
                    check=False,
                    env=None if env is None else {**os.environ, **env},
                    preexec_fn=_die_with_parent,
                )
            except subprocess.TimeoutExpired as e:
                raise RunError(f"{label} did not finish within {timeout:.0f} s") from e
        seconds = time.monotonic() - start
        if proc.returncode != 0:
            if error_line is not None:
                last = error_line(proc.stderr)
            else:
                last = (proc.stderr.strip().splitlines() or ["(no message)"])[-1]
            raise RunError(f"{label} exited with status {proc.returncode}: {last}")
        return RunResult(argv=list(argv), returncode=proc.returncode, seconds=seconds, stderr=proc.stderr)

    # The same interface as the remote runners (iolab/runners/ssh.py).
    @contextmanager
    def session(self, programs: Sequence[str]) -> Iterator[LocalRunner]:
        """Programs are built by the measurement rule itself; nothing to set up."""
        with live.tempdir("iolab-run-") as tmp:
            self._scratch = Path(tmp)
            try:
                yield self
            finally:
                self._scratch = None

    def exe(self, program: str) -> str:
        return str(paths.NATIVE_BUILD / program)

    def popen(self, argv: list[str]) -> subprocess.Popen[str]:
        return subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_die_with_parent
        )

    def terminate(self, proc: subprocess.Popen[str]) -> None:
        proc.send_signal(signal.SIGTERM)

    def read_file(self, path: str) -> str:
        return Path(path).read_text()

    @staticmethod
    def shell(script: str, timeout: float = 600.0) -> subprocess.CompletedProcess[str]:
        """Run a shell script here (the ssh runner's ``shell`` on this machine)."""
        try:
            return subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired as e:
            raise RunError(f"no answer within {timeout:.0f} s from: {script}") from e

    @staticmethod
    def write_file(path: str, text: str, mode: int = 0o644) -> None:
        Path(path).write_text(text)
        Path(path).chmod(mode)

    def scratch(self, name: str) -> str:
        base = self._scratch
        if base is None:
            # Outside a session: a private directory that lives as long as this runner.
            if self._own_scratch is None:
                self._own_scratch = live.tempdir("iolab-run-")
            base = Path(self._own_scratch.name)
        return str(base / name)

    def facts(self) -> hostfacts.HostFacts:
        try:
            return hostfacts.gather()
        except RuntimeError as e:
            raise RunError(f"this machine: {e}") from e

    def provenance(self) -> dict[str, Any]:
        return {}


class SlurmRunner(LocalRunner):
    """A SLURM node: its jobs already run on the node the executor placed
    them on, as local ones; MPI ranks start with srun inside the job."""

    name = "slurm"
    name = "slurm"
    capabilities = RUNNER_CAPABILITIES[name]
    mpi_launcher = "srun"
