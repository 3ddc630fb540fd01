"""Atomic file writes: a result file either exists complete or not at all.

Every writer goes through a temporary file in the destination directory, is
fsync'ed, then renamed over the destination. An interrupted run leaves at most
a ``.tmp-*`` file, which no loader or rule ever treats as a result.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

TMP_PREFIX = ".tmp-"


def remove_stale_temporaries(dest: str | Path) -> list[Path]:
    """Delete temporaries left next to ``dest`` by a killed writer (SIGKILL
    gives no chance to clean up). Returns what was removed."""
    dest = Path(dest)
    stale = list(dest.parent.glob(f"{TMP_PREFIX}{dest.name}.*")) if dest.parent.is_dir() else []
    for p in stale:
        p.unlink(missing_ok=True)
    return stale


@contextlib.contextmanager
def atomic_path(dest: str | Path) -> Iterator[Path]:
    """Yield a temporary path next to ``dest``; rename it to ``dest`` only if
    the block finishes without an exception."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=TMP_PREFIX + dest.name + ".", dir=dest.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    # mkstemp creates 0600; results are ordinary files, readable per umask.
    os.chmod(tmp_path, 0o666 & ~_umask())
    try:
        yield tmp_path
        with open(tmp_path, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp_path, dest)
        _fsync_dir(dest.parent)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


@contextlib.contextmanager
def atomic_open(dest: str | Path, mode: str = "w") -> Iterator[IO[Any]]:
    """Like ``open(dest, mode)`` but atomic (see module doc)."""
    with atomic_path(dest) as tmp, open(tmp, mode) as f:
        yield f


def write_text(dest: str | Path, text: str) -> None:
    with atomic_open(dest) as f:
        f.write(text)


def write_bytes(dest: str | Path, data: bytes) -> None:
    with atomic_open(dest, "wb") as f:
        f.write(data)


def write_json(dest: str | Path, obj: Any) -> None:
    # allow_nan=False: NaN/Infinity are not JSON; fail here, not in a reader.
    write_text(dest, json.dumps(obj, indent=2, sort_keys=True, default=str, allow_nan=False) + "\n")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _fsync_dir(d: Path) -> None:
    try:
        fd = os.open(d, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
