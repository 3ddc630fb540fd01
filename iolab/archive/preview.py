"""Look before you measure: the figures and the paper of the reference run
shipped in data/reference/, built into results/preview/ with the Python
environment alone, measuring nothing (./repro preview).

The notebooks read the raw files where they lie (a raw-data root is a
table source, iolab.tables.load), with the parameters the pipeline would
pass them, and write their figures, numbers and executed copies under
results/preview/; the paper is compiled there from paper/paper.typ. Nothing
of this checkout's own run (data/raw/, results/tables/, paper/) is read or
written, so a preview never mixes with a measurement, and ``./repro all``
later measures as if it had never run. The paper's first line says whose
run it shows.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .. import atomic, paths, tables
from ..provenance import sidecar_for
from ..registry import NOTEBOOKS
from ..report import paper
from ..rooms.context import load_sidecar
from .reanalyse import NOTE_KEY, notebooks_for, run_notebook

OUT = paths.REPO / "results" / "preview"
SOURCE = paths.resolve(tables.REFERENCE)


class PreviewError(RuntimeError):
    """The preview cannot be built; the message is one line."""


def whose(raw: list[Path]) -> str:
    """Where and when the raw files were measured, in words, from their
    sidecars: "a 2-CPU AMD EPYC VM (Linux 6.18.44) on 2026-11-27"."""
    sides = [load_sidecar(r) for r in raw if sidecar_for(r).exists()]
    if not sides:
        return "an unrecorded machine"
    first = sides[0]
    cpu = first.get("cpu", {})
    kind = {"vm": "VM", "bare-metal": "machine", "container": "container"}.get(
        str(first.get("virtualization", {}).get("kind")), "machine"
    )
    kernel = str(first.get("host", {}).get("kernel", "")).split("-")[0]
    days = sorted({str(s.get("started", ""))[:10] for s in sides})
    when = days[0] if len(days) == 1 else f"{days[0]} to {days[-1]}"
    return f"a {cpu.get('count', '?')}-CPU {cpu.get('model', 'CPU')} {kind} (Linux {kernel}) on {when}"


def build(out: Path = OUT, source: Path = SOURCE, log: Any = print) -> Path:
    """Build the preview of the raw files under ``source`` into ``out``;
    returns the paper's path."""
    raw = {e: tables.raw_files_under(source, e) for e in tables.TABLES}
    present = {e for e, files in raw.items() if files}
    if not present:
        raise PreviewError(f"no raw files under {paths.relative(source)}")
    nodes = len({f.relative_to(source).parts[0] for files in raw.values() for f in files})
    run = notebooks_for(present, nodes)
    # A fresh folder each time: what an earlier preview drew never stays.
    shutil.rmtree(out, ignore_errors=True)
    for sub in ("figures", "numbers", "manifests", "notebooks", "generated"):
        (out / sub).mkdir(parents=True)
    where = paths.relative(source)
    for notebook in run:
        log(f"preview: notebook {notebook}")
        params: dict[str, Any] = {f"{e}_table": where if e in present else "" for e in NOTEBOOKS[notebook].tables} | {
            "figure_dir": paths.relative(out / "figures"),
            "numbers_out": paths.relative(out / "numbers" / f"{notebook}.json"),
            "manifest_out": paths.relative(out / "manifests" / f"{notebook}.json"),
        }
        run_notebook(paths.REPO, notebook, params, out / "notebooks" / f"{notebook}.ipynb")
    # The appendix's account of a run reads <run root>/results/: the
    # preview has none of its own, and this checkout's is not the reference run's.
    numbers = paper.merge_numbers([out / "numbers" / f"{nb}.json" for nb in run], run_root=out)
    shown = whose([f for files in raw.values() for f in files])
    note = (
        f"This paper shows the reference run shipped in {where}/, measured on {shown}, not this machine; "
        "./repro all measures this one."
    )
    numbers[NOTE_KEY] = {"value": None, "unit": "", "notebook": None, "note": "", "text": note}
    atomic.write_json(out / "generated" / "numbers.json", numbers)
    atomic.write_json(
        out / "figures" / "manifest.json", paper.merge_manifest([out / "manifests" / f"{nb}.json" for nb in run])
    )
    for name in ("paper.typ", "references.yml"):
        shutil.copy2(paths.REPO / "paper" / name, out / name)
    paper.build_pdf(out / "paper.typ", out / "paper.pdf")
    return out / "paper.pdf"


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(
        prog="python -m iolab.archive.preview",
        description=f"The figures and the paper of the reference run shipped in {paths.relative(SOURCE)}/, "
        f"built into {paths.relative(OUT)}/ with the Python environment alone, measuring nothing.",
    ).parse_args(argv)
    started = time.monotonic()
    try:
        pdf = build()
    except (PreviewError, RuntimeError, ValueError, OSError, subprocess.CalledProcessError) as e:
        print(f"preview: {e}", file=sys.stderr)
        return 1
    figures = len(json.loads((pdf.parent / "figures" / "manifest.json").read_text())["figures"])
    print(
        f"preview: {paths.relative(pdf)} and {figures} figures in {paths.relative(pdf.parent / 'figures')}/, "
        f"from the reference run, in {time.monotonic() - started:.0f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
