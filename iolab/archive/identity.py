"""What makes two crates one run, so that a run counts once: in the store,
in an occasion estimate and in any verdict pooled across runs
(iolab.claims.records.RunIdentity says when two copies are one run: a
shared raw file, the same per-repetition findings, or the same first start
on one launch), read from a crate.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from ..claims.records import RunIdentity, findings_digest, launch_of
from .untrusted import Crate

T = TypeVar("T")

__all__ = ["RunIdentity", "distinct", "is_raw_measurement", "of_crate", "overlapping", "sharing"]


def is_raw_measurement(name: str) -> bool:
    """A crate member that is a raw measurement file (not a sidecar or a
    companion of one)."""
    parts = name.split("/")
    return len(parts) == 6 and parts[:2] == ["data", "raw"] and parts[5].startswith("rep") and parts[5].endswith(".csv")


def of_crate(crate: Crate, commit: str, environment: Any = None, numbers: Any = None) -> RunIdentity:
    """The identity of an opened, checked crate whose commit is ``commit``:
    the raw digests come from its metadata (which every member was checked
    against), its launch from its environment's boot ids and its findings'
    digest from its numbers (``environment``, ``numbers``: the crate's, as
    read)."""
    raw = frozenset(crate.listed[n].sha256 for n in crate.files("data/raw/") if is_raw_measurement(n))
    nodes = environment.get("nodes") if isinstance(environment, Mapping) else None
    entry = numbers.get("findings") if isinstance(numbers, Mapping) else None
    rows = entry.get("value") if isinstance(entry, Mapping) else None
    findings = [f for f in rows if isinstance(f, Mapping)] if isinstance(rows, list) else []
    return RunIdentity(
        commit,
        crate.first_started(),
        raw,
        launch=launch_of(nodes) if isinstance(nodes, Mapping) else "",
        findings=findings_digest(findings),
    )


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


def one_per_launch(items: Sequence[T], identity: Callable[[T], RunIdentity]) -> tuple[list[T], list[tuple[T, T]]]:
    """``items`` with one run per launch (the first given), and the
    (dropped, the one of its launch kept) pairs: runs of one launch share
    its occasion. Runs whose launch is unknown are each their own."""
    kept: list[T] = []
    dropped: list[tuple[T, T]] = []
    for item in items:
        launch = identity(item).launch
        twin = next((k for k in kept if launch and identity(k).launch == launch), None)
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
