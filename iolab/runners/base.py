"""What every runner is: one typed protocol, and the capabilities a runner
declares. Callers ask for a capability, never for a runner class."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from .. import hostfacts
from ..capabilities import Capability
from ..inventory import NodeEntry


class RunError(RuntimeError):
    """A command failed; the message is one line naming the cause."""


def build_failure(output: str, status: int) -> str:
    """One line saying why ``make`` failed: the Makefile's "missing
    dependency:" line where it printed one, else make's last line."""
    lines = [ln.strip() for ln in output.strip().splitlines() if ln.strip()]
    missing = [ln for ln in lines if ln.startswith("missing dependency:")]
    return missing[0] if missing else lines[-1] if lines else f"make exited with status {status}"


@dataclass(frozen=True)
class RunResult:
    argv: list[str]
    returncode: int
    seconds: float
    stderr: str


@runtime_checkable
class Runner(Protocol):
    """How commands reach one node. Every method exists on every runner; a
    runner without a capability raises RunError with one line from the
    methods that need it."""

    name: str
    capabilities: frozenset[Capability]
    # How MPI ranks are started on the node: "mpirun", or "srun" inside a
    # SLURM job's allocation.
    mpi_launcher: str

    @staticmethod
    def skip_reason(entry: NodeEntry) -> str | None:
        """Why a node of this runner cannot run here at all (None: it can),
        checked when the workflow plans, before anything runs."""

    def session(self, programs: Sequence[str]) -> AbstractContextManager[Runner]:
        """Make ``programs`` runnable on the node (build them there), for the
        duration of the block; clean up after."""

    def run(
        self,
        argv: list[str],
        stdout_path: Path,
        timeout: float = 3600.0,
        error_line: Callable[[str], str] | None = None,
        env: Mapping[str, str] | None = None,
        name: str | None = None,
    ) -> Any:
        """Run to completion with standard output in ``stdout_path`` (here);
        RunError with one line on failure."""

    def exe(self, program: str) -> str:
        """The path of a native program on the node."""

    def popen(self, argv: list[str]) -> subprocess.Popen[str]:
        """Start a long-running process (SERVERS)."""

    def terminate(self, proc: subprocess.Popen[str]) -> None:
        """Ask a process from ``popen`` to stop (SIGTERM on the node)."""

    def read_file(self, path: str) -> str: ...

    def write_file(self, path: str, text: str, mode: int = 0o644) -> None: ...

    def scratch(self, name: str) -> str:
        """A path on the node, inside the session's private directory."""

    def shell(self, script: str, timeout: float = 600.0) -> subprocess.CompletedProcess[str]:
        """Run a shell script on the node."""

    def facts(self) -> hostfacts.HostFacts:
        """The node's own view of itself (kernel, CPU, mitigations, kind...)."""

    def provenance(self) -> dict[str, Any]:
        """What a raw file's sidecar records about how the node was reached."""
