"""Notebooks: paired .py/.ipynb in sync, a tagged parameters cell, thin code,
and a by-hand run against the shipped reference data."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jupytext
import pytest
from conftest import REPO, tool_env

NOTEBOOKS = sorted((REPO / "notebooks").glob("*.py"))


@pytest.mark.parametrize("source", NOTEBOOKS, ids=lambda p: p.stem)
def test_pair_is_in_sync(source: Path) -> None:
    paired = source.with_suffix(".ipynb")
    assert paired.exists(), f"run: jupytext --sync {source}"
    from_py = [c.source for c in jupytext.read(source).cells]
    from_ipynb = [c.source for c in jupytext.read(paired).cells]
    assert from_py == from_ipynb, f"out of sync; run: jupytext --sync {source}"


@pytest.mark.parametrize("source", NOTEBOOKS, ids=lambda p: p.stem)
def test_first_code_cell_is_tagged_parameters(source: Path) -> None:
    code = [c for c in jupytext.read(source).cells if c.cell_type == "code"]
    assert "parameters" in code[0].metadata.get("tags", [])


@pytest.mark.parametrize("source", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_code_stays_thin(source: Path) -> None:
    # Logic belongs in iolab/: no function or class definitions in notebooks.
    for cell in jupytext.read(source).cells:
        if cell.cell_type == "code":
            assert "\ndef " not in "\n" + cell.source and "\nclass " not in "\n" + cell.source


@pytest.mark.parametrize("notebook,key", [("cost_model", "s_getppid_ns"),
                                          ("echo", "echo_floor_ns"),
                                          ("collectives", "mpi_tcp_bandwidth_mb_s")])
def test_runs_by_hand_against_reference_data(tmp_path: Path, notebook: str, key: str) -> None:
    out = tmp_path / "out"
    res = subprocess.run(
        [sys.executable, "-m", "papermill", "--no-progress-bar", f"{notebook}.ipynb",
         str(tmp_path / "executed.ipynb"), "-p", "figure_dir", str(out / "figures"),
         "-p", "numbers_out", str(out / "numbers.json"),
         "-p", "manifest_out", str(out / "manifest.json")],
        cwd=REPO / "notebooks", env=tool_env(), capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    numbers = json.loads((out / "numbers.json").read_text())
    assert 10 < numbers[key]["value"] < 100_000
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["figures"] and all((out / "figures" / f"{name}.svg").exists()
                                       for name in manifest["figures"])
