"""The native programs and the files each is built from: native/programs.mk,
the one table the Makefile includes too."""

from __future__ import annotations

import re
from functools import cache

from . import paths

PROGRAMS_MK = paths.REPO / "native" / "programs.mk"
# Files every build depends on besides a program's own sources.
BUILD_FILES = ["native/Makefile", "native/configure.sh", "native/programs.mk"]
_ASSIGN = re.compile(r"^([A-Za-z0-9_-]+)\s*:=\s*(.*)$")
_REF = re.compile(r"\$\(([A-Za-z0-9_-]+)\)")
# Make's file list by pattern, in name order: $(sort $(wildcard PATTERN)).
_WILDCARD = re.compile(r"\$\(sort \$\(wildcard ([^)\s]+)\)\)")


def _wildcard(m: re.Match[str]) -> str:
    return " ".join(sorted(p.relative_to(PROGRAMS_MK.parent).as_posix() for p in PROGRAMS_MK.parent.glob(m.group(1))))


@cache
def program_sources() -> dict[str, list[str]]:
    """program -> its repository-relative source files (C and headers)."""
    variables = _variables()
    # Programs are the lower-case names; COMMON_SRCS and the like are parts.
    return {
        name[: -len("_SRCS")]: [f"native/{w}" for w in words]
        for name, words in variables.items()
        if name.endswith("_SRCS") and not name.isupper()
    }


@cache
def _variables() -> dict[str, list[str]]:
    """programs.mk's variables, each expanded to its words."""
    text = PROGRAMS_MK.read_text().replace("\\\n", " ")
    variables: dict[str, list[str]] = {}
    for line in text.splitlines():
        m = _ASSIGN.match(line.strip())
        if not m:
            continue
        words: list[str] = []
        for word in _WILDCARD.sub(_wildcard, m.group(2)).split():
            ref = _REF.fullmatch(word)
            words += variables[ref.group(1)] if ref else [word]
        variables[m.group(1)] = words
    return variables


# The programs built with the MPI compiler wrapper.
MPI_PROGRAMS = tuple(_variables()["MPI_PROGRAM_NAMES"])
