"""The paper's "setup compared" table: for every claim, how its source
measured (iolab.quoted.SOURCE_SETUPS, quoted) beside how we did,
read from the tables the verdicts came from."""

from __future__ import annotations

import pandas as pd

from ..quoted import SOURCE_SETUPS
from ..rooms.echo import summaries as echostats
from . import SOURCE_U1_BYTES, SOURCE_U1_CONNECTIONS, SOURCE_U2_BYTES, SOURCE_U2_CONNECTIONS

ASPECTS = ("system", "hardware", "kernel", "client", "layout", "cells", "duration")

_SYSTEMS = {
    "C1": "cost-probe: getppid(2) loops for s; send(2)/recv(2) over TCP loopback for w; one io_uring_enter "
    "with n SEND/RECV SQEs for t(n)",
    "C2": "models A and B fitted to our t(n) per repetition; echo-uring --poll-first against echo-epoll at the "
    "largest c (throughput)",
    "C3": "echo-uring --poll-first (single-threaded, no io-wq; receives and sends meant to complete in their "
    "submission, which the trace experiment checks by counting the polls armed per echoed request) against "
    "echo-epoll",
    "C4": "echo-uring --poll-first against echo-epoll, server CPU per request at the largest message size",
    "C5": "model B fitted per repetition to our probes, priced at each io_uring server's own SQEs per enter, "
    "against the servers' measured CPU per request (our pinned client)",
    "U1": "echo-uring, default ring, against echo-epoll (C)",
    "U2": "echo-go-uring (our pure-Go reactor with the source's defaults) against echo-go-net; second row: "
    "echo-uring with 2 rings, granule 75, attach_wq against echo-epoll",
    "U3": "echo-go-uring --sqpoll --rings 2 against echo-go-uring; second row: echo-uring sqpoll against "
    "the default ring",
    "U4": "echo-uring with each ring option against its base preset",
    "U5": "echo-go-uring with other ring counts and granule 1, echo-uring's rings against one ring with "
    "IOSQE_ASYNC and with or without ATTACH_WQ (the reactor overlay); io-wq requests counted by the "
    "trace experiment",
    "U6": "echo-uring, default ring: its io-wq workers at exit, counted from /proc",
    "M1": "mpi-probe ping-pong and perftest where a node pair ran them",
    "M2": "mpi-probe collectives (OSU's method where it ran), Open MPI's default algorithms where they ran",
    "M3": "mpi-probe collectives across nodes: the largest native/VM ratio",
}


def _machine(table: pd.DataFrame | None) -> tuple[str, str]:
    """(hardware, kernel) of the node(s) a table comes from."""
    if table is None or not len(table):
        return "not measured", "not measured"
    # unique() first: a cost table has a row per batch, and the models are few.
    models = sorted({str(m) for m in table.get("cpu_model", pd.Series(["not recorded"])).unique() if str(m)})
    cpus = int(table["cpus"].max()) if "cpus" in table else 0
    kinds = sorted(set(table["kind"].unique())) if "kind" in table else []
    hardware = f"{' / '.join(models) or 'CPU not recorded'}, {cpus} CPUs, {' and '.join(kinds)}"
    return hardware, ", ".join(sorted(set(table["kernel"].unique()))) if "kernel" in table else "not recorded"


def _echo_cells(echo: pd.DataFrame, connections: tuple[int, ...], sizes: tuple[int, ...]) -> str:
    ok = echo[(echo["status"] == "ok") & echo["connections"].isin(connections) & echo["bytes"].isin(sizes)]
    if not len(ok):
        return "none of the source's cells measured"
    cs = "/".join(str(c) for c in sorted(set(ok["connections"])))
    bs = "/".join(str(b) for b in sorted(set(ok["bytes"])))
    return f"c {cs} x {bs} B"


def compared(syscall: pd.DataFrame, echo: pd.DataFrame | None, mpi: pd.DataFrame | None, node: str) -> pd.DataFrame:
    """One row per claim and side ("source", quoted; "ours"), a column per aspect."""
    cost_node = syscall[syscall["node"] == node]
    echo_here = echostats.claims_view(echo, node)
    rows = []
    for claim, theirs in SOURCE_SETUPS.items():
        rows.append({"claim": claim, "side": "source", **{a: getattr(theirs, a) for a in ASPECTS}})
        duration = _durations(claim, cost_node, echo_here, mpi)
        if claim == "C1":
            hardware, kernel = _machine(cost_node)
            client, layout, cells = "-", "the probe pinned to one CPU", "1 connection per SQE, 16 B and up"
        elif claim == "C2":
            # The model's parts come from the probes, the throughput part from the servers.
            hardware, kernel = _machine(cost_node)
            setup = echostats.with_setup(echo_here) if echo_here is not None else None
            client = (
                "probes: -; servers: " + " and ".join(sorted(set(setup["client"]))) + " load generator"
                if setup is not None
                else "probes: -; servers: not measured"
            )
            layout = "probes pinned to one CPU" + (
                "; servers: " + " and ".join(sorted(set(setup["layout"]))) + " CPUs" if setup is not None else ""
            )
            cells = "probes: 1 connection per SQE, 16 B and up; servers: the largest c measured, smallest size"
        elif claim.startswith("M"):
            hardware, kernel = _machine(mpi)
            client, layout = "-", "ranks over the nodes transport where two nodes ran it"
            cells = "every size of the sweep" if mpi is not None and len(mpi) else "not measured"
        else:
            hardware, kernel = _machine(echo_here)
            if echo_here is None:
                client = layout = cells = "not measured"
            else:
                setup = echostats.with_setup(echo_here)
                client = " and ".join(sorted(set(setup["client"]))) + " load generator (loadgen --model)"
                layout = " and ".join(sorted(set(setup["layout"]))) + " CPUs"
                cells = {
                    "U1": _echo_cells(echo_here, SOURCE_U1_CONNECTIONS, SOURCE_U1_BYTES),
                    "U2": _echo_cells(echo_here, SOURCE_U2_CONNECTIONS, SOURCE_U2_BYTES),
                    "U3": _echo_cells(echo_here, SOURCE_U2_CONNECTIONS, SOURCE_U2_BYTES),
                    "C3": _echo_cells(echo_here, (1000,), tuple(sorted(set(echo_here["bytes"])))),
                    "C4": "the largest message size measured",
                    "C5": "every io_uring server at c \u2265 50, smallest size",
                    "U6": "every cell of the default ring",
                }.get(claim, "the largest c measured, smallest size")
        # Our machine is said once (``our_machine``); a claim measured elsewhere names its own.
        here_hw, here_kernel = _machine(cost_node)
        rows.append(
            {
                "claim": claim,
                "side": "ours",
                "system": _SYSTEMS[claim],
                "hardware": "this machine" if hardware == here_hw else hardware,
                "kernel": "this machine's" if kernel == here_kernel else kernel,
                "client": client,
                "layout": layout,
                "cells": cells,
                "duration": duration,
            }
        )
    return pd.DataFrame(rows)


def our_machine(syscall: pd.DataFrame, node: str) -> str:
    """This node named from what it reported: CPU model and count, bare
    metal or the hypervisor (and the monitor its kernel command line
    names, as inferred), kernel, and the mitigations as the kernel reports
    them."""
    rows = syscall[syscall["node"] == node]
    if not len(rows):
        return "not measured"
    first = rows.iloc[0]
    model = str(first.get("cpu_model", "")) or "an unrecorded CPU"
    cpus = int(rows["cpus"].max()) if "cpus" in rows else 0
    kind = str(first.get("kind", ""))
    if kind == "vm":
        hv = str(first.get("hypervisor", "")) or "an unnamed hypervisor"
        vmm = str(first.get("vmm", ""))
        where = f"a virtual machine with {cpus} vCPUs under {hv.upper() if hv == 'kvm' else hv}" + (
            f" ({vmm}, as its kernel command line names it)" if vmm else ""
        )
    else:
        where = f"{kind or 'a node of unrecorded kind'} with {cpus} CPUs"
    kernels = ", ".join(sorted(set(rows["kernel"].astype(str))))
    flags = ", ".join(sorted(set(rows["mitigations"].astype(str)))) if "mitigations" in rows else "not recorded"
    identity = str(first.get("cpu_identity", "") or "")
    memory = int(rows["memory_kb"].max()) if "memory_kb" in rows and rows["memory_kb"].max() > 0 else 0
    steal = rows["steal_share"].dropna() if "steal_share" in rows else pd.Series(dtype=float)
    details = "; ".join(
        d
        for d in (
            identity,
            f"{memory / 2**20:.1f} GiB of memory" if memory else "",
            f"the hypervisor stole {100 * steal.median():.2f} % of its CPU time during the cost probes "
            f"(median over {len(steal)} repetitions, at most {100 * steal.max():.2f} %)"
            if len(steal)
            else "",
        )
        if d
    )
    return (
        f"{model}"
        + (f" ({details})" if details else "")
        + f", {where}; Linux {kernels}; CPU mitigations {flags} as the kernel reports them"
    )


def _durations(claim: str, cost: pd.DataFrame, echo: pd.DataFrame | None, mpi: pd.DataFrame | None) -> str:
    """How long our measurement of a claim ran, per repetition and cell."""
    if claim in ("C1", "C2"):
        reps = cost["rep"].nunique() if len(cost) else 0
        return f"{reps} repetitions of batches of about 50 µs each"
    if claim.startswith("M"):
        return f"{mpi['rep'].nunique()} repetitions" if mpi is not None and len(mpi) else "not measured"
    if echo is None or "loaded_s" not in echo:
        return "not measured"
    lengths = sorted({round(float(x), 2) for x in echo["loaded_s"].dropna()})
    span = f"{lengths[0]:g}" + (f"-{lengths[-1]:g}" if len(lengths) > 1 else "")
    return f"{span} s per cell, warm-up included ({echo['rep'].nunique()} repetitions); the sources ran 60 s"
