"""Run a native program on this machine, capturing its output to a file."""

from __future__ import annotations

import ctypes
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path


PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    # If the launcher is killed (even with SIGKILL), the probe must not keep
    # running and writing into a file nobody will ever accept.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class RunError(RuntimeError):
    """A command failed; the message is one line naming the cause."""


@dataclass(frozen=True)
class RunResult:
    argv: list[str]
    returncode: int
    seconds: float
    stderr: str


class LocalRunner:
    name = "local"

    def run(self, argv: list[str], stdout_path: Path, timeout: float = 3600.0,
            error_line: Callable[[str], str] | None = None, env: Mapping[str, str] | None = None,
            name: str | None = None) -> RunResult:
        """Run ``argv`` with standard output written to ``stdout_path``.

        Raises RunError with one line on failure: by default the program's
        last stderr line, so a user sees why (a refused flag, a missing kernel
        feature); ``error_line`` picks the line for launchers such as mpirun
        whose last lines are banners. ``name`` labels the command in errors.
        """
        label = name or Path(argv[0]).name
        if not Path(argv[0]).exists():
            raise RunError(f"{argv[0]} not found: build it first (snakemake native/build/{Path(argv[0]).name})")
        start = time.monotonic()
        with open(stdout_path, "w") as out:
            try:
                proc = subprocess.run(argv, stdout=out, stderr=subprocess.PIPE, text=True,
                                      timeout=timeout, check=False, env=None if env is None else dict(env),
                                      preexec_fn=_die_with_parent)
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
