"""Zero-copy send against plain send (cost-probe send-zc): statistics.

Both variants run in one process, their batches interleaved at random, so
each repetition's ratio of medians (zero-copy over plain, at one message
size) compares things measured back to back. Across repetitions the ratio
gets its median and 95 % interval (iolab.estimation.intervals). Zero copy *pays*
at a size when that interval lies wholly below 1, there and at every larger
size measured: the crossover is the smallest such size.

The kernel reports, per zero-copy send, whether it copied after all
(IORING_SEND_ZC_REPORT_USAGE). On loopback and veth it always must, so a
crossover is not expected there; the copied share says why.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from ...estimation.intervals import Estimate, across_reps

ZERO_COPY = ("send_zc", "send_zc_fixed")
PLAIN = "send"
RATIO_COLUMNS = [
    "variant",
    "bytes",
    "ratio",
    "low",
    "high",
    "reps",
    "estimate",
    "zc_ns_per_byte",
    "send_ns_per_byte",
    "copied_share",
]


def per_rep_medians(table: pd.DataFrame, node: str) -> pd.DataFrame:
    """Per repetition, variant and size: the median ns per send over the
    measured batches (columns rep, variant, bytes, ns_per_send)."""
    mine = table[(table["node"] == node) & ~table["warmup"]]
    return mine.groupby(["rep", "variant", "bytes"])["ns_per_call"].median().rename("ns_per_send").reset_index()


def ratios(table: pd.DataFrame, node: str) -> pd.DataFrame:
    """Per zero-copy variant and size: its time per send over plain send's,
    median over repetitions with its 95 % interval (``estimate``), each
    variant's median ns per byte, and the share of its sends the kernel
    reported as copied."""
    med = per_rep_medians(table, node).pivot_table(index=["rep", "bytes"], columns="variant", values="ns_per_send")
    mine = table[(table["node"] == node) & ~table["warmup"]]
    usage = (
        mine.drop_duplicates(["rep", "variant", "bytes"])
        .groupby(["variant", "bytes"])[["zc_notifications", "zc_copied"]]
        .sum()
    )
    rows = []
    for variant in ZERO_COPY:
        if variant not in med.columns or PLAIN not in med.columns:
            continue
        for size, g in med.groupby(level="bytes"):
            pair = g[[variant, PLAIN]].dropna()
            if pair.empty:
                continue
            e = across_reps((pair[variant] / pair[PLAIN]).to_numpy(float))
            sent = usage.loc[(variant, size)] if (variant, size) in usage.index else None
            rows.append(
                {
                    "variant": variant,
                    "bytes": int(size),
                    "ratio": e.value,
                    "low": e.low,
                    "high": e.high,
                    "reps": e.n,
                    "estimate": e,
                    "zc_ns_per_byte": float(pair[variant].median()) / size,
                    "send_ns_per_byte": float(pair[PLAIN].median()) / size,
                    "copied_share": (
                        float(sent["zc_copied"]) / float(sent["zc_notifications"])
                        if sent is not None and sent["zc_notifications"] > 0
                        else math.nan
                    ),
                }
            )
    return pd.DataFrame(rows, columns=RATIO_COLUMNS)


@dataclass(frozen=True)
class Crossover:
    variant: str
    # The smallest size from which on zero copy costs less per byte than
    # plain send (interval wholly below 1 there and at every larger size),
    # or None: at no size measured.
    bytes: int | None
    largest_measured: int
    # The ratio at the crossover, or at the largest size when there is none.
    ratio: Estimate

    def sentence(self) -> str:
        r = self.ratio
        at = (
            f"{r.value:.2f} [{r.low:.2f}, {r.high:.2f}]"
            if math.isfinite(r.low) and math.isfinite(r.high)
            else f"{r.value:.2f}, no interval from {r.n} repetitions"
        )
        if self.bytes is None:
            return (
                f"{self.variant} costs less than plain send at no size measured, up to "
                f"{self.largest_measured} B (ratio there {at})"
            )
        return f"{self.variant} costs less than plain send from {self.bytes} B on (ratio there {at})"


def crossover(summary: pd.DataFrame, variant: str) -> Crossover:
    """Where ``variant`` starts to pay, from ``ratios``' rows."""
    rows = summary[summary["variant"] == variant].sort_values("bytes")
    if rows.empty:
        raise ValueError(f"no {variant} rows: the send-zc probe did not measure it")
    start = None
    for i in range(len(rows) - 1, -1, -1):
        if not rows["high"].iloc[i] < 1.0:
            break
        start = i
    at = rows.iloc[start if start is not None else len(rows) - 1]
    return Crossover(variant, int(at["bytes"]) if start is not None else None, int(rows["bytes"].max()), at["estimate"])


def crossover_text(summary: pd.DataFrame) -> str:
    """One line per zero-copy variant measured: where it starts to pay."""
    measured = sorted(set(summary["variant"])) if len(summary) else []
    if not measured:
        return "no zero-copy variant was measured beside plain send"
    return "\n".join(crossover(summary, variant).sentence() for variant in measured)
