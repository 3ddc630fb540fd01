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
import zipfile
from pathlib import Path
from typing import Any

from .. import atomic, paths, tables
from ..provenance import git_state, sidecar_for
from ..registry import NOTEBOOKS, extra_output_paths
from ..report import paper
from . import crate

NOTE_KEY = "reanalysis_note"


def _members(z: zipfile.ZipFile, prefix: str) -> list[str]:
    return sorted(n for n in z.namelist() if n.startswith(prefix) and not n.endswith("/"))


def place(root: Path, rel: str, data: bytes) -> bool:
    """Write ``data`` to root/rel unless that file is there already with the
    same bytes (False); one with other bytes stops it, so nothing measured
    is overwritten."""
    target = root / rel
    if target.exists():
        if target.read_bytes() != data:
            raise crate.CrateError(f"{rel} exists in this checkout with other bytes: re-analyse in a fresh "
                                   "clone (git clone, then ./repro reanalyse)")
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    return True


def unpack_raw(z: zipfile.ZipFile, root: Path) -> int:
    """The crate's raw files and sidecars into root/data/raw; returns how
    many were new."""
    return sum(place(root, name, z.read(name)) for name in _members(z, "data/raw/"))


def notebook_parameters(z: zipfile.ZipFile, notebook: str) -> dict[str, Any]:
    """The parameters papermill ran ``notebook`` with in the archived run."""
    executed = json.loads(z.read(f"results/notebooks/{notebook}.ipynb"))
    params: dict[str, Any] = executed["metadata"]["papermill"]["parameters"]
    return params


def _papermill(root: Path, notebook: str, params: dict[str, Any]) -> None:
    """Run one notebook as rules/notebooks.smk does, with ``params``."""
    script = subprocess.run([sys.executable, "-m", "jupytext", "--quiet", "--to", "ipynb", "--output", "-",
                             str(root / "notebooks" / f"{notebook}.py")], capture_output=True, check=True)
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
        json.dump(params, f)          # JSON is YAML
        f.flush()
        res = subprocess.run([sys.executable, "-m", "papermill", "--no-progress-bar", "--cwd", str(root), "-",
                              str(root / "results" / "notebooks" / f"{notebook}.ipynb"), "-f", f.name],
                             input=script.stdout, capture_output=True, cwd=root)
    if res.returncode != 0:
        tail = res.stderr.decode(errors="replace").strip().splitlines()[-1:]
        raise crate.CrateError(f"notebook {notebook} failed on the crate's data: {' '.join(tail)}")


def differences(want: dict[str, Any], got: dict[str, Any]) -> list[str]:
    """Keys whose entries differ between the crate's numbers and ours (the
    re-analysis note left out)."""
    keys = (set(want) | set(got)) - {NOTE_KEY}
    return sorted(k for k in keys if want.get(k) != got.get(k))


def _refuse_if_analysed(root: Path) -> None:
    existing = sorted((root / "results" / "tables").glob("*.parquet"))
    if existing:
        raise crate.CrateError(f"this checkout has tables of its own ({paths.relative(existing[0])}): re-analyse "
                               "in a fresh clone so the two runs do not mix")


def rebuild(root: Path, raw: dict[str, list[str]], params: dict[str, dict[str, Any]], note: str,
            log: Any = print) -> tuple[dict[str, Any], list[str]]:
    """The pipeline's analysis half without Snakemake: each experiment's
    table from its raw files (repository paths), each notebook with its
    papermill parameters, then the numbers, the manifest and the paper.
    Returns the paper's numbers and the notebooks run."""
    for experiment, files in sorted(raw.items()):
        out = root / "results" / "tables" / f"{experiment}.parquet"
        out.parent.mkdir(parents=True, exist_ok=True)
        if tables.main([experiment, "--output", str(out), *(str(root / r) for r in files)]) != 0:
            raise crate.CrateError(f"the {experiment} table could not be rebuilt from its raw files")
    log(f"reanalyse: tables rebuilt: {', '.join(sorted(raw))}")
    (root / "results" / "notebooks").mkdir(parents=True, exist_ok=True)
    ran = []
    for notebook in NOTEBOOKS:
        if notebook in params:
            log(f"reanalyse: notebook {notebook}")
            _papermill(root, notebook, params[notebook])
            ran.append(notebook)
    numbers = paper.merge_numbers([root / "results" / "numbers" / f"{nb}.json" for nb in ran])
    if note:
        numbers[NOTE_KEY] = {"value": None, "unit": "", "notebook": None, "note": "", "text": note}
    atomic.write_json(root / "paper" / "generated" / "numbers.json", numbers)
    atomic.write_json(root / "paper" / "figures" / "manifest.json",
                      paper.merge_manifest([root / "results" / "figures" / f"{nb}.json" for nb in ran]))
    missing = paper.build_pdf(root / "paper" / "paper.typ", root / "paper" / "paper.pdf")
    if missing:
        log(f"reanalyse: the paper shows \"not measured\" for {len(missing)} number(s) the run's config left "
            f"out: {', '.join(missing[:6])}")
    return numbers, ran


def reanalyse(crate_zip: Path, log: Any = print) -> dict[str, Any]:
    """Rebuild this checkout's paper from ``crate_zip``; returns what it
    did: files unpacked, tables and notebooks rebuilt, the commits, the
    numbers that differ from the crate's."""
    root = paths.REPO
    problems = crate.verify(crate_zip)
    if problems:
        raise crate.CrateError(f"{crate_zip}: {len(problems)} file(s) do not match their checksums, first: "
                               f"{problems[0]}")
    _refuse_if_analysed(root)
    with zipfile.ZipFile(crate_zip) as z:
        metadata = {e["@id"]: e for e in json.loads(z.read("ro-crate-metadata.json"))["@graph"]}
        crate_commit = str(metadata["./"].get("version", ""))
        unpacked = unpack_raw(z, root)
        log(f"reanalyse: {unpacked} raw files and sidecars unpacked, every checksum matches")
        raw = {Path(name).name.removesuffix(".sources.json"): [e["raw"] for e in json.loads(z.read(name))["raw"]]
               for name in _members(z, "results/tables/") if name.endswith(".sources.json")}
        params = {nb: notebook_parameters(z, nb) for nb in NOTEBOOKS
                  if f"results/notebooks/{nb}.ipynb" in z.namelist()}
        if "results/nodes.json" in z.namelist():
            (root / "results").mkdir(exist_ok=True)
            (root / "results" / "nodes.json").write_bytes(z.read("results/nodes.json"))
        archived = json.loads(z.read("paper/generated/numbers.json")) \
            if "paper/generated/numbers.json" in z.namelist() else {}
    head = git_state(root)["commit"] or ""
    measured_at = f"commit {crate_commit[:12]}" if re.fullmatch(r"[0-9a-f]{40}", crate_commit) else \
        "an unrecorded commit"
    note = (f"Re-analysed from an archived run measured at {measured_at}, with the code of commit {head[:12]}."
            if head and crate_commit != head else "")
    numbers, ran = rebuild(root, raw, params, note, log)
    return {"unpacked": unpacked, "tables": sorted(raw), "notebooks": ran, "crate_commit": crate_commit,
            "commit": head, "numbers": len(numbers), "differing": differences(archived, numbers)}


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
        raise crate.CrateError(f"no raw files under {raw_root}")
    log(f"reanalyse: {copied} raw files and sidecars copied from {paths.relative(raw_root)}")
    # As the pipeline passes them: each table this data has, "" for the others.
    params = {name: {**{f"{e}_table": f"results/tables/{e}.parquet" if e in raw else "" for e in nb.tables},
                     "figure_dir": "paper/figures", "numbers_out": f"results/numbers/{name}.json",
                     "manifest_out": f"results/figures/{name}.json"}
              for name, nb in NOTEBOOKS.items() if set(nb.needs) <= set(raw) and set(nb.tables) & set(raw)
              and nb.when(None, len({Path(f).parts[2] for files in raw.values() for f in files}))}
    numbers, ran = rebuild(root, raw, params, f"Built from the raw files in {paths.relative(raw_root)}.", log)
    return {"unpacked": copied, "tables": sorted(raw), "notebooks": ran, "numbers": len(numbers), "differing": []}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m iolab.archive.reanalyse", description=__doc__.split("\n\n")[0])
    ap.add_argument("crate", type=Path, nargs="?", help="a crate written by ./repro archive")
    ap.add_argument("--raw-root", type=Path, help="instead of a crate, a tree of raw files such as "
                    "data/reference (the shipped run), analysed as a run of its own")
    args = ap.parse_args(argv)
    if (args.crate is None) == (args.raw_root is None):
        ap.error("give a crate or --raw-root, not both")
    try:
        done = reanalyse(args.crate.resolve()) if args.crate else reanalyse_raw(args.raw_root.resolve())
    except crate.CrateError as e:
        print(f"reanalyse: {e}", file=sys.stderr)
        return 1
    same = ("built from raw files alone" if not args.crate else "identical to the crate's"
            if not done["differing"] else
            f"{len(done['differing'])} differ from the crate's: {', '.join(done['differing'][:8])}")
    source = args.crate.name if args.crate else paths.relative(args.raw_root.resolve())
    print(f"reanalyse: paper/paper.pdf rebuilt from {source}; {done['numbers']} numbers, {same}")
    return 0 if not done["differing"] else 3


if __name__ == "__main__":
    sys.exit(main())
