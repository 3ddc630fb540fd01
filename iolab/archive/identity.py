"""What makes two crates one run, so that a run counts once: in the store,
in an occasion estimate and in any verdict pooled across runs.

A run's identity is its commit, when its first measurement or notebook
started, and the set of SHA-256 digests of its raw measurement files
(``data/raw/<node>/<experiment>/<key>/rep<N>.csv``). The raw files are the
measurements themselves, so two crates that share any raw file share
measurements, and are one run however they were zipped, renamed or
re-archived (a run resumed and archived again holds the earlier crate's
files and more). Crates without raw files (none of ours) are one run when
their commit and first start agree.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from .untrusted import Crate

T = TypeVar("T")


@dataclass(frozen=True)
class RunIdentity:
    commit: str
    first_start: str
    raw: frozenset[str]

    @property
    def ident(self) -> str:
        """A short name for the run: a digest of its raw files' digests."""
        basis = "\n".join(sorted(self.raw)) if self.raw else f"{self.commit}\n{self.first_start}"
        return hashlib.sha256(basis.encode()).hexdigest()[:12]

    def same_run(self, other: RunIdentity) -> bool:
        if self.raw or other.raw:
            return bool(self.raw & other.raw)
        return (self.commit, self.first_start) == (other.commit, other.first_start)


def is_raw_measurement(name: str) -> bool:
    """A crate member that is a raw measurement file (not a sidecar or a
    companion of one)."""
    parts = name.split("/")
    return len(parts) == 6 and parts[:2] == ["data", "raw"] and parts[5].startswith("rep") and parts[5].endswith(".csv")


def of_crate(crate: Crate, commit: str) -> RunIdentity:
    """The identity of an opened, checked crate whose commit is ``commit``:
    the raw digests come from its metadata (which every member was checked
    against)."""
    raw = frozenset(crate.listed[n].sha256 for n in crate.files("data/raw/") if is_raw_measurement(n))
    return RunIdentity(commit, crate.first_started(), raw)


def distinct(items: Sequence[T], identity: Callable[[T], RunIdentity]) -> tuple[list[T], list[tuple[T, T]]]:
    """``items`` with each run kept once (the first crate of it), and the
    (dropped, the one it duplicates) pairs."""
    kept: list[T] = []
    dropped: list[tuple[T, T]] = []
    for item in items:
        twin = next((k for k in kept if identity(k).same_run(identity(item))), None)
        if twin is None:
            kept.append(item)
        else:
            dropped.append((item, twin))
    return kept, dropped


def overlapping(raw: Iterable[str], held: dict[str, frozenset[str]]) -> str | None:
    """The key in ``held`` (a run -> its raw digests) whose raw files
    overlap ``raw``, or None."""
    mine = frozenset(raw)
    return next((key for key, theirs in held.items() if mine & theirs), None)


def sharing(pairs: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    """Each key (a kernel's boot id, a machine) that two or more names (runs,
    nodes) share, with those names in the order given; empty keys name
    nothing (a sidecar or crate from before the key was recorded)."""
    by_key: dict[str, list[str]] = {}
    for name, key in pairs:
        if key and name not in by_key.setdefault(key, []):
            by_key[key].append(name)
    return {key: names for key, names in by_key.items() if len(names) > 1}
