"""Model estimates and fits used by the notebooks.

So far: the null-syscall cost s. The echo cost model (A: (t+s)/n, B: linear
batch time) and the MPI models build on the same summaries.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from .stats import median_ci, spread_pct


def syscall_summary(measured: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """Median ns per call with its 95 % CI for each group of batches.

    ``measured`` holds non-warm-up rows of the syscall table. The returned
    frame keeps the Estimate object in ``estimate`` for the numbers file.
    """
    rows = []
    for key, group in measured.groupby(list(by), sort=True):
        est = median_ci(group["ns_per_call"].to_numpy())
        rows.append({**dict(zip(by, key if isinstance(key, tuple) else (key,))),
                     "median_ns": est.value, "ci_low_ns": est.low, "ci_high_ns": est.high,
                     "batches": est.n, "estimate": est})
    return pd.DataFrame(rows)


def repeat_spread(per_rep: pd.DataFrame) -> float:
    """Spread of per-repetition medians, (max - min) / median in percent."""
    if len(per_rep) < 2:
        return 0.0
    return spread_pct(per_rep["median_ns"].to_numpy(dtype=float))
