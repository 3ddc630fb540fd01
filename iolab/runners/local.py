"""Run a native program on this machine, capturing its output to a file."""

from __future__ import annotations

import ctypes
import signal
import subprocess
import time
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

    def run(self, argv: list[str], stdout_path: Path, timeout: float = 3600.0) -> RunResult:
        """Run ``argv`` with standard output written to ``stdout_path``.

        Raises RunError with the program's last stderr line on failure, so a
        user sees why (a refused flag, a missing kernel feature) in one line.
        """
        if not Path(argv[0]).exists():
            raise RunError(f"{argv[0]} not found: build it first (snakemake native/build/{Path(argv[0]).name})")
        start = time.monotonic()
        with open(stdout_path, "w") as out:
            try:
                proc = subprocess.run(argv, stdout=out, stderr=subprocess.PIPE, text=True,
                                      timeout=timeout, check=False,
                                      preexec_fn=_die_with_parent)
            except subprocess.TimeoutExpired as e:
                raise RunError(f"{Path(argv[0]).name} did not finish within {timeout:.0f} s") from e
        seconds = time.monotonic() - start
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["(no message)"])[-1]
            raise RunError(f"{Path(argv[0]).name} exited with status {proc.returncode}: {last}")
        return RunResult(argv=list(argv), returncode=proc.returncode, seconds=seconds, stderr=proc.stderr)
