"""What a room gives the tidy step: the experiments it reads and the
function that builds their tidy table."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

Tidy = Callable[[Iterable[str | Path]], pd.DataFrame]


@dataclass(frozen=True)
class Room:
    # The experiments (iolab.registry) whose raw files it reads.
    experiments: tuple[str, ...]
    # Raw files -> one tidy table (one row per observation, with context).
    tidy: Tidy
