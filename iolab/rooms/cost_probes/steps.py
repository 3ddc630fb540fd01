"""Steps in a send or receive's cost as the message grows: the size
doublings whose cost rises far more than the bytes copied would explain,
each ratio formed within a repetition (the two sizes run seconds apart)
and summarised across repetitions. A referee found TCP's send jump at
1 KiB printed without a word; the paper now names each such step with its
numbers, and says that the probes do not record why."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

import pandas as pd

from ...estimation.intervals import Estimate, across_reps

# A step is a rise whose whole 95 % interval lies above this ratio between
# consecutive sizes: copying 2-8x the bytes adds tens of ns on a call of
# 1.5 us, a few per cent, so a quarter more is something else.
STEP = 1.25
SERIES = ["transport", "variant", "pattern", "ack"]


@dataclass(frozen=True)
class Step:
    """One series' rise between two consecutive sizes, and the largest rise
    the same sizes show in the series that differ from it only in their
    connection pattern or ACK regime."""

    transport: str
    variant: str
    pattern: str
    ack: str
    small: int
    large: int
    ratio: Estimate
    others: float | None


def ratios(sendrecv: pd.DataFrame) -> dict[tuple[str, ...], dict[tuple[int, int], Estimate]]:
    """Per series, per pair of consecutive sizes: the cost at the larger
    over the smaller, each repetition's median over each's, then across
    repetitions. ``sendrecv``: the timed rows of one node."""
    per_rep = sendrecv.groupby([*SERIES, "bytes", "rep"])["ns_per_call"].median().unstack("bytes")
    out: dict[tuple[str, ...], dict[tuple[int, int], Estimate]] = {}
    for key, rows in per_rep.groupby(level=list(range(len(SERIES)))):
        sizes = [int(b) for b in sorted(per_rep.columns) if rows[b].notna().any()]
        paired = {(a, b): (rows[b] / rows[a]).dropna().to_numpy(float) for a, b in pairwise(sizes)}
        out[tuple(str(k) for k in key)] = {
            pair: across_reps(values, predict=False) for pair, values in paired.items() if values.size
        }
    return out


def steps(sendrecv: pd.DataFrame, step: float = STEP) -> list[Step]:
    """Every rise whose 95 % interval lies wholly above ``step``."""
    found = []
    by_series = ratios(sendrecv)
    for (transport, variant, pattern, ack), pairs in sorted(by_series.items()):
        for (a, b), e in sorted(pairs.items()):
            if e.low > step:
                siblings = [
                    other[(a, b)].value
                    for key, other in by_series.items()
                    if key[:2] == (transport, variant) and key != (transport, variant, pattern, ack) and (a, b) in other
                ]
                found.append(Step(transport, variant, pattern, ack, a, b, e, max(siblings) if siblings else None))
    return found


TRANSPORT = {"tcp": "TCP", "unix": "a Unix-socket"}
PATTERN = {"roundrobin": "over many connections", "single": "on one connection"}
COUNT = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five"}
ACK = {"pingpong": "with delayed ACKs", "quickack": "with TCP_QUICKACK", "-": ""}


def _series(s: Step) -> str:
    words = [f"{TRANSPORT.get(s.transport, s.transport)} {s.variant}", PATTERN.get(s.pattern, s.pattern)]
    words.append(ACK.get(s.ack, s.ack))
    return " ".join(w for w in words if w)


def sentence(sendrecv: pd.DataFrame) -> str:
    """The paper's words for every step, or "" when there is none."""
    found = steps(sendrecv)
    if not found:
        return ""
    parts = []
    for s in found:
        e = s.ratio
        text = (
            f"{_series(s)} costs {e.value:.2f}× as much per call at {s.large} B as at {s.small} B "
            f"(95 % interval {e.low:.2f}–{e.high:.2f}, paired within repetitions)"
        )
        if s.others is not None:
            what = "connection patterns and ACK regimes" if s.transport == "tcp" else "connection pattern"
            text += f", where its other {what} change{'' if s.transport == 'tcp' else 's'} by at most {s.others:.2f}×"
        parts.append(text)
    one = len(found) == 1
    count = COUNT[len(found)].capitalize() if len(found) in COUNT else str(len(found))
    return (
        f"{count} {'step' if one else 'steps'} in a call's cost as the message grows "
        f"{'is' if one else 'are'} far larger than the bytes copied: "
        + "; ".join(parts)
        + ". The probes record no counter that tells why; we leave "
        + ("it" if one else "them")
        + " unexplained."
    )
