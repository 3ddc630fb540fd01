"""What a room gives the tidy step: the experiments it reads and the
function that builds their tidy table."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

Tidy = Callable[[Iterable[str | Path]], pd.DataFrame]
LeftOut = Callable[[Mapping[str, str]], pd.DataFrame]


@dataclass(frozen=True)
class Room:
    # The experiments (iolab.registry) whose raw files it reads.
    experiments: tuple[str, ...]
    # Raw files -> one tidy table (one row per observation, with context).
    tidy: Tidy
    # For an experiment the workflow may leave out of a node when it plans
    # (iolab.privilege): node -> reason, as the rows the table gives those
    # nodes (no values; the reason in ``skipped``). None: never left out.
    left_out: LeftOut | None = None
