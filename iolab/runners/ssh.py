"""Run native programs on a remote node over ssh.

Binaries are built per node: a session copies the native sources to a
scratch directory on the node (``~/.cache/iolab/<digest>``), builds the
programs there with the node's own compiler and libraries, runs them with
their output streamed back into local files, and removes the scratch
directory at the end. Host keys are checked as ssh always does: the node
must be in ``known_hosts`` (the inventory may name a file); disabling the
check is never the default (``accept_new_host_key: true`` trusts a key on
first use, as ``StrictHostKeyChecking=accept-new``).

Every failure is one line naming the node and the cause: unreachable,
authentication refused, unknown host key, a failed remote build or a
missing remote dependency (the build's own "missing dependency" line).
"""

from __future__ import annotations

import hashlib
import io
import shlex
import signal
import subprocess
import tarfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .. import hostfacts, paths
from ..capabilities import RUNNER_CAPABILITIES
from ..inventory import NodeEntry
from .base import RunError, RunResult, build_failure
from .local import _die_with_parent

# Files a node needs to build the native programs.
SOURCES = ("native",)
EXCLUDE_DIRS = {"build"}


def _source_files() -> list[Path]:
    files = []
    for top in SOURCES:
        for p in sorted((paths.REPO / top).rglob("*")):
            rel = p.relative_to(paths.REPO)
            if p.is_file() and not (set(rel.parts) & EXCLUDE_DIRS):
                files.append(p)
    return files


def source_digest() -> str:
    h = hashlib.sha256()
    for p in _source_files():
        h.update(str(p.relative_to(paths.REPO)).encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:12]


def _source_tarball() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for p in _source_files():
            info = tar.gettarinfo(str(p), arcname=str(p.relative_to(paths.REPO)))
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            with open(p, "rb") as f:
                tar.addfile(info, f)
    return buf.getvalue()


def ssh_options(node: NodeEntry, expand: Callable[[str], str] = str) -> list[tuple[str, str]]:
    """The ssh options of an inventory node, as (keyword, value): for ``-o``
    here and for an ssh_config on another node (iolab/experiments/mpi/group.py).
    ``expand`` maps the key and known_hosts paths (``~`` expanded here; left
    for ssh to expand on another node)."""
    opts = [("BatchMode", "yes"), ("ConnectTimeout", str(node.connect_timeout)), ("Port", str(node.port))]
    if node.user:
        opts.append(("User", node.user))
    if node.identity_file:
        opts += [("IdentityFile", expand(node.identity_file)), ("IdentitiesOnly", "yes")]
    if node.known_hosts:
        opts.append(("UserKnownHostsFile", expand(node.known_hosts)))
    opts.append(("StrictHostKeyChecking", "accept-new" if node.accept_new_host_key else "yes"))
    return opts


def _expand_here(path: str) -> str:
    return str(Path(path).expanduser())


def _last_line(text: str, default: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else default


def ssh_failure(stderr: str, returncode: int) -> str:
    """Why an ssh command failed, in words a user can act on."""
    last = _last_line(stderr, f"ssh exited with status {returncode}")
    low = stderr.lower()
    if "host key verification failed" in low or "no matching host key" in low:
        return (
            "its host key is not in known_hosts; add it (ssh-keyscan -p PORT HOST >> "
            "known_hosts) or set accept_new_host_key: true for this node"
        )
    if "permission denied" in low:
        return f"authentication refused ({last})"
    if returncode == 255 and ("connect" in low or "resolve" in low or "timed out" in low):
        return f"unreachable ({last})"
    return last


class SshRunner:
    """One ssh node from the inventory (see config/schema.yaml, nodes[])."""

    name = "ssh"
    name = "ssh"
    capabilities = RUNNER_CAPABILITIES[name]
    mpi_launcher = "mpirun"

    @staticmethod
    def skip_reason(entry: NodeEntry) -> str | None:
        """Never skipped up front: an unreachable host is the measurement's
        one-line error, and the other nodes go on."""
        return None

    def __init__(self, entry: NodeEntry) -> None:
        self.entry = entry
        self.node = self.entry.name
        if not self.entry.host:
            raise RunError(f"node {self.node}: an ssh node needs 'host'")
        self.host: str = self.entry.host
        # Relative to the login directory until the session resolves it: an
        # absolute path is what mpirun on another node needs (iolab/experiments/mpi/group.py).
        self.workdir = f".cache/iolab/{source_digest()}-{self.node}"

    # -- ssh plumbing ---------------------------------------------------------
    @property
    def target(self) -> str:
        return f"{self.entry.user}@{self.host}" if self.entry.user else self.host

    def ssh_argv(self) -> list[str]:
        argv = ["ssh", "-o", "ServerAliveInterval=15"]
        for keyword, value in ssh_options(self.entry, _expand_here):
            argv += ["-o", f"{keyword}={value}"]
        # "--": the target is never read as an option, however it is spelled.
        return [*argv, "--", self.target]

    def _remote(self, script: str) -> list[str]:
        prefix = "".join(f"{cmd} && " for cmd in self.entry.setup)
        return [*self.ssh_argv(), "sh -c " + shlex.quote(prefix + script)]

    def _explain(self, stderr: str, returncode: int) -> str:
        """One line: the node, and why ssh failed."""
        return f"node {self.node} ({self.target}:{self.entry.port}): {ssh_failure(stderr, returncode)}"

    def shell(
        self, script: str, timeout: float = 600.0, stdin: bytes | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run a shell script on the node (after its setup commands)."""
        try:
            res = subprocess.run(self._remote(script), input=stdin, capture_output=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired as e:
            raise RunError(f"node {self.node}: no answer within {timeout:.0f} s") from e
        return subprocess.CompletedProcess(
            res.args, res.returncode, res.stdout.decode(errors="replace"), res.stderr.decode(errors="replace")
        )

    def check_reachable(self) -> None:
        res = self.shell("true", timeout=self.entry.connect_timeout + 30)
        if res.returncode != 0:
            raise RunError(self._explain(res.stderr, res.returncode))

    # -- session: copy, build, run, clean up -----------------------------------
    @contextmanager
    def session(self, programs: Sequence[str]) -> Iterator[SshRunner]:
        self.check_reachable()
        try:
            self._sync_and_build(programs)
            yield self
        finally:
            self.shell(f"rm -rf {shlex.quote(self.workdir)}", timeout=120)

    def _sync_and_build(self, programs: Sequence[str]) -> None:
        res = self.shell(f"mkdir -p {shlex.quote(self.workdir)} && cd {shlex.quote(self.workdir)} && pwd")
        if res.returncode != 0 or not res.stdout.strip().startswith("/"):
            raise RunError(f"node {self.node}: cannot create {self.workdir}: {ssh_failure(res.stderr, res.returncode)}")
        self.workdir = res.stdout.strip().splitlines()[-1]
        wd = shlex.quote(self.workdir)
        res = self.shell(f"mkdir -p {wd} && tar xzf - -C {wd}", stdin=_source_tarball())
        if res.returncode != 0:
            raise RunError(f"node {self.node}: copying the sources failed: {ssh_failure(res.stderr, res.returncode)}")
        if not programs:
            return  # an experiment of installed programs (ib: perftest); make would build everything
        targets = " ".join(shlex.quote(f"build/{p}") for p in programs)
        res = self.shell(f"cd {wd} && make -s -C native {targets}", timeout=900)
        if res.returncode != 0:
            raise RunError(
                f"node {self.node}: remote build failed: {build_failure(res.stderr + res.stdout, res.returncode)}"
            )

    def exe(self, program: str) -> str:
        return f"{self.workdir}/native/build/{program}"

    def _translate(self, argv: Sequence[str]) -> list[str]:
        # Local native paths name the same program in the node's build.
        local = str(paths.NATIVE_BUILD) + "/"
        return [self.exe(a[len(local) :]) if a.startswith(local) else a for a in argv]

    def run(
        self,
        argv: list[str],
        stdout_path: Path,
        timeout: float = 3600.0,
        error_line: Callable[[str], str] | None = None,
        env: Mapping[str, str] | None = None,
        name: str | None = None,
    ) -> RunResult:
        label = name or Path(argv[0]).name
        remote = self._translate(argv)
        # env: variables added to the node's own environment for this command.
        exports = "".join(f"{k}={shlex.quote(v)} " for k, v in (env or {}).items())
        script = f"exec env {exports}{shlex.join(remote)}"
        start = time.monotonic()
        with open(stdout_path, "w") as out:
            try:
                proc = subprocess.run(
                    self._remote(script),
                    stdout=out,
                    stderr=subprocess.PIPE,
                    text=True,
                    timeout=timeout,
                    check=False,
                    preexec_fn=_die_with_parent,
                )
            except subprocess.TimeoutExpired as e:
                raise RunError(f"node {self.node}: {label} did not finish within {timeout:.0f} s") from e
        seconds = time.monotonic() - start
        if proc.returncode == 255:
            raise RunError(self._explain(proc.stderr, proc.returncode))
        if proc.returncode != 0:
            last = error_line(proc.stderr) if error_line else _last_line(proc.stderr, "(no message)")
            raise RunError(f"node {self.node}: {label} exited with status {proc.returncode}: {last}")
        return RunResult(argv=remote, returncode=0, seconds=seconds, stderr=proc.stderr)

    def popen(self, argv: list[str]) -> subprocess.Popen[str]:
        """Start a long-running program (a server). Closing its stdin stops it:
        the remote shell waits for end of input, then sends SIGTERM, so the
        program prints its final counters as it would locally."""
        remote = shlex.join(self._translate(argv))
        script = f"{remote} <&- & pid=$!; cat >/dev/null; kill -TERM $pid 2>/dev/null; wait $pid"
        return subprocess.Popen(
            self._remote(script),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=_die_with_parent,
        )

    def terminate(self, proc: subprocess.Popen[str]) -> None:
        if proc.stdin is not None and not proc.stdin.closed:
            proc.stdin.close()
            proc.stdin = None  # communicate() must not flush a closed pipe
        else:
            proc.send_signal(signal.SIGTERM)

    def read_file(self, path: str) -> str:
        res = self.shell(f"cat {shlex.quote(path)}", timeout=120)
        if res.returncode != 0:
            raise RunError(f"node {self.node}: cannot read {path}: {_last_line(res.stderr, '')}")
        return res.stdout

    def scratch(self, name: str) -> str:
        return f"{self.workdir}/{name}"

    def write_file(self, path: str, text: str, mode: int = 0o644) -> None:
        res = self.shell(
            f"cat > {shlex.quote(path)} && chmod {mode:o} {shlex.quote(path)}", timeout=120, stdin=text.encode()
        )
        if res.returncode != 0:
            raise RunError(f"node {self.node}: cannot write {path}: {ssh_failure(res.stderr, res.returncode)}")

    def facts(self) -> hostfacts.HostFacts:
        try:
            return hostfacts.gather(lambda script: self.shell(script, timeout=120))
        except RuntimeError as e:
            raise RunError(f"node {self.node}: {e}") from e

    def provenance(self) -> dict[str, Any]:
        return {"ssh": {"host": self.host, "port": self.entry.port, "user": self.entry.user}}
