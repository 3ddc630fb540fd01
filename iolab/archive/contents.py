"""What a run's crate says about the run besides its files: the raw files
its tables read, the software and nodes behind them, the digests of its
code, the claims' verdicts, and its citation (CITATION.cff and the
.zenodo.json derived from it). iolab.archive.crate packs these into the
crate's metadata."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from .. import packages
from ..codehash import analysing_digest, measuring_digest, measuring_sources
from ..provenance import git_state
from ..registry import REGISTRY
from .untrusted import CrateError, commit_or_none, shown


def measured_raw(root: Path) -> list[dict[str, str]]:
    """The raw files (with sidecars) the run's tidy tables read, from each
    table's sources record; a run that built no table measured nothing."""
    rows = []
    for sources in sorted((root / "results" / "tables").glob("*.sources.json")):
        experiment = sources.name.removesuffix(".sources.json")
        for entry in json.loads(sources.read_text())["raw"]:
            rows.append({"experiment": experiment, **entry})
    if not rows:
        raise CrateError(
            f"nothing measured yet under {root}: run `./repro all` (or `snakemake --cores all`) first, then archive"
        )
    return rows


def citation(root: Path) -> dict[str, Any]:
    cff: dict[str, Any] = yaml.safe_load((root / "CITATION.cff").read_text())
    return cff


def zenodo_metadata(root: Path) -> dict[str, Any]:
    """.zenodo.json, derived from CITATION.cff so the two never disagree."""
    cff = citation(root)
    creators = [
        {"name": a.get("name") or f"{a.get('family-names', '')}, {a.get('given-names', '')}".strip(", ")}
        | ({"orcid": a["orcid"].rsplit("/", 1)[-1]} if a.get("orcid") else {})
        | ({"affiliation": a["affiliation"]} if a.get("affiliation") else {})
        for a in cff.get("authors", [])
    ]
    meta: dict[str, Any] = {
        "title": cff["title"],
        "upload_type": "dataset",
        "creators": creators,
        "description": " ".join(cff.get("message", "").split()) or cff["title"],
        "license": str(cff.get("license", "")).lower(),
        "keywords": list(cff.get("keywords", [])),
        "version": str(cff.get("version", "")),
        "notes": "A Workflow Run RO-Crate of one iolab run: raw measurements with provenance, the "
        "workflow, tables, notebooks, figures and paper. Re-check it with `./repro verify`.",
    }
    if cff.get("repository-code"):
        meta["related_identifiers"] = [
            {"identifier": cff["repository-code"], "relation": "isSupplementTo", "resource_type": "software"}
        ]
    return meta


def apt_versions() -> dict[str, str]:
    """Installed versions of the Debian packages ./repro's commands install
    (iolab.packages, the one place they are named)."""
    names = [*packages.BOOTSTRAP, *packages.everything()]
    res = subprocess.run(["dpkg-query", "-W", "-f", "${Package}\t${Version}\n", *names], capture_output=True, text=True)
    return dict(line.split("\t", 1) for line in res.stdout.splitlines() if "\t" in line)


def environment(root: Path, raw: list[dict[str, str]]) -> dict[str, Any]:
    """The software and the nodes behind the raw files."""
    nodes: dict[str, Any] = {}
    for entry in raw:
        side = json.loads((root / entry["provenance"]).read_text())
        node = side["node"]["name"]
        nodes.setdefault(
            node,
            {
                "kind": side["node"].get("kind"),
                "cpu_model": (side.get("cpu") or {}).get("model"),
                "cpus": (side.get("cpu") or {}).get("count"),
                "kernel": (side.get("host") or {}).get("kernel"),
                # One boot of the node's kernel: runs that share it are
                # occasions of one launch (iolab.archive.pooling).
                "boot_id": (side.get("host") or {}).get("boot_id"),
                "toolchain": side.get("toolchain"),
                "mitigations": (side.get("mitigations") or {}).get("state"),
            },
        )
    return {"python": sys.version.split()[0], "apt": apt_versions(), "nodes": nodes}


def measured_with_todays_code(root: Path, experiment: str, commits: set[str | None]) -> str | None:
    """Why the raw files of ``experiment``, measured at ``commits`` (their
    sidecars' git commits), cannot be said to come from the checkout's code
    at ``root``; None when they can: measured at its commit, at a commit
    from which git shows no change to the experiment's measuring sources,
    or in a copy without git by itself (neither side knows a commit)."""
    head = git_state(root)["commit"]
    if head is None:
        return None if commits == {None} else "raw files measured at a commit this copy (without git) cannot check"
    sources = measuring_sources(experiment)
    for commit in sorted(commits, key=str):
        if commit == head:
            continue
        if commit is None:
            return "raw files that record no commit"
        if commit_or_none(commit) is None:
            return f"raw files whose recorded commit {shown(commit, 40)!r} is not a git commit"
        res = subprocess.run(
            ["git", "-C", str(root), "diff", "--quiet", "--end-of-options", commit, head, "--", *sources],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if res.returncode == 1:
            return f"its measuring code changed since {commit[:12]}, where its raw files were measured"
        if res.returncode != 0:
            return f"commit {commit[:12]}, where its raw files were measured, is not in this checkout"
    return None


def code(root: Path, raw: list[dict[str, str]]) -> dict[str, Any]:
    """Digests of the code behind the run, so that a later checkout can tell
    which of its numbers were measured or analysed with other code:
    per experiment, its measuring sources (iolab.codehash, what its run key
    digests besides the settings) where its raw files were measured with
    this checkout's code, and the reason where that cannot be said
    ("unrecorded": raw files re-analysed from another run); and the analysis
    (tidy steps, statistics, numbers, figures and notebooks)."""
    commits: dict[str, set[str | None]] = {}
    for entry in raw:
        if entry["experiment"] in REGISTRY:
            side = json.loads((root / entry["provenance"]).read_text())
            git = side.get("git") if isinstance(side.get("git"), dict) else {}
            commits.setdefault(entry["experiment"], set()).add(git.get("commit"))
    measured, unrecorded = {}, {}
    for experiment, seen in sorted(commits.items()):
        why = measured_with_todays_code(root, experiment, seen)
        if why is None:
            measured[experiment] = measuring_digest(experiment, root)
        else:
            unrecorded[experiment] = why
    return {"measured": measured, "unrecorded": unrecorded, "analysed": analysing_digest(root)}


def verdicts(root: Path) -> list[dict[str, Any]]:
    """Each claim part's value, interval, rule, margin and outcome, as the
    claims notebook handed them to the paper."""
    numbers = root / "results" / "numbers" / "claims.json"
    if not numbers.exists():
        return []
    findings = json.loads(numbers.read_text()).get("findings", {}).get("value", [])
    return [
        {
            k: f.get(k)
            for k in (
                "claim",
                "part",
                "setup",
                "context",
                "quoted",
                "rule",
                "margin",
                "estimate",
                "reps",
                "outcome",
                "reason",
            )
        }
        for f in findings
    ]


def package_version(module: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(module)
    except PackageNotFoundError:
        return ""
