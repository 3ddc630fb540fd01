"""Verdicts on the source articles' claims, from our estimates.

Each function returns one sentence for the paper's claims table. The rules
are stated here once so that every verdict in the paper is reproducible.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from .sources import QUOTED, verdict


def c1_component(ours: float, key: str) -> str:
    """s, w or t against the article's value (REPRODUCED_WITHIN tolerance)."""
    return verdict(ours, QUOTED[key].value)


def c2(mitigations: str, point: Mapping[str, float]) -> str:
    """C2: with mitigations off io_uring never beats epoll, because t > w."""
    premise = point["t1_mean"] > point["w_mean"]
    never = math.isinf(point["nstar_B"])
    detail = (f"here t(1) = {point['t1_mean']:.0f} ns {'>' if premise else '<='} "
              f"w = {point['w_mean']:.0f} ns, and model B "
              + ("never lets io_uring win" if never else f"crosses over at n* = {point['nstar_B']:.1f}"))
    if mitigations != "off":
        return f"not testable on this node (mitigations {mitigations}); {detail}"
    return ("reproduced: " if never else "not reproduced: ") + detail


def c3(mitigations: str, point: Mapping[str, float]) -> str:
    """C3: with mitigations on, io_uring wins once n is large (model part;
    the +10 % throughput part needs the echo experiment)."""
    if mitigations != "on":
        return f"not testable on this node (mitigations {mitigations})"
    if math.isinf(point["nstar_B"]):
        return (f"not reproduced: per SQE, b_send + b_recv = {point['b_send'] + point['b_recv']:.0f} ns "
                f"exceeds the epoll request cost {point['epoll_request']:.0f} ns, so io_uring never wins "
                f"at any n (model B); the throughput part needs the echo experiment")
    return (f"reproduced in the model: io_uring wins above n* = {point['nstar_B']:.1f} SQEs per enter "
            f"(model B); the throughput part needs the echo experiment")
