"""A cluster study: one run of the config on k nodes, each node one occasion,
and the claims' verdicts pooled over the nodes (iolab.claims.kind_verdicts,
planned: the exact sign test over the k runs fixed in advance).

    python -m iolab.archive.study [--tables DIR] [--out DIR] [--run-hours H]
                                  (the workflow's `study` target: ./repro study)

Each node that ran the cost probes is judged on its own rows, as a run of
its own would be (iolab.claims.evaluate with ``node``); its
findings are one run's observations. Nodes are independent occasions only
when they are separate machines: nodes whose measurements ran under one
kernel (one boot id: network namespaces of one VM, two names for one host)
share every occasion effect, so the study pools them to show the plumbing
and decides nothing (``independent`` is false, each claim "not decided").
Writes DIR/verdicts.json, DIR/verdicts.md and a page, DIR/index.html.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import atomic, claims, paths, tables
from ..claims import kind_verdicts as pooled
from ..claims.verdicts import Outcome
from ..registry import COST_MODEL_EXPERIMENTS, REGISTRY
from ..report import artifact
from ..report.outputs import finding_rows
from . import pooling, publish
from .identity import sharing

TABLES = paths.REPO / "results" / "tables"
OUT = paths.REPO / "results" / "study"
NOT_INDEPENDENT = "not decided: the nodes are not independent occasions"


@dataclass(frozen=True)
class NodeRun:
    """One node of the study as one run: what it measured on, and when."""

    node: str
    started: str
    hostname: str
    boot_id: str
    cpu_model: str
    raw_files: int

    @property
    def machine(self) -> str:
        """What makes two nodes one machine: the running kernel's boot id
        (the hostname where an older sidecar has none)."""
        return self.boot_id or f"host {self.hostname}"


def node_identities(tables_dir: Path) -> dict[str, NodeRun]:
    """Each node of the claims' tables, from its raw files' sidecars."""
    seen: dict[str, list[dict[str, Any]]] = {}
    for name in sorted(e for e, x in REGISTRY.items() if x.claims):
        table = tables_dir / f"{name}.parquet"
        for entry in tables.table_sources(table) if table.exists() else []:
            sidecar = paths.REPO / entry["provenance"]
            if not sidecar.exists():
                continue
            prov = json.loads(sidecar.read_text())
            seen.setdefault(str(prov["node"]["name"]), []).append(prov)
    out = {}
    for node, provs in seen.items():
        hosts = [p.get("host") or {} for p in provs]
        out[node] = NodeRun(
            node,
            min(str(p.get("started", "")) for p in provs),
            str(hosts[0].get("hostname") or ""),
            str(hosts[0].get("boot_id") or ""),
            str((provs[0].get("cpu") or {}).get("model") or ""),
            len(provs),
        )
    return out


def shared_machines(runs: Mapping[str, NodeRun]) -> list[list[str]]:
    """Groups of two or more nodes that measured on one machine."""
    return [sorted(nodes) for nodes in sharing((r.node, r.machine) for r in runs.values()).values()]


def independence(identity: Mapping[str, NodeRun], nodes: Sequence[str]) -> tuple[bool, list[list[str]]]:
    """Whether ``nodes`` are independent occasions (two or more, each known,
    no two on one machine), and the groups that share a machine."""
    shared = shared_machines({n: identity[n] for n in nodes if n in identity})
    return len(nodes) >= 2 and not shared and all(n in identity for n in nodes), shared


def judged_nodes(loaded: Mapping[str, Any]) -> list[str]:
    """The nodes the claims can be judged on: every cost-model probe ran there."""
    sets = [set(loaded[e]["node"]) for e in COST_MODEL_EXPERIMENTS]
    return sorted(set.intersection(*sets)) if sets else []


def load_tables(tables_dir: Path) -> dict[str, Any]:
    missing = [e for e in COST_MODEL_EXPERIMENTS if not (tables_dir / f"{e}.parquet").exists()]
    if missing:
        raise FileNotFoundError(
            f"the study needs the cost probes' tables; {', '.join(missing)} missing under "
            f"{paths.relative(tables_dir)}: run the study through the workflow (./repro study)"
        )
    return {
        e: tables.load(e, tables_dir / f"{e}.parquet")
        for e, x in REGISTRY.items()
        if x.claims and (tables_dir / f"{e}.parquet").exists()
    }


def findings_by_node(loaded: Mapping[str, Any], nodes: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
    """Each node's findings as a run's numbers record them."""
    out = {}
    for node in nodes:
        out[node] = finding_rows(claims.evaluate_tables(loaded, node=node))
    return out


def run_hours(nodes: Sequence[str], given: float | None) -> tuple[float | None, str]:
    """One run's hours: as given, else the median node's measurement jobs."""
    if given is not None:
        return given, "as given (--run-hours)"
    spent = [s for n in nodes if (s := artifact.measure_seconds(n)) is not None]
    if not spent:
        return None, ""
    return statistics.median(spent) / 3600, f"the median of {len(spent)} node(s)' measurement jobs in this study"


def study(
    tables_dir: Path,
    given_hours: float | None = None,
    planned: Sequence[str] = (),
    skipped: Sequence[str] = (),
) -> tuple[dict[str, Any], list[str]]:
    """The study's verdicts as data, and as the lines the command prints.
    ``planned``: the nodes fixed in advance (the workflow's); the tables
    must hold exactly those, since a planned test is judged on exactly its
    runs. ``skipped``: nodes the workflow could not run, to say so."""
    loaded = load_tables(tables_dir)
    nodes = judged_nodes(loaded)
    if not nodes:
        raise ValueError("no node ran every cost probe (syscall, sendrecv, uring_batch): nothing to judge")
    if planned and set(planned) != set(nodes):
        raise ValueError(
            f"the study planned node(s) {', '.join(sorted(planned))} and the tables hold the cost probes of "
            f"{', '.join(nodes)}: a planned test is judged once, on exactly its nodes (re-run ./repro study)"
        )
    identity = node_identities(tables_dir)
    runs = [
        pooled.RunFindings(
            f"node:{n}",
            identity[n].started if n in identity else "",
            rows,
            identity[n].machine if n in identity else "",
        )
        for n, rows in findings_by_node(loaded, nodes).items()
    ]
    parts = pooled.pool(runs, "planned")
    independent, shared = independence(identity, nodes)
    lines = [f"study: {len(nodes)} node(s), each one run (planned: the exact sign test over the {len(nodes)} runs):"]
    for n in nodes:
        r = identity.get(n)
        lines.append(
            f"  node {n}: "
            + (
                f"{r.hostname}, {r.cpu_model}, boot id {r.boot_id or '?'}, first measured {r.started[:16]}"
                if r
                else "?"
            )
        )
    if skipped:
        lines.append(f"study: skipped before measuring, so not in the plan: {', '.join(skipped)}")
    if len(nodes) < 2:
        lines.append(f"study: {NOT_INDEPENDENT} (one node is one run: list k >= 2 separate machines)")
    for group in shared:
        first = identity[group[0]]
        same = f"boot id {first.boot_id}" if first.boot_id else f"hostname {first.hostname}, no boot id recorded"
        lines.append(
            f"study: {NOT_INDEPENDENT}: {', '.join(group)} measured under one kernel ({same}); "
            "namespaces or guests of one machine share its occasion. The verdicts below show the pooling, not evidence"
        )
    unknown = [n for n in nodes if n not in identity]
    if unknown:
        lines.append(f"study: {NOT_INDEPENDENT}: no sidecar names the machine of {', '.join(unknown)}")
    lines += pooling.claim_lines(parts, "planned")
    hours, source = run_hours(nodes, given_hours)
    lines += pooling.time_to_verdict(parts, hours, source)
    verdicts = pooling.claims_json(parts)
    if not independent:
        for v in verdicts.values():
            v["pooled_outcome"] = v["outcome"]
            v["outcome"] = NOT_INDEPENDENT
    decided = sum(v["outcome"] in (Outcome.REPRODUCED.value, Outcome.NOT_REPRODUCED.value) for v in verdicts.values())
    lines.append(f"study: {decided} claim(s) decided over {len(nodes)} node(s)")
    doc = {
        "mode": "planned",
        "independent": independent,
        "shared_machines": shared,
        "nodes": [
            {"node": n, **({k: getattr(identity[n], k) for k in NodeRun.__dataclass_fields__} if n in identity else {})}
            for n in nodes
        ],
        "claims": verdicts,
        "decided": decided,
        "skipped": list(skipped),
        "run_hours": hours,
        "report": list(lines),
    }
    return doc, lines


def write(doc: Mapping[str, Any], lines: Sequence[str], out: Path) -> None:
    """The study's files: verdicts.json, verdicts.md, and its page with the
    site's assets beside it."""
    out.mkdir(parents=True, exist_ok=True)
    atomic.write_json(out / "verdicts.json", doc)
    atomic.write_text(out / "verdicts.md", "\n".join(lines) + "\n")
    shutil.copytree(publish.TEMPLATES / "assets", out / "assets", dirs_exist_ok=True)
    atomic.write_text(out / "index.html", publish.study_page(doc, lines))


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m iolab.archive.study", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--tables", type=Path, default=TABLES, help="the run's tidy tables (default results/tables)")
    ap.add_argument("--out", type=Path, default=OUT, help="where to write the study (default results/study)")
    ap.add_argument("--run-hours", type=float, metavar="H", help="one node's run, in hours (default: measured)")
    ap.add_argument("--planned", default="", metavar="A,B,...", help="the nodes fixed in advance (the workflow's)")
    ap.add_argument("--skipped", default="", metavar="A,B,...", help="nodes the workflow skipped, to say so")
    args = ap.parse_args(argv)
    if args.run_hours is not None and not args.run_hours > 0:
        print(f"study: --run-hours {args.run_hours}: give a positive number of hours", file=sys.stderr)
        return 2
    try:
        doc, lines = study(
            args.tables,
            args.run_hours,
            [n for n in args.planned.split(",") if n],
            [n for n in args.skipped.split(",") if n],
        )
    except (FileNotFoundError, ValueError) as e:
        print(f"study: {e}", file=sys.stderr)
        return 1
    print("\n".join(lines))
    write(doc, lines, args.out)
    print(f"study: wrote {paths.relative(args.out)}/verdicts.json, verdicts.md and index.html")
    return 0


if __name__ == "__main__":
    sys.exit(main())
