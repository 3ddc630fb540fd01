"""The paper's artifact appendix, from the run itself and the repository:
where the artifact lives (its repository and DOI, from CITATION.cff), what
needs root and why (iolab.privilege), the oldest Linux each server preset
runs on (iolab.presets), what the run took (each job's wall time and peak
memory, as Snakemake's benchmark files recorded them, and the disk its raw
data hold), and where a re-run on this machine kind lands: each claim
part's range over the runs of distinct launches kept in data/records/,
with how often a held-out launch fell inside the others' range.

Written at the merge of the notebooks' numbers (iolab.report.paper), so it
sees the run's results/ but not the paper it is part of.
"""

from __future__ import annotations

import csv
import json
import math
import re
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from .. import paths, presets, privilege
from ..claims import CLAIM_TESTS, records
from ..rooms.mpi.stats import TRANSPORT_NAMES
from . import labels

Numbers = Mapping[str, Any]
BENCHMARKS = paths.REPO / "results" / "benchmarks"
# The numbers two runs are compared on: the cost model's terms and the echo
# servers' CPU per request at 50 connections (the site's headline
# quantities, iolab.archive.compare.QUESTIONS, which read this list).
# Each pattern's group "what" names the quantity within its headline.
HEADLINES = {
    "cost_model_terms": (
        "The cost model's terms (ns)",
        re.compile(r"^(?P<what>s_getppid|w_send|w_recv|t1_send|t1_recv|a_send|b_send|a_recv|b_recv)_ns$"),
    ),
    "echo_cpu_per_request": (
        "Echo servers: server CPU per request (ns), 50 connections",
        re.compile(r"^echo_(?P<what>.+)_c50_server_ns_per_request$"),
    ),
    "mpi_latency": ("MPI ping-pong latency (µs)", re.compile(r"^mpi_(?P<what>.+)_latency_us$")),
}
TERM_WORDS = {"s": "s", "w": "w", "t1": "t(1)", "a": "a", "b": "b"}


def quantity_words(headline: str, what: str) -> str:
    """A headline quantity as the reader reads it, not its key: a cost
    term as "t(1), send", an echo server by its preset, an MPI transport
    in words."""
    if headline == "cost_model_terms":
        term, _, side = what.partition("_")
        return f"{TERM_WORDS.get(term, term)}, {side}" if side != "getppid" else "s (getppid)"
    if headline == "mpi_latency":
        return TRANSPORT_NAMES.get(what, what)
    return labels.preset(what)


def raw_bytes(repo: Path) -> int:
    """The bytes of the raw files (and sidecars) the run's tables read: the
    same in the run and in a re-analysis of its crate, which unpacks them."""
    total = 0
    for sources in sorted((repo / "results" / "tables").glob("*.sources.json")):
        try:
            rows = json.loads(sources.read_text()).get("raw", [])
        except (OSError, ValueError, AttributeError):
            continue
        for row in rows if isinstance(rows, list) else []:
            for key in ("raw", "provenance"):
                f = repo / str(row.get(key, "")) if isinstance(row, dict) and row.get(key) else None
                if f is not None and f.is_file() and not f.is_symlink():
                    total += f.stat().st_size
    return total


def _jobs(root: Path) -> list[tuple[str, float, float]]:
    """(job, seconds, peak RSS in MB) of every benchmark file under ``root``."""
    out = []
    for f in sorted(root.rglob("*.tsv")) if root.exists() else []:
        with f.open() as handle:
            rows = list(csv.DictReader(handle, delimiter="\t"))
        for row in rows[:1]:
            try:
                seconds = float(row.get("s", "nan"))
                rss = float(row.get("max_rss", "nan"))
            except ValueError:
                continue
            out.append((str(f.relative_to(root)), seconds, rss))
    return out


def run_seconds(repo: Path = paths.REPO) -> float | None:
    """The seconds this checkout's last run spent in its measurement and
    notebook jobs (Snakemake's benchmark files); None where none were kept."""
    root = repo / "results" / "benchmarks"
    jobs = [s for sub in ("measure", "notebooks") for _, s, _ in _jobs(root / sub) if math.isfinite(s)]
    return sum(jobs) if jobs else None


def measure_seconds(node: str, repo: Path = paths.REPO) -> float | None:
    """The seconds this checkout's last run spent measuring on ``node``
    (its measurement jobs' benchmark files); None where none were kept."""
    jobs = [s for _, s, _ in _jobs(repo / "results" / "benchmarks" / "measure" / node) if math.isfinite(s)]
    return sum(jobs) if jobs else None


def resources(repo: Path = paths.REPO) -> str:
    """What the run took, in one sentence; "" where nothing was recorded."""
    root = repo / "results" / "benchmarks"
    measured = _jobs(root / "measure")
    notebooks = _jobs(root / "notebooks")
    raw = raw_bytes(repo)
    parts = []
    if measured:
        peak = max((r for _, _, r in measured if math.isfinite(r)), default=math.nan)
        parts.append(
            f"its {len(measured)} measurement jobs ran {sum(s for _, s, _ in measured) / 60:.1f} min in all"
            + (f" (peak memory of one job {peak:.0f} MB)" if math.isfinite(peak) else "")
        )
    if notebooks:
        peak = max((r for _, _, r in notebooks if math.isfinite(r)), default=math.nan)
        parts.append(
            f"its {len(notebooks)} notebooks {sum(s for _, s, _ in notebooks) / 60:.1f} min"
            + (f" (peak {peak:.0f} MB)" if math.isfinite(peak) else "")
        )
    if raw:
        parts.append(f"the raw data its tables read take {raw / 2**20:.1f} MiB of disk")
    if not parts:
        return ""
    return "This run: " + "; ".join(parts) + " (Snakemake's benchmark files, results/benchmarks/)."


def deposit(repo: Path = paths.REPO) -> str:
    """Where the artifact lives: CITATION.cff's repository and DOI (the
    one place both are declared), or that it has neither yet."""
    try:
        cff = yaml.safe_load((repo / "CITATION.cff").read_text()) or {}
    except (OSError, yaml.YAMLError):
        cff = {}
    url = str(cff.get("repository-code") or "") if isinstance(cff, dict) else ""
    doi = str(cff.get("doi") or "") if isinstance(cff, dict) else ""
    said = [f"the repository is {url}" if url else "CITATION.cff names no public repository yet"]
    said.append(f"the deposit's DOI is {doi}" if doi else "no DOI yet: the archive of a run is deposited by hand")
    text = "; ".join(said)
    return _sentence(text) + " (CITATION.cff and .zenodo.json hold both once deposited)."


def root_needs() -> str:
    """What a run needs root for and why, and what happens without it
    (iolab.privilege declares it)."""
    parts = [f"the {e} experiment ({why})" for e, why in privilege.ROOT_EXPERIMENTS.items()]
    parts += [why.replace("the ", "the MPI ", 1) for why in privilege.ROOT_TRANSPORTS.values()]
    tools = [
        f"the {e} experiment also needs {tool} installed (apt-get install {pkg})"
        for e, (tool, pkg) in privilege.TOOLS.items()
    ]
    return (
        "Root is needed for "
        + "; ".join(parts)
        + ". "
        + _sentence("; ".join(tools))
        + ". Without root the workflow leaves these out before the first job, says so in one line each and "
        "records them in results/nodes.json; the claims that read them say \u201cnot testable here\u201d. "
        "Everything else runs as an ordinary user; ./repro setup installs the system packages with apt-get, "
        "as root or through sudo."
    )


def kernel_rows(numbers: Numbers) -> list[dict[str, str]]:
    """The oldest Linux each echo preset this run configured runs on
    (iolab.presets.kernel_needed), one row per kernel version: the presets
    and the features that set it, oldest first."""
    e = numbers.get("echo_preset_flags")
    rows = e.get("value") if isinstance(e, dict) else None
    if not isinstance(rows, list):
        return []
    servers = {program: server for server, program in presets.SERVER_PROGRAMS.items()}
    by_version: dict[str, tuple[list[str], list[str]]] = {}
    for r in rows:
        server = servers.get(str(r.get("server")))
        if server is None:
            continue
        needed = presets.kernel_needed(str(r["preset"]), {"server": server, "flags": str(r["flags"]).split()})
        version, what = needed if needed is not None else ("any", "no io_uring")
        names, features = by_version.setdefault(version, ([], []))
        names.append(str(r["preset"]))
        if what not in features:
            features.append(what)
    order = sorted(by_version, key=lambda v: (v != "any", tuple(int(x) for x in v.split(".")) if v != "any" else ()))
    return [
        {
            "Linux": v if v == "any" else f"{v} or later",
            "presets": ", ".join(by_version[v][0]),
            "what needs it": "; ".join(by_version[v][1]),
        }
        for v in order
    ]


def _median(values: Sequence[Any]) -> float | None:
    v = [float(x) for x in values if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)]
    return statistics.median(v) if v else None


def _sig(x: float) -> str:
    return f"{x:,.0f}".replace(",", "\u2009") if abs(x) >= 100 else f"{x:.3g}"


def launch_values(held: Sequence[records.RunRecord]) -> dict[tuple[str, str], dict[str, float]]:
    """Per claim part, one value per launch: the median over its
    repetitions in that launch's run (the median of the runs' medians where
    one launch ran several, so that a launch counts once)."""
    per: dict[tuple[str, str], dict[str, list[float]]] = {}
    for rec in held:
        launch = rec.identity.launch or f"run {rec.identity.ident}"
        for f in rec.findings:
            value = _median(f.get("per_rep") or [])
            if value is not None:
                per.setdefault((str(f["claim"]), str(f["part"])), {}).setdefault(launch, []).append(value)
    return {part: {launch: statistics.median(v) for launch, v in by.items()} for part, by in per.items()}


def held_out(values: Sequence[float]) -> int:
    """How many of the launches' values lie within the range of the others
    (each held out in turn): how often the range held a new launch."""
    values = list(values)
    return sum(
        min(values[:i] + values[i + 1 :]) <= v <= max(values[:i] + values[i + 1 :]) for i, v in enumerate(values)
    )


def rerun_rows(numbers: Numbers, record_dir: Path) -> list[dict[str, str]]:
    """Each claim part measured on at least two launches of this machine
    kind (data/records/): this run's value, the range of the launches'
    values a re-run is expected in, and how often it held (a launch held
    out against the others' range)."""
    machine = numbers.get("kind_machine")
    kind = str(machine.get("value")) if isinstance(machine, dict) else ""
    held = [r for r in records.read_all(record_dir, CLAIM_TESTS, say=lambda _: None) if not kind or r.machine == kind]
    found = numbers.get("findings")
    here = {
        (str(f.get("claim")), str(f.get("part")).split(" [")[0]): _median(f.get("per_rep") or [])
        for f in (found.get("value") if isinstance(found, dict) else None) or []
        if isinstance(f, dict)
    }
    rows = []
    for (claim, part), by_launch in sorted(
        launch_values(held).items(),
        key=lambda x: (list(CLAIM_TESTS).index(x[0][0]) if x[0][0] in CLAIM_TESTS else 99, x[0][1]),
    ):
        values = list(by_launch.values())
        if len(values) < 2:
            continue
        lo, hi = min(values), max(values)
        mine = here.get((claim, part.split(" [")[0]))
        rows.append(
            {
                "claim": claim,
                "part": part.split(" [")[0],
                "this run": "" if mine is None else _sig(mine) + ("" if lo <= mine <= hi else " (outside)"),
                "range over launches": f"{_sig(lo)}\u2013{_sig(hi)}",
                "held": f"{held_out(values)} of {len(values)}",
            }
        )
    return rows


def entries(numbers: Numbers, repo: Path = paths.REPO) -> dict[str, dict[str, Any]]:
    """The appendix's entries for numbers.json."""
    out: dict[str, dict[str, Any]] = {}
    said = resources(repo)
    if said:
        out["artifact_resources"] = {"value": said, "text": said}
    seconds = run_seconds(repo)
    if seconds is not None:
        out["artifact_run_seconds"] = {"value": round(seconds, 1), "text": f"{seconds / 60:.1f} min"}
    for key, text in (("artifact_deposit", deposit(repo)), ("artifact_root", root_needs())):
        out[key] = {"value": text, "text": text}
    kernels = kernel_rows(numbers)
    if kernels:
        out["artifact_kernels"] = {"value": kernels, "text": f"{len(kernels)} rows"}
    rows = rerun_rows(numbers, repo / "data" / "records")
    if rows:
        launches = max(int(r["held"].split(" of ")[1]) for r in rows)
        out["artifact_rerun"] = {"value": rows, "text": f"{len(rows)} rows"}
        out["artifact_rerun_launches"] = {"value": launches, "text": str(launches)}
    for entry in out.values():
        entry.update({"unit": "", "notebook": None, "note": "written from the run"})
    return out


def _sentence(text: str) -> str:
    """``text`` with its first letter upper-case (str.capitalize would
    lower-case the rest: "CITATION.cff", "DOI")."""
    return text[:1].upper() + text[1:]
