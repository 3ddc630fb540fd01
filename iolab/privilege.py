"""What a run needs root for, declared once, and known when the workflow
plans: before the first job.

Three parts of a run need root on the machine that measures them: the MPI
experiment's netns transport (it creates network namespaces), its
netns_tbf transport (namespaces, and a tbf qdisc that shapes them), and the
trace experiment (bpftrace attaches kernel tracepoints), which also needs
bpftrace installed. Where they cannot run, planning (rules/common.smk)
leaves them out of the run, prints each with its reason, and records it in
results/nodes.json; a trace left out is a row in its table with the reason
(never a raw file), which the claims read as "not testable here". The MPI
experiment's run code leaves the same transports out by the same rule
(``transports_left_out``), and the run key records what was left out, so a
run as root later measures them into a directory of its own.

In the base of the package: the workflow and the run side read it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable

# Experiment -> what it does that needs root.
ROOT_EXPERIMENTS: dict[str, str] = {"trace": "bpftrace attaches kernel tracepoints"}
# Experiment -> (program it needs on this machine, the Debian package with it).
TOOLS: dict[str, tuple[str, str]] = {"trace": ("bpftrace", "bpftrace")}
# MPI transport -> what it does that needs root.
ROOT_TRANSPORTS: dict[str, str] = {
    "netns": "the netns transport creates network namespaces",
    "netns_tbf": "the netns_tbf transport creates network namespaces and a tbf qdisc in them",
}
HOW = "run as root to measure it"


def is_root() -> bool:
    return os.geteuid() == 0


def experiment_left_out(experiment: str) -> str:
    """Why ``experiment`` cannot run on this machine as this user ("": it can)."""
    if experiment in ROOT_EXPERIMENTS and not is_root():
        return f"{ROOT_EXPERIMENTS[experiment]}, which needs root; {HOW}"
    tool = TOOLS.get(experiment)
    if tool is not None and shutil.which(tool[0]) is None:
        return f"{tool[0]} is not installed (apt-get install {tool[1]})"
    return ""


def transports_left_out(transports: Iterable[str]) -> dict[str, str]:
    """The MPI transports of ``transports`` this user cannot run here, each
    with its reason."""
    if is_root():
        return {}
    return {t: f"{ROOT_TRANSPORTS[t]}, which needs root; {HOW}" for t in transports if t in ROOT_TRANSPORTS}
