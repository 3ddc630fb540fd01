"""Assemble the paper: merge notebooks' numbers and figure manifests, then
compile the Typst source to PDF.

    python -m iolab.report.paper numbers results/numbers/*.json -o paper/generated/numbers.json
    python -m iolab.report.paper manifest results/figures/*.json -o paper/figures/manifest.json
    python -m iolab.report.paper build paper/paper.typ -o paper/paper.pdf
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

from .. import atomic, paths


def quoted_numbers() -> dict[str, Any]:
    """The source articles' figures, labelled as quoted (see iolab.quoted)."""
    from ..quoted import QUOTED

    return {
        key: {
            "value": q.value,
            "text": q.number,
            "unit": q.unit,
            "notebook": None,
            "quoted_from": q.source,
            "note": f"quoted: {q.setup}",
        }
        for key, q in QUOTED.items()
    }


def merge_numbers(fragments: list[Path], run_root: Path = paths.REPO) -> dict[str, Any]:
    """The notebooks' numbers, the quoted ones, the abstract, and the
    appendix's account of the run whose results/ is under ``run_root``."""
    merged: dict[str, Any] = quoted_numbers()
    for f in sorted(fragments):
        for key, entry in json.loads(f.read_text()).items():
            if key in merged:
                first = merged[key]["notebook"] or "iolab/quoted.py"
                raise ValueError(f"number {key!r} is produced by both {first} and {entry['notebook']}")
            merged[key] = entry
    # The abstract, written from everything the notebooks decided, and the
    # artifact appendix, from the run's results.
    from . import artifact, checks
    from .summary import write

    # Each number a failed check concerns, with the words the paper prints
    # beside it (the ``opt`` of paper/paper.typ).
    flagged = checks.flags(merged)
    flags = {"check_flags": {"value": flagged, "text": "", "unit": "", "notebook": None, "note": "checks"}}
    # A title never states a number a check doubts: it falls back to the plain one.
    cell, plain = merged.get("paper_title_cell"), merged.get("paper_title_plain")
    if isinstance(cell, dict) and cell.get("text") in flagged and isinstance(plain, dict) and "paper_title" in merged:
        merged["paper_title"] = {**merged["paper_title"], "value": plain["value"], "text": plain["text"]}
    for key, entry in {**write(merged), **artifact.entries(merged, run_root), **flags}.items():
        if key in merged:
            raise ValueError(f"number {key!r} is produced by both a notebook and the abstract or appendix")
        merged[key] = entry
    return merged


def figure_id(name: str, raw: list[dict[str, Any]]) -> str:
    """A figure's short identity: its name and the raw files it rests on
    (repository paths, which are also their entities in a run's crate, and
    their SHA-256), digested. The paper's appendix prints it; `python -m
    iolab.archive.crate figure-ids CRATE.zip` recomputes it from a crate."""
    lines = [name, *sorted(f"{r['raw']} {r['sha256']}" for r in raw)]
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:12]


def merge_manifest(fragments: list[Path]) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    for f in sorted(fragments):
        frag = json.loads(f.read_text())
        for name, fig in frag["figures"].items():
            if name in figures:
                raise ValueError(f"figure {name!r} is produced by two notebooks")
            figures[name] = {
                **fig,
                "notebook": frag["notebook"],
                "executed_notebook": f"results/notebooks/{Path(frag['notebook']).stem}.ipynb",
                "tables": frag["tables"],
                "raw": frag["raw"],
                "git": frag["git"],
                "executed": frag["executed"],
                "id": figure_id(name, frag["raw"]),
            }
    return {"format": "iolab-figures/1", "figures": figures}


def build_pdf(source: Path, output: Path) -> list[str]:
    """Compile the paper; the keys of the numbers it shows as "not measured"
    (the run's config left out what they describe), in order of appearance."""
    import typst

    with atomic.atomic_path(output) as tmp:
        typst.compile(str(source), output=str(tmp), root=str(paths.REPO))
    tagged = json.loads(typst.query(str(source), "<not-measured>", field="value", root=str(paths.REPO)))
    return list(dict.fromkeys(str(k) for k in tagged))


def crowded_figures(manifest: Path) -> list[str]:
    """A line per figure whose labels its own layout check found printed
    over a panel or each other (``plots.style.overlapping_labels``)."""
    if not manifest.is_file():
        return []
    figures = json.loads(manifest.read_text()).get("figures", {})
    return [
        f"figure {name!r} prints labels over a panel or each other: {', '.join(fig['overlapping_labels'][:4])}"
        for name, fig in sorted(figures.items())
        if fig.get("overlapping_labels")
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m iolab.report.paper", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("action", choices=["numbers", "manifest", "build"])
    ap.add_argument("inputs", nargs="+", type=Path)
    ap.add_argument("-o", "--output", required=True, type=Path)
    args = ap.parse_args(argv)
    try:
        if args.action == "numbers":
            atomic.write_json(args.output, merge_numbers(args.inputs))
        elif args.action == "manifest":
            atomic.write_json(args.output, merge_manifest(args.inputs))
        else:
            missing = build_pdf(args.inputs[0], args.output)
            for line in crowded_figures(args.inputs[0].parent / "figures" / "manifest.json"):
                print(f"iolab: warning: {line}", file=sys.stderr)
            if missing:
                print(
                    f'iolab: warning: the paper shows "not measured" for {len(missing)} number(s) this run '
                    f"did not produce: {', '.join(missing)} (its text discusses the paper overlay's cells; "
                    "this config leaves them out)",
                    file=sys.stderr,
                )
    except (ValueError, RuntimeError) as e:
        print(f"iolab: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
