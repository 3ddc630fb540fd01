"""A pytest plugin (loaded by conftest.py): Ctrl-C stops the suite and
leaves nothing running.

- A suite started in the background of a script inherits SIGINT ignored,
  and then never saw Ctrl-C (it ran on for minutes): SIGINT is handled
  whatever the suite inherited.
- The handler first stops every process below the suite (SIGTERM, then
  SIGKILL), while the tree is whole: once KeyboardInterrupt reaches
  subprocess.run, it kills only its direct child, and what that child
  started (a snakemake run's measurements, servers) would run on. Then
  KeyboardInterrupt goes on as usual, and the suite stops after the test
  it interrupted even where that test's cleanup, finding its processes
  gone, raised another error in its place.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from types import FrameType

import pytest

# The session, and whether Ctrl-C came: a test whose cleanup fails once its
# processes are stopped raises that error in place of KeyboardInterrupt, so
# the suite also stops after the test it interrupted.
_STATE: dict[str, object] = {"session": None, "interrupted": False}


def pytest_configure(config: pytest.Config) -> None:
    signal.signal(signal.SIGINT, _interrupted)


def pytest_sessionstart(session: pytest.Session) -> None:
    _STATE["session"] = session


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    session = _STATE["session"]
    if _STATE["interrupted"] and isinstance(session, pytest.Session):
        session.shouldstop = "interrupted by Ctrl-C (SIGINT)"


def _interrupted(signum: int, frame: FrameType | None) -> None:
    _STATE["interrupted"] = True
    stop_descendants()
    raise KeyboardInterrupt


def descendants(pid: int) -> list[int]:
    """Every process below ``pid``, from /proc."""
    parent: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    found: list[int] = []
    frontier = [pid]
    while frontier:
        frontier = [p for p, pp in parent.items() if pp in frontier]
        found += frontier
    return found


def _alive(pid: int) -> bool:
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def stop_descendants(grace: float = 5.0) -> None:
    """SIGTERM to every process below this one, then SIGKILL to any of them
    still alive after ``grace`` seconds (also those whose parent exited
    meanwhile, which no longer show below this process)."""
    targets = set(descendants(os.getpid()))
    for sig in (signal.SIGTERM, signal.SIGKILL):
        targets |= set(descendants(os.getpid()))
        for pid in sorted(targets):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            # Reap the direct children that exited (the others are their parents').
            try:
                while os.waitpid(-1, os.WNOHANG)[0]:
                    pass
            except ChildProcessError:
                pass
            targets = {pid for pid in targets if _alive(pid)}
            if not targets:
                return
            time.sleep(0.1)
