"""Which source files decide what an experiment measures, and a digest of
them: the run key digests these with the settings (rules/common.smk), and a
crate records them per experiment, so that a run measured with other code
than today's can be marked as such."""

from __future__ import annotations

import hashlib
from pathlib import Path

from . import paths
from .native import BUILD_FILES, program_sources
from .registry import REGISTRY


def measuring_sources(experiment: str) -> list[str]:
    """Repository-relative paths, sorted: the build files, the code the
    registry names for ``experiment`` and every source of its programs."""
    entry = REGISTRY[experiment]
    sources = set(BUILD_FILES) | set(entry.code)
    programs = program_sources()
    for program in entry.programs + entry.optional_programs:
        sources.update(programs[program])
    return sorted(sources)


def update_with_sources(h: hashlib._Hash, sources: list[str], root: Path = paths.REPO) -> None:
    """Feed each source's path and bytes to ``h``, in the order given."""
    for src in sources:
        h.update(src.encode())
        h.update((root / src).read_bytes())


def analysing_sources() -> list[str]:
    """Repository-relative paths, sorted: the analysis packages' import
    closure and the notebooks."""
    notebooks = [p.relative_to(paths.REPO).as_posix() for p in (paths.REPO / "notebooks").glob("*.py")]
    # The read side below the archive turns raw files into numbers and figures.
    return sorted({*paths.module_closure([], paths.read_side_modules(below="archive")), *notebooks})


def _digest(sources: list[str], root: Path) -> str:
    h = hashlib.sha256()
    update_with_sources(h, sources, root)
    return h.hexdigest()[:12]


def measuring_digest(experiment: str, root: Path = paths.REPO) -> str:
    """A digest of the code that measures ``experiment`` in the checkout at ``root``."""
    return _digest(measuring_sources(experiment), root)


def analysing_digest(root: Path = paths.REPO) -> str:
    """A digest of the code that turns raw files into numbers and figures at ``root``."""
    return _digest(analysing_sources(), root)
