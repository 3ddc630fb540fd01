"""Where things live in the repository (one place, so rules, notebooks and
tests agree)."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
NATIVE_BUILD = REPO / "native" / "build"


def resolve(path: str | Path) -> Path:
    """A path relative to the repository root, whatever the current directory
    (notebooks run from notebooks/ by hand and from the root under papermill)."""
    p = Path(path)
    return p if p.is_absolute() else REPO / p


def relative(path: str | Path) -> str:
    """A repository-relative POSIX path for manifests and provenance."""
    p = Path(path).resolve()
    try:
        return p.relative_to(REPO).as_posix()
    except ValueError:
        return p.as_posix()
