"""Summaries of the echo experiment: per configuration, connections and
message size, the median over repetitions (with its 95 % interval) of
throughput, CPU per request, latency percentiles and the batch size each
server reached; and paired ratios between configurations, formed within
each repetition (cells of one repetition run close together in time) and
then summarised across repetitions.

Cells measured under several setups (the load generator's client model,
the layout and the requests in flight per connection) are kept apart
(``client``, ``layout`` and ``pipeline`` are part of every key);
``one_setup`` keeps one per node: the sources' (rust_echo_bench's
thread-per-connection client, server and client sharing every CPU) for the
claims, ours (our event-loop client, on io_uring where the node's kernel
allowed it, else on epoll, each pinned to its own CPUs) for the figures,
each where it ran."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import pandas as pd

from ...estimation.intervals import across_reps
from ...presets import SERVER_PROGRAMS
from ...quoted import U1_RPS, U2_COLUMNS, U2_RPS, cell_of

KEYS = ["node", "client", "layout", "pipeline", "preset", "server", "connections", "bytes"]
# A setup: the load generator's model, where the two sides ran, and the
# requests in flight per connection.
SETUP = ["client", "layout", "pipeline"]
SOURCE_CLIENT = "thread-per-connection"  # rust_echo_bench's model, which every source used
# Ours: the default setup's client "auto" runs the io_uring loop where the
# node's kernel allows it, else the epoll one (``echo.resolve_auto_client``).
OUR_CLIENTS = ("event-loop-uring", "event-loop")
SOURCE_LAYOUT = "shared"  # the sources pinned nothing
OUR_LAYOUT = "pinned"
PING_PONG = 1  # one request in flight per connection, as the sources ran
SetupChoice = Mapping[str, str | int | tuple[str, ...]]
SOURCE_SETUP: SetupChoice = {"client": SOURCE_CLIENT, "layout": SOURCE_LAYOUT, "pipeline": PING_PONG}
OUR_SETUP: SetupChoice = {"client": OUR_CLIENTS, "layout": OUR_LAYOUT, "pipeline": PING_PONG}
# What tables written before the client, layout and pipeline columns existed ran.
UNRECORDED_SETUP = {"client": "event-loop", "layout": OUR_LAYOUT, "pipeline": PING_PONG}


def with_setup(echo: pd.DataFrame) -> pd.DataFrame:
    """``echo`` with ``client``, ``layout`` and ``pipeline`` columns (tables
    from before they existed were measured with the epoll event-loop client,
    pinned, one request in flight)."""
    missing = {c: UNRECORDED_SETUP[c] for c in SETUP if c not in echo}
    return echo.assign(**missing) if missing else echo


def one_setup(echo: pd.DataFrame, prefer: SetupChoice) -> pd.DataFrame:
    """Per node, the cells of the ``prefer`` setup: for the client model, the
    layout and then the pipeline depth, the first preferred one that node ran
    (a column may name several, best first), else everything it ran."""
    echo = with_setup(echo)
    for column in SETUP:
        wanted = prefer[column]
        for value in (wanted,) if isinstance(wanted, str | int) else wanted:
            has = set(echo.loc[echo[column] == value, "node"])
            keep = (echo[column] == value) | ~echo["node"].isin(has)
            echo = echo[keep.to_numpy()]
    return echo


def claims_view(echo: pd.DataFrame | None, node: str) -> pd.DataFrame | None:
    """``node``'s cells under the sources' setup where it ran (what the
    claims judge); None when the echo experiment did not run there."""
    here = echo[echo["node"] == node] if echo is not None else None
    return one_setup(here, SOURCE_SETUP) if here is not None and len(here) else None


def our_view(echo: pd.DataFrame | None, node: str) -> pd.DataFrame | None:
    """``node``'s cells under our setup (the pinned event-loop client) where
    it ran: what reads a server's own CPU, and the other client a claim's
    part is checked against; None when the echo experiment did not run there."""
    here = echo[echo["node"] == node] if echo is not None else None
    return one_setup(here, OUR_SETUP) if here is not None and len(here) else None


CLIENTS_PAIR = ("default", "epoll")


def clients_view(echo: pd.DataFrame, node: str, pair: tuple[str, str] = CLIENTS_PAIR) -> pd.DataFrame:
    """The io_uring/epoll comparison the claims read (``pair``: the default
    ring against epoll) under each setup ``node`` ran it with, against
    connections at the smallest message size both measured: per setup,
    connections and metric (requests/s, server CPU per request), the median
    paired ratio over repetitions with its 95 % interval, and each side's
    client busy share (of a CPU). Empty where fewer than two setups ran it."""
    cols = ["setup", "client", "layout", "connections", "bytes", "metric", "ratio", "low", "high", "client_busy"]
    here = with_setup(echo[(echo["node"] == node) & (echo["status"] == "ok")])
    here = here[here["pipeline"] == PING_PONG]
    both = here[here["preset"].isin(pair)]
    setups = both.groupby(["client", "layout"])["preset"].nunique()
    setups = setups[setups == 2]
    if len(setups) < 2:
        return pd.DataFrame(columns=cols)
    rows = []
    for client, layout in setups.index:
        mine = both[(both["client"] == client) & (both["layout"] == layout)]
        size = int(mine["bytes"].min())
        label = f"{client} client, {layout} CPUs"
        for metric in RATIO_METRICS:
            r = paired_ratios(mine[mine["bytes"] == size], pair[0], pair[1], metric)
            for c, g in r.groupby("connections"):
                e = across_reps(g["ratio"].to_numpy(float))
                busy = mine.loc[(mine["connections"] == c) & (mine["bytes"] == size), "client_busy"]
                rows.append((label, client, layout, int(c), size, metric, e.value, e.low, e.high, float(busy.median())))
    return pd.DataFrame(rows, columns=cols)


def clients_planned(echo: pd.DataFrame, node: str, pair: tuple[str, str] = CLIENTS_PAIR) -> bool:
    """Whether ``node``'s run planned ``pair`` under more than one client
    setup (its cells of any status): the two-client figure is then drawn,
    from what was measured, even where one setup's cells all failed."""
    here = with_setup(echo[echo["node"] == node])
    both = here[here["preset"].isin(pair)]
    return both.groupby(["client", "layout"]).ngroups > 1


def clients_sentence(view: pd.DataFrame) -> str:
    """Where the two clients give the io_uring/epoll comparison opposite
    signs (each interval clear of 1, on either side), and their client
    CPU there, in words; or that they agree in sign wherever both decide."""
    if view.empty:
        return ""
    flips, both_clear = [], 0
    for (c, metric), g in view.groupby(["connections", "metric"]):
        above = g[g["low"] > 1]
        below = g[g["high"] < 1]
        both_clear += len(above) + len(below) >= 2
        if len(above) and len(below):
            what = "requests/s" if metric == "rps" else "server CPU per request"
            a, b = above.iloc[0], below.iloc[0]
            flips.append(
                f"at c = {int(c)} the {what} ratio is {a['ratio']:.2f} [{a['low']:.2f}, {a['high']:.2f}] under the "
                f"{a['setup']} (client busy {a['client_busy']:.2f} of a CPU) and {b['ratio']:.2f} "
                f"[{b['low']:.2f}, {b['high']:.2f}] under the {b['setup']} (client {b['client_busy']:.2f})"
            )
    if not flips and not both_clear:
        return (
            "In no cell do both setups' intervals clear 1, so this run cannot tell whether the two clients "
            "give the comparison opposite signs; the claims read the sources' setup, the figures ours."
        )
    if not flips:
        return (
            f"In the {both_clear} cell(s) where both setups' intervals clear 1, the two clients give the "
            "comparison the same sign; the claims read the sources' setup, the figures ours."
        )
    return (
        "The two clients give opposite signs: "
        + "; ".join(flips)
        + ". The client's model changes how requests batch at the server and what the client itself costs, "
        "so the claims (the sources' thread-per-connection client) and the figures (our event-loop client) "
        "answer under different setups, and each says which."
    )


def setup_note(echo: pd.DataFrame) -> str:
    """A short label of the setup, for a claim part measured on ``echo``."""
    echo = with_setup(echo)
    clients, layouts = sorted(set(echo["client"])), sorted(set(echo["layout"]))
    depths = sorted({int(d) for d in echo["pipeline"]} - {PING_PONG})
    ours = f"{' and '.join(clients)} client, {' and '.join(layouts)} CPUs" + (
        f", {' and '.join(map(str, depths))} requests in flight" if depths else ""
    )
    if clients == [SOURCE_CLIENT] and layouts == [SOURCE_LAYOUT]:
        return f"{ours}, as the sources"
    return f"{ours}; the sources used thread-per-connection, shared CPUs"


METRICS = [
    "rps",
    "server_ns_per_request",
    "client_ns_per_request",
    "p50_us",
    "p99_us",
    "p999_us",
    "sqes_per_enter",
    "events_per_wait",
    "resched_ipis_per_request",
    "client_busy",
    "server_busy",
]


def summarize(echo: pd.DataFrame) -> pd.DataFrame:
    """Per configuration and cell: each metric's median over repetitions, its
    95 % interval (``<metric>_low``/``_high``; infinite with fewer than 6
    repetitions) and the interval a re-run is expected in (``_pred_low``/
    ``_pred_high``), and the number of repetitions."""
    ok = with_setup(echo)
    ok = ok[ok["status"] == "ok"]
    rows = []
    for key, g in ok.groupby(KEYS, sort=True):
        row: dict[str, object] = dict(zip(KEYS, key, strict=True))
        for m in METRICS:
            values = g[m].dropna().to_numpy(float)
            if values.size == 0:
                row.update(
                    {
                        m: math.nan,
                        f"{m}_low": math.nan,
                        f"{m}_high": math.nan,
                        f"{m}_pred_low": math.nan,
                        f"{m}_pred_high": math.nan,
                    }
                )
                continue
            e = across_reps(values)
            row.update(
                {
                    m: e.value,
                    f"{m}_low": e.low,
                    f"{m}_high": e.high,
                    f"{m}_pred_low": e.pred_low,
                    f"{m}_pred_high": e.pred_high,
                    f"{m}_estimate": e,
                }
            )
        row["reps"] = len(g)
        rows.append(row)
    return pd.DataFrame(rows)


def paired_ratios(
    echo: pd.DataFrame, numerator: str, denominator: str, metric: str = "rps", carry: Sequence[str] = ()
) -> pd.DataFrame:
    """numerator/denominator of ``metric`` per node, repetition and cell
    (connections, bytes), from the two presets' cells of the same repetition
    and setup. Each column in ``carry`` comes along from both cells, as
    ``<column>_numerator`` and ``<column>_denominator``."""
    ok = with_setup(echo)
    ok = ok[ok["status"] == "ok"]
    cell = ["node", *SETUP, "rep", "connections", "bytes"]
    kept = list(dict.fromkeys(carry))
    columns = list(dict.fromkeys([metric, *kept]))
    a = ok[ok["preset"] == numerator][[*cell, *columns]]
    b = ok[ok["preset"] == denominator][[*cell, *columns]]
    both = a.merge(b, on=cell, suffixes=("_numerator", "_denominator"))
    both["numerator"], both["denominator"] = both[f"{metric}_numerator"], both[f"{metric}_denominator"]
    both["ratio"] = both["numerator"] / both["denominator"]
    carried = [f"{c}_{side}" for c in kept for side in ("numerator", "denominator")]
    return both[[*cell, "ratio", "numerator", "denominator", *carried]]


def ratio_per_rep(ratios: pd.DataFrame, connections: int, bytes_: int) -> pd.Series:
    """The per-repetition ratios of one cell (of one node and setup:
    ``one_setup`` first where several ran), indexed by repetition."""
    sel = ratios[(ratios["connections"] == connections) & (ratios["bytes"] == bytes_)]
    if sel[["node", *SETUP]].drop_duplicates().shape[0] > 1:
        raise ValueError(
            "ratios of several nodes or setups in one cell; select one node and keep one setup with echostats.one_setup"
        )
    return sel.sort_values("rep").set_index("rep")["ratio"].astype(float)


def ratio_of_means(ratios: pd.DataFrame, connections: int, bytes_: int) -> float:
    """The mean over repetitions of the numerator over that of the
    denominator, in one cell: shown beside the median of per-repetition
    ratios (the verdicts' estimand) where a claim's margin is narrow."""
    sel = ratios[(ratios["connections"] == connections) & (ratios["bytes"] == bytes_)]
    return float(sel["numerator"].mean() / sel["denominator"].mean()) if len(sel) else float("nan")


def select(echo: pd.DataFrame, node: str, presets: list[str] | None = None) -> pd.DataFrame:
    """``node``'s cells, of ``presets`` only when given (a notebook parameter)."""
    rows = echo[echo["node"] == node]
    if presets:
        unknown = sorted(set(presets) - set(rows["preset"]))
        if unknown:
            raise ValueError(
                f"preset {unknown[0]!r} was not measured on {node} (measured: {', '.join(sorted(set(rows['preset'])))})"
            )
        rows = rows[rows["preset"].isin(presets)]
    return rows


def describe(echo: pd.DataFrame, node: str, floor: float, cost_node: str) -> str:
    """One line on what the echo table holds."""
    return (
        f"node {node}: {len(echo)} cells, {int((echo['status'] == 'ok').sum())} measured, "
        f"{echo['rep'].nunique()} repetitions; floor 2w = {floor:.0f} ns (cost probes of node {cost_node})"
    )


def unavailable(echo: pd.DataFrame) -> pd.DataFrame:
    """Configurations that could not run, and why (one row per preset and reason)."""
    bad = echo[echo["status"] != "ok"]
    return bad.groupby(["preset", "status", "reason"]).size().rename("cells").reset_index()


def unavailable_text(echo: pd.DataFrame) -> str:
    """What could not run, for a reader: per preset and kind of reason (the
    reason with its counts masked), how many cells at which connections,
    and the first cell's reason; "none" when every cell ran. A preset that
    failed alike in a dozen cells is one clause, not a dozen."""
    bad = echo[echo["status"] != "ok"]
    if not len(bad):
        return "none"
    bad = bad.assign(kind=bad["reason"].astype(str).str.replace(r"\d+", "N", regex=True))
    clauses = []
    for (preset, _), g in bad.groupby(["preset", "kind"], sort=True):
        cells = len(g)
        conns = ", ".join(str(int(c)) for c in sorted(set(g["connections"])))
        where = f"{cells} cell{'s' if cells != 1 else ''} at c = {conns}"
        first = str(g["reason"].iloc[0])
        alike = "; the others alike, with other counts" if g["reason"].nunique() > 1 else ""
        clauses.append(f"{preset} ({where}{alike}): {first}")
    return "; ".join(clauses)


def value(summary: pd.DataFrame, preset: str, connections: int, bytes_: int, metric: str = "rps") -> float:
    if not len(summary):
        return float("nan")
    row = summary[
        (summary["preset"] == preset) & (summary["connections"] == connections) & (summary["bytes"] == bytes_)
    ]
    return float(row[metric].iloc[0]) if len(row) else float("nan")


def seed_table(echo: pd.DataFrame) -> pd.DataFrame:
    """The part-1 table (connections x bytes, io_uring and epoll): the
    article's requests/s, quoted, beside ours where we measured the cell,
    under the source's setup where it ran (``our setup`` says which)."""
    chosen = one_setup(echo, SOURCE_SETUP)
    summary = summarize(chosen)
    setup = setup_note(chosen)
    rows = []
    for (c, b), quoted_uring in sorted(U1_RPS["io_uring"].items()):
        rows.append(
            {
                "connections": c,
                "bytes": b,
                "io_uring (quoted)": quoted_uring,
                "epoll (quoted)": U1_RPS["epoll"][(c, b)],
                "io_uring (ours)": value(summary, "default", c, b),
                "epoll (ours)": value(summary, "epoll", c, b),
                "our setup": setup,
            }
        )
    return pd.DataFrame(rows)


# Part 3's systems and ours: the source's row label -> our preset.
PART3_SYSTEMS = {
    "net/http (epoll netpoller)": "go_net",
    "go-uring reactor": "go_uring",
    "go-uring reactor, SQ_POLL": "go_uring_sqpoll",
}


def part3_table(echo: pd.DataFrame) -> pd.DataFrame:
    """Part 3's table (the Go systems' requests/s per cell), quoted, beside
    our Go servers' medians in the same cells under the sources' setup where
    it ran (nan where we did not measure the cell)."""
    chosen = one_setup(echo, SOURCE_SETUP)
    summary = summarize(chosen)
    setup = setup_note(chosen)
    rows = []
    for system, preset in PART3_SYSTEMS.items():
        for label, quoted in zip(U2_COLUMNS, U2_RPS[system], strict=True):
            c, b = cell_of(label)
            rows.append(
                {
                    "system (quoted)": system,
                    "ours": preset,
                    "cell": label,
                    "quoted": quoted,
                    "measured": value(summary, preset, c, b),
                    "our setup": setup,
                }
            )
    return pd.DataFrame(rows)


def node_overlay(echo: pd.DataFrame, node: str) -> pd.DataFrame | None:
    """``model_overlay`` of one node's servers; None where the echo
    experiment ran on other nodes only."""
    summary = summarize(one_setup(echo, OUR_SETUP))
    overlay = model_overlay(summary[summary["node"] == node])
    return overlay if len(overlay) else None


def model_overlay(summary: pd.DataFrame, min_connections: int = 50) -> pd.DataFrame:
    """Measured server CPU per request against the batch size each server
    reached, for the cost-model figure: io_uring presets at their SQEs per
    io_uring_enter; epoll at n = 1 (one syscall per operation). The C
    servers only: the model prices system calls, and the Go servers add a
    runtime's own cost on top."""
    rows = summary[(summary["connections"] >= min_connections) & summary["server"].isin(["epoll", "uring"])]
    out = pd.DataFrame(
        {
            "n": rows["sqes_per_enter"].where(rows["server"] == "uring", 1.0),
            "server_ns_per_request": rows["server_ns_per_request"],
            "low": rows["server_ns_per_request_low"],
            "high": rows["server_ns_per_request_high"],
            "events_per_wait": rows["events_per_wait"],
            "preset": rows["preset"],
            "connections": rows["connections"].astype(int),
            "bytes": rows["bytes"].astype(int),
            "label": rows["preset"] + " c=" + rows["connections"].astype(str),
            "server": rows["server"],
        }
    )
    return out.dropna(subset=["n", "server_ns_per_request"]).reset_index(drop=True)


GO_BASE = "go_net"
RATIO_METRICS = ("rps", "server_ns_per_request")


def discussed_cells(echo: pd.DataFrame) -> list[tuple[int, int]]:
    """The cells the paper's text discusses: c = 50 (or the nearest measured)
    and the largest c, at the smallest message size."""
    ok = with_setup(echo)
    ok = ok[ok["status"] == "ok"]
    if ok.empty:
        return []
    b = int(ok["bytes"].min())
    conns = sorted(set(ok.loc[ok["bytes"] == b, "connections"].astype(int)))
    first = min(conns, key=lambda c: abs(c - 50))
    return list(dict.fromkeys([(first, b), (conns[-1], b)]))


def ratios_to_base(echo: pd.DataFrame, cells: Sequence[tuple[int, int]]) -> pd.DataFrame:
    """Every preset's requests/s and server CPU per request over its base's
    (epoll for the C servers, Go net for the Go ones), formed within each
    repetition, in ``cells``: median and 95 % interval across repetitions.
    Columns: preset, base, metric, connections, bytes, ratio, low, high, reps."""
    ok = with_setup(echo)
    presets = sorted(set(ok.loc[ok["status"] == "ok", "preset"]))
    rows = []
    for preset in presets:
        base = GO_BASE if preset.startswith("go_") else "epoll"
        if preset == base or base not in presets:
            continue
        for metric in RATIO_METRICS:
            r = paired_ratios(echo, preset, base, metric)
            for c, b in cells:
                per_rep = ratio_per_rep(r, c, b)
                if len(per_rep):
                    e = across_reps(per_rep, predict=False)
                    rows.append(
                        {
                            "preset": preset,
                            "base": base,
                            "metric": metric,
                            "connections": c,
                            "bytes": b,
                            "ratio": e.value,
                            "low": e.low,
                            "high": e.high,
                            "reps": e.n,
                            "estimate": e,
                        }
                    )
    return pd.DataFrame(
        rows, columns=["preset", "base", "metric", "connections", "bytes", "ratio", "low", "high", "reps", "estimate"]
    )


def preset_flags(echo: pd.DataFrame) -> pd.DataFrame:
    """What each preset measured here runs: its server program and flags, as
    the sweep's settings gave them (the table's ``flags``)."""
    rows = [
        {
            "preset": name,
            "server": SERVER_PROGRAMS[str(g["server"].iloc[0])],
            "flags": str(g["flags"].iloc[0]) or "(none)",
        }
        for name, g in echo.groupby("preset", sort=True)
    ]
    return pd.DataFrame(rows, columns=["preset", "server", "flags"])
