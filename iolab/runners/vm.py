"""The vm runner: each command boots a QEMU guest that runs it once
(iolab.runners.qemu). The same protocol as every runner (iolab.runners.base);
it declares no capability beyond running a command to completion: echo and
MPI need a network between guest and host, and a guest keeps no files from
one command to the next, so the methods that need those raise one line."""

from __future__ import annotations

import shlex
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .. import hostfacts, paths
from ..capabilities import RUNNER_CAPABILITIES, Capability
from ..inventory import NodeEntry
from . import qemu as vm
from .base import RunError, RunResult


class VmRunner:
    name = "vm"
    name = "vm"
    capabilities: frozenset[Capability] = RUNNER_CAPABILITIES[name]
    mpi_launcher = "mpirun"

    @staticmethod
    def skip_reason(entry: NodeEntry) -> str | None:
        """Why a guest cannot start here (None: it can)."""
        return vm.skip_reason(entry)

    def __init__(self, entry: NodeEntry) -> None:
        node = self.entry = entry
        self.node = node.name
        self.accel = node.vm.accel
        self.cmdline = node.vm.cmdline
        self.memory_mb = node.vm.memory_mb
        self.cpus = node.vm.cpus
        self.kernel = vm.guest_kernel(node.vm.kernel)
        self.programs: list[str] = []

    @contextmanager
    def session(self, programs: Sequence[str]) -> Iterator[VmRunner]:
        reason = vm.skip_reason(self.entry)
        if reason:
            raise RunError(f"node {self.node}: {reason}")
        self.programs = [str(paths.NATIVE_BUILD / p) for p in programs]
        yield self

    def exe(self, program: str) -> str:
        return f"/iolab/{program}"

    def _guest(self, command: Sequence[str], timeout: float) -> vm.GuestResult:
        try:
            return vm.run_in_guest(
                self.programs,
                command,
                accel=self.accel,
                kernel=self.kernel,
                cmdline=self.cmdline,
                memory_mb=self.memory_mb,
                cpus=self.cpus,
                timeout=timeout,
            )
        except vm.VmError as e:
            raise RunError(f"node {self.node}: {e}") from e

    def run(
        self,
        argv: list[str],
        stdout_path: Path,
        timeout: float = 3600.0,
        error_line: Callable[[str], str] | None = None,
        env: Mapping[str, str] | None = None,
        name: str | None = None,
    ) -> RunResult:
        local = str(paths.NATIVE_BUILD) + "/"
        guest_argv = [self.exe(a[len(local) :]) if a.startswith(local) else a for a in argv]
        if env:  # variables added to the guest's environment for this command
            guest_argv = ["/bin/busybox", "env", *(f"{k}={v}" for k, v in env.items()), *guest_argv]
        start = time.monotonic()
        res = self._guest(guest_argv, timeout)
        Path(stdout_path).write_text(res.stdout)
        if res.status != 0:
            last = error_line(res.stderr) if error_line else (res.stderr.splitlines() or ["(no message)"])[-1]
            raise RunError(
                f"node {self.node}: {name or Path(argv[0]).name} exited with status {res.status} in the guest: {last}"
            )
        return RunResult(argv=guest_argv, returncode=0, seconds=time.monotonic() - start, stderr=res.stderr)

    def facts(self) -> hostfacts.HostFacts:
        res = self._guest(["/bin/busybox", "sh", "-c", hostfacts.SCRIPT], timeout=600)
        return hostfacts.gather(lambda _script: subprocess.CompletedProcess([], res.status, res.stdout, res.stderr))

    def describe(self) -> dict[str, Any]:
        return {
            "accel": self.accel,
            "kernel": self.kernel,
            "cmdline": self.cmdline,
            "memory_mb": self.memory_mb,
            "cpus": self.cpus,
            "performance": self.accel != "tcg",
        }

    def provenance(self) -> dict[str, Any]:
        # "accel": tcg rows are functional tests, kept out of performance tables.
        return {"accel": self.accel, "vm": self.describe()}

    def _cannot(self, what: str) -> RunError:
        return RunError(f"node {self.node}: a vm node cannot {what} (each command boots its own guest)")

    def popen(self, argv: list[str]) -> subprocess.Popen[str]:
        raise self._cannot("host a long-running server")

    def terminate(self, proc: subprocess.Popen[str]) -> None:
        raise self._cannot("host a long-running server")

    def read_file(self, path: str) -> str:
        raise self._cannot("keep files between commands")

    def write_file(self, path: str, text: str, mode: int = 0o644) -> None:
        raise self._cannot("keep files between commands")

    def scratch(self, name: str) -> str:
        raise self._cannot("keep files between commands")

    def shell(self, script: str, timeout: float = 600.0) -> subprocess.CompletedProcess[str]:
        res = self._guest(["/bin/busybox", "sh", "-c", script], timeout)
        return subprocess.CompletedProcess(shlex.split("guest sh"), res.status, res.stdout, res.stderr)
