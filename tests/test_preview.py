"""./repro preview: the shipped reference run's figures and paper, built
into results/preview/ with the Python environment alone, measuring nothing
and touching nothing of the checkout's own run."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import REPO, module_cli

from iolab import tables
from iolab.archive import preview
from iolab.archive.reanalyse import notebooks_for
from iolab.registry import NOTEBOOKS


def test_the_reference_run_feeds_every_notebook_it_can() -> None:
    present = {e for e in tables.TABLES if tables.raw_files_under(preview.SOURCE, e)}
    # It has no ib or epoll_wait run; every notebook that needs neither runs.
    assert {"claims", "cost_model", "echo", "collectives"} <= set(notebooks_for(present, 1)) <= set(NOTEBOOKS)


def test_the_paper_says_whose_run_it_shows() -> None:
    raw = [f for e in tables.TABLES for f in tables.raw_files_under(preview.SOURCE, e)]
    said = preview.whose(raw)
    sides = [json.loads(p.read_text()) for p in preview.SOURCE.rglob("rep*.provenance.json")]
    cpu = sides[0]["cpu"]
    assert said.startswith(f"a {cpu['count']}-CPU {cpu['model']} VM (Linux ")
    assert min(s["started"][:10] for s in sides) in said
    assert preview.whose([]) == "an unrecorded machine"


@pytest.mark.full
def test_preview_builds_the_reference_runs_paper_apart_from_this_checkouts_run(workflow: Path) -> None:
    res = module_cli("iolab.archive.preview", workflow, timeout=1200)
    assert res.returncode == 0, res.stderr[-3000:]
    out = workflow / "results" / "preview"
    assert res.stdout.splitlines()[-1].startswith("preview: results/preview/paper.pdf and "), res.stdout
    first = subprocess.run(
        ["pdftotext", "-l", "1", str(out / "paper.pdf"), "-"], capture_output=True, text=True, check=True
    ).stdout
    line = " ".join(first.split())
    assert line.startswith("This paper shows the reference run shipped in data/reference/, measured on a 2-CPU"), line[
        :300
    ]
    assert "not this machine" in line[:300]
    manifest = json.loads((out / "figures" / "manifest.json").read_text())["figures"]
    assert manifest and all((out / "figures" / f"{name}.svg").exists() for name in manifest)
    # The numbers are the reference run's (the notebooks' record).
    record = json.loads((REPO / "tests" / "data" / "reference_numbers.json").read_text())
    numbers = json.loads((out / "generated" / "numbers.json").read_text())
    assert numbers["t1_over_w"]["text"] == record["cost_model"]["t1_over_w"]["text"]
    # Nothing of the checkout's own run was read or written.
    assert not (workflow / "data" / "raw").exists() and not (workflow / "results" / "tables").exists()
    assert not (workflow / "paper" / "paper.pdf").exists() and not (workflow / "paper" / "generated").exists()
