"""Argument types the package's commands and benchmarks share: a
comma-separated list on the command line ("0.5,1,2") as a typed list."""

from __future__ import annotations


def names(text: str) -> list[str]:
    """``a,b,,c`` -> ["a", "b", "c"] (empty items dropped)."""
    return [x for x in text.split(",") if x]


def ints(text: str) -> list[int]:
    """``50,500`` -> [50, 500]."""
    return [int(x) for x in names(text)]


def floats(text: str) -> list[float]:
    """``0.5,1`` -> [0.5, 1.0]."""
    return [float(x) for x in names(text)]
