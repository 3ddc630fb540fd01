"""Re-analyse an archived run offline: unpack a crate's raw data into this
checkout, check every checksum, and rebuild the tables, notebooks, figures
and paper from it exactly as the pipeline's analysis steps would, without
measuring anything. Then compare the paper's numbers with the crate's.

    python -m iolab.archive.reanalyse CRATE.zip           (./repro reanalyse CRATE.zip)

Run it in a fresh clone: it writes data/raw/, results/ and paper/ as a
pipeline run would, and refuses to mix the crate's run with one this
checkout already has. A crate from another commit is re-analysed with this
checkout's code, and the paper's first page says so.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from .. import atomic, paths, tables
from ..provenance import git_state, sidecar_for
from ..registry import NOTEBOOKS, REGISTRY, extra_output_paths
from ..report import paper
from .untrusted import DEFAULT_MAX_BYTES, Crate, CrateError, commit_or_none, shown
from .untrusted import crate_commit as crate_commit_of

NOTE_KEY = "reanalysis_note"
# A raw member: data/raw/<node>/<experiment>/<key>/rep<N>.<suffix>, the
# layout rules/probes.smk writes (the node's name as the schema allows it).
RAW_MEMBER = re.compile(
    r"data/raw/(?P<node>[A-Za-z0-9][A-Za-z0-9._-]*)/(?P<experiment>[a-z0-9_]+)/"
    r"(?P<key>[0-9a-f]{12})/rep(?P<rep>[1-9][0-9]{0,5})\.(?P<suffix>[a-z0-9_.]+)"
)


def raw_member_problem(name: str) -> str | None:
    """Why ``name`` is not a raw file, sidecar or companion file the
    registry declares for its experiment (None: it is one)."""
    m = RAW_MEMBER.fullmatch(name)
    if m is None:
        return "not laid out as data/raw/<node>/<experiment>/<key>/rep<N>.<suffix>"
    experiment = m["experiment"]
    if experiment not in REGISTRY:
        return f"no experiment is called {experiment!r}"
    allowed = {"csv", "provenance.json", *REGISTRY[experiment].extra_outputs}
    if m["suffix"] not in allowed:
        return f"{experiment} writes no rep<N>.{m['suffix']}"
    return None


def pipeline_parameters(notebook: str, tables_present: set[str], anytime_after: int = 0) -> dict[str, Any]:
    """The parameters rules/notebooks.smk passes ``notebook``: each table it
    reads (\"\" for one the run has not), where its outputs go, and for the
    claims the round-0 count of adaptive precision. Built here, never taken
    from a crate: a crate's parameter names or paths would be code."""
    nb = NOTEBOOKS[notebook]
    params: dict[str, Any] = {
        f"{e}_table": f"results/tables/{e}.parquet" if e in tables_present else "" for e in nb.tables
    }
    params |= {
        "figure_dir": "paper/figures",
        "numbers_out": f"results/numbers/{notebook}.json",
        "manifest_out": f"results/figures/{notebook}.json",
    }
    if nb.judges_claims and anytime_after:
        params["anytime_after"] = anytime_after
    return params


def recorded_anytime_after(crate: Crate, notebook: str) -> int:
    """The round-0 count the crate's run passed its claims notebook (0: it
    added no rounds), read as one bounded integer; nothing else of the
    executed notebook's parameters is used."""
    executed = crate.read_json(f"results/notebooks/{notebook}.ipynb")
    try:
        value = executed["metadata"]["papermill"]["parameters"].get("anytime_after", 0)
    except (KeyError, TypeError, AttributeError):
        return 0
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 100_000:
        raise CrateError(
            f"results/notebooks/{notebook}.ipynb: anytime_after is {str(value)[:40]!r}, not a repetition count"
        )
    return value


def place(root: Path, rel: str, data: bytes) -> bool:
    """Write ``data`` to root/rel unless that file is there already with the
    same bytes (False); one with other bytes stops it, so nothing measured
    is overwritten. For a local tree of raw files (``--raw-root``); a
    crate's members go through ``Crate.extract``."""
    target = root / rel
    if target.exists():
        if target.read_bytes() != data:
            raise CrateError(
                f"{rel} exists in this checkout with other bytes: re-analyse in a fresh "
                "clone (git clone, then ./repro reanalyse)"
            )
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    return True


def run_notebook(root: Path, notebook: str, params: dict[str, Any], executed: Path) -> None:
    """Run one notebook of ``root`` as rules/notebooks.smk does, with
    ``params``, writing the executed notebook to ``executed``."""
    script = subprocess.run(
        [
            sys.executable,
            "-m",
            "jupytext",
            "--quiet",
            "--to",
            "ipynb",
            "--output",
            "-",
            str(root / "notebooks" / f"{notebook}.py"),
        ],
        capture_output=True,
        check=True,
    )
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
        json.dump(params, f)  # JSON is YAML
        f.flush()
        res = subprocess.run(
            [
                sys.executable,
                "-m",
                "papermill",
                "--no-progress-bar",
                "--cwd",
                str(root),
                "-",
                str(executed),
                "-f",
                f.name,
            ],
            input=script.stdout,
            capture_output=True,
            cwd=root,
        )
    if res.returncode != 0:
        tail = res.stderr.decode(errors="replace").strip().splitlines()[-1:]
        raise CrateError(f"notebook {notebook} failed on the crate's data: {' '.join(tail)}")


def differences(want: dict[str, Any], got: dict[str, Any]) -> list[str]:
    """Keys whose entries differ between the crate's numbers and ours (the
    re-analysis note left out)."""
    keys = (set(want) | set(got)) - {NOTE_KEY}
    return sorted(k for k in keys if want.get(k) != got.get(k))


def _refuse_if_analysed(root: Path) -> None:
    existing = sorted((root / "results" / "tables").glob("*.parquet"))
    if existing:
        raise CrateError(
            f"this checkout has tables of its own ({paths.relative(existing[0])}): re-analyse "
            "in a fresh clone so the two runs do not mix"
        )


def rebuild(
    root: Path,
    raw: dict[str, list[str]],
    params: dict[str, dict[str, Any]],
    note: str,
    log: Any = print,
    left_out: dict[str, dict[str, str]] | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """The pipeline's analysis half without Snakemake: each experiment's
    table from its raw files (repository paths) and the nodes the run left
    it out of (``left_out``: experiment -> node -> reason), each notebook
    with its papermill parameters, then the numbers, the manifest and the
    paper. Returns the paper's numbers and the notebooks run."""
    for experiment, files in sorted(raw.items()):
        out = root / "results" / "tables" / f"{experiment}.parquet"
        out.parent.mkdir(parents=True, exist_ok=True)
        nodes = (left_out or {}).get(experiment, {})
        flags = [f"--left-out={node}={reason}" for node, reason in sorted(nodes.items())]
        try:
            built = tables.main([experiment, "--output", str(out), *flags, *(str(root / r) for r in files)]) == 0
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as e:
            # A raw file or sidecar that verifies but is not what its format
            # says (a crate made by hand): one line, not a traceback.
            raise CrateError(
                f"the {experiment} table could not be rebuilt from the crate's raw files: "
                f"{type(e).__name__}: {shown(e, 120)}"
            ) from e
        if not built:
            raise CrateError(f"the {experiment} table could not be rebuilt from its raw files")
    log(f"reanalyse: tables rebuilt: {', '.join(sorted(raw))}")
    (root / "results" / "notebooks").mkdir(parents=True, exist_ok=True)
    ran = []
    for notebook in NOTEBOOKS:
        if notebook in params:
            log(f"reanalyse: notebook {notebook}")
            run_notebook(root, notebook, params[notebook], root / "results" / "notebooks" / f"{notebook}.ipynb")
            ran.append(notebook)
    numbers = paper.merge_numbers([root / "results" / "numbers" / f"{nb}.json" for nb in ran])
    if note:
        numbers[NOTE_KEY] = {"value": None, "unit": "", "notebook": None, "note": "", "text": note}
    atomic.write_json(root / "paper" / "generated" / "numbers.json", numbers)
    atomic.write_json(
        root / "paper" / "figures" / "manifest.json",
        paper.merge_manifest([root / "results" / "figures" / f"{nb}.json" for nb in ran]),
    )
    missing = paper.build_pdf(root / "paper" / "paper.typ", root / "paper" / "paper.pdf")
    if missing:
        log(
            f'reanalyse: the paper shows "not measured" for {len(missing)} number(s) the run\'s config left '
            f"out: {', '.join(missing[:6])}"
        )
    return numbers, ran


# A node's name as the config allows it (config/schema.yaml).
_NODE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")


def _left_out(name: str, sources: Any) -> dict[str, str]:
    """node -> reason: the nodes a crate's table says the run left its
    experiment out of (iolab.privilege), each name checked to the config's
    form and each reason made printable, so neither can pass for a flag."""
    entries = sources.get("left_out", {}) if isinstance(sources, dict) else {}
    if not isinstance(entries, dict) or not all(
        isinstance(k, str) and _NODE.fullmatch(k) and isinstance(v, str) for k, v in entries.items()
    ):
        raise CrateError(f"{name}: its left_out is not a map of node names to reasons")
    return {node: shown(reason, 300) for node, reason in entries.items()}


def _raw_lists(crate: Crate, unpacked: set[str]) -> tuple[dict[str, list[str]], dict[str, dict[str, str]]]:
    """experiment -> the raw files its table was built from, from the
    crate's ``*.sources.json``; each must be a raw file the crate holds.
    And experiment -> the nodes the run left it out of, with why."""
    raw: dict[str, list[str]] = {}
    left_out: dict[str, dict[str, str]] = {}
    for name in crate.files("results/tables/"):
        if not name.endswith(".sources.json"):
            continue
        experiment = Path(name).name.removesuffix(".sources.json")
        if experiment not in tables.TABLES:
            raise CrateError(f"{name}: no experiment is called {experiment!r}")
        sources = crate.read_json(name)
        entries = sources.get("raw") if isinstance(sources, dict) else None
        if not isinstance(entries, list):
            raise CrateError(f"{name}: has no list of raw files")
        files = []
        for entry in entries:
            path = entry.get("raw") if isinstance(entry, dict) else None
            if not isinstance(path, str) or path not in unpacked or not path.endswith(".csv"):
                raise CrateError(f"{name}: lists {str(path)[:120]!r}, which is not a raw file of this crate")
            files.append(path)
        raw[experiment] = files
        if nodes := _left_out(name, sources):
            left_out[experiment] = nodes
    return raw, left_out


def reanalyse(crate_zip: Path, log: Any = print, max_bytes: int = DEFAULT_MAX_BYTES) -> dict[str, Any]:
    """Rebuild this checkout's paper from ``crate_zip``; returns what it
    did: files unpacked, tables and notebooks rebuilt, the commits, the
    numbers that differ from the crate's. The crate is untrusted data
    (iolab.archive.untrusted): its members are checked before anything is
    written, raw files land only under data/raw/, and the notebooks run
    with parameters built here."""
    root = paths.REPO
    with Crate(crate_zip, max_bytes) as crate:
        problems = crate.problems + crate.checksum_problems()
        if problems:
            raise CrateError(f"{crate_zip}: {len(problems)} problem(s), first: {problems[0]}; nothing was unpacked")
        raw_members = crate.files("data/raw/")
        bad = next(((n, p) for n in raw_members if (p := raw_member_problem(n))), None)
        if bad:
            raise CrateError(f"{bad[0]}: refused, {bad[1]}; nothing was unpacked")
        _refuse_if_analysed(root)
        crate_commit = crate_commit_of(crate.root.get("version", ""), crate_zip)
        raw, left_out = _raw_lists(crate, set(raw_members))
        # Only what a table was built from: each listed raw file, its
        # sidecar and the companions its experiment declares. Anything else
        # under data/raw/ is never written.
        named = {
            str(Path(member))
            for experiment, files in raw.items()
            for f in files
            for member in (Path(f), sidecar_for(Path(f)), *extra_output_paths(experiment, Path(f)))
        }
        wanted = [n for n in raw_members if n in named]
        unpacked = sum(crate.extract(name, root / "data" / "raw", root) for name in wanted)
        log(f"reanalyse: {unpacked} raw files and sidecars unpacked, every checksum matches")
        if skipped := len(raw_members) - len(wanted):
            log(f"reanalyse: skipped {skipped} raw member(s) that no table's *.sources.json names")
        ran_here = [nb for nb in NOTEBOOKS if crate.has(f"results/notebooks/{nb}.ipynb")]
        params = {
            nb: pipeline_parameters(
                nb, set(raw), recorded_anytime_after(crate, nb) if NOTEBOOKS[nb].judges_claims else 0
            )
            for nb in ran_here
        }
        # What the measuring run took: the appendix says it of that run.
        timings = [
            n
            for n in crate.listed
            if crate.has(n) and n.startswith("results/benchmarks/") and n.endswith(".tsv") and ".." not in n
        ]
        for name in timings:
            crate.extract(name, root / "results" / "benchmarks", root)
        if crate.has("results/nodes.json"):
            nodes = crate.read_json("results/nodes.json")
            if not isinstance(nodes, dict):
                raise CrateError("results/nodes.json: not an object of nodes")
            atomic.write_json(root / "results" / "nodes.json", nodes)
        archived = crate.read_json("paper/generated/numbers.json") if crate.has("paper/generated/numbers.json") else {}
        if not isinstance(archived, dict):
            archived = {}
    head = git_state(root)["commit"] or ""
    measured_at = f"commit {crate_commit[:12]}" if commit_or_none(crate_commit) else "an unrecorded commit"
    note = (
        f"Re-analysed from an archived run measured at {measured_at}, with the code of commit {head[:12]}."
        if head and crate_commit != head
        else ""
    )
    numbers, ran = rebuild(root, raw, params, note, log, left_out)
    return {
        "unpacked": unpacked,
        "tables": sorted(raw),
        "notebooks": ran,
        "crate_commit": crate_commit,
        "commit": head,
        "numbers": len(numbers),
        "differing": differences(archived, numbers),
    }


def notebooks_for(experiments: set[str], nodes: int) -> list[str]:
    """The notebooks a tree of raw files of ``experiments`` on ``nodes``
    nodes can run: each one's required experiments there, and some table
    of its to read."""
    return [
        name
        for name, nb in NOTEBOOKS.items()
        if set(nb.experiments) <= experiments and set(nb.tables) & experiments and nb.when(None, nodes)
    ]


def reanalyse_raw(raw_root: Path, log: Any = print) -> dict[str, Any]:
    """Treat a tree of raw files (such as the shipped data/reference) as a
    run: copy it into data/raw and rebuild the paper from it as the pipeline
    would, so that it can be archived and compared like any run."""
    root = paths.REPO
    _refuse_if_analysed(root)
    copied, raw = 0, {}
    for experiment in tables.TABLES:
        files = tables.raw_files_under(raw_root, experiment)
        for f in files:
            # The raw file, its sidecar and what the repetition wrote beside it.
            for src in (f, sidecar_for(f), *extra_output_paths(experiment, f)):
                if src.exists():
                    copied += place(root, f"data/raw/{src.relative_to(raw_root).as_posix()}", src.read_bytes())
        if files:
            raw[experiment] = [paths.relative(root / "data" / "raw" / Path(f).relative_to(raw_root)) for f in files]
    if not raw:
        raise CrateError(f"no raw files under {raw_root}")
    log(f"reanalyse: {copied} raw files and sidecars copied from {paths.relative(raw_root)}")
    nodes = len({Path(f).parts[2] for files in raw.values() for f in files})
    params = {name: pipeline_parameters(name, set(raw)) for name in notebooks_for(set(raw), nodes)}
    numbers, ran = rebuild(root, raw, params, f"Built from the raw files in {paths.relative(raw_root)}.", log)
    return {"unpacked": copied, "tables": sorted(raw), "notebooks": ran, "numbers": len(numbers), "differing": []}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m iolab.archive.reanalyse", description=__doc__.split("\n\n")[0])
    ap.add_argument("crate", type=Path, nargs="?", help="a crate written by ./repro archive")
    ap.add_argument(
        "--raw-root",
        type=Path,
        help="instead of a crate, a tree of raw files such as "
        "data/reference (the shipped run), analysed as a run of its own",
    )
    ap.add_argument(
        "--max-bytes",
        type=int,
        default=DEFAULT_MAX_BYTES,
        help=f"the most a crate may expand to (default {DEFAULT_MAX_BYTES})",
    )
    args = ap.parse_args(argv)
    if (args.crate is None) == (args.raw_root is None):
        ap.error("give a crate or --raw-root, not both")
    try:
        done = (
            reanalyse(args.crate.resolve(), max_bytes=args.max_bytes)
            if args.crate
            else reanalyse_raw(args.raw_root.resolve())
        )
    except CrateError as e:
        print(f"reanalyse: {e}", file=sys.stderr)
        return 1
    same = (
        "built from raw files alone"
        if not args.crate
        else "identical to the crate's"
        if not done["differing"]
        else f"{len(done['differing'])} differ from the crate's: "
        f"{', '.join(shown(k, 60) for k in done['differing'][:8])}"
    )
    source = args.crate.name if args.crate else paths.relative(args.raw_root.resolve())
    print(f"reanalyse: paper/paper.pdf rebuilt from {source}; {done['numbers']} numbers, {same}")
    return 0 if not done["differing"] else 3


if __name__ == "__main__":
    sys.exit(main())
