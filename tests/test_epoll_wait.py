"""The epoll_wait experiment, added by following DESIGN.md's "Adding an
experiment" as written: the probe mode (sanitizer build), its tidy rows,
and the workflow measuring it unless its switch is off."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from conftest import copy_workflow, snakemake
from probe_support import measured_rows, refusal

OFF = "experiments:\n  epoll_wait: {enabled: false}\n"


def test_the_probe_times_a_ready_and_an_empty_wait(native_build: Path, tmp_path: Path) -> None:
    measured = measured_rows(native_build, tmp_path / "epoll_wait.csv", "epoll-wait")
    assert sorted(set(measured["variant"])) == ["empty", "ready"]
    assert (measured.groupby("variant").size() == 6).all()
    assert "--variants" in refusal(native_build, "epoll-wait", "--variants", "full")


def test_the_workflow_measures_it_and_the_notebook_reads_it(tmp_path: Path) -> None:
    wd = copy_workflow(tmp_path / "iolab")
    (wd / "off.yaml").write_text(OFF)
    args = ("--cores", "all", "--configfile", "config/overlays/smoke.yaml")
    res = snakemake(wd, "results/tables/epoll_wait.parquet", *args)
    assert res.returncode == 0, res.stderr[-3000:]
    table = pd.read_parquet(wd / "results" / "tables" / "epoll_wait.parquet")
    measured = table[~table["warmup"]]
    assert sorted(set(measured["variant"])) == ["empty", "ready"]
    assert measured["rep"].nunique() >= 2 and (measured["ns_per_call"] > 0).all()
    plan = snakemake(wd, "-n", "-p", "results/notebooks/cost_model.ipynb", *args)
    assert plan.returncode == 0, plan.stderr[-3000:]
    assert "-p epoll_wait_table results/tables/epoll_wait.parquet" in plan.stdout + plan.stderr
    # Switched off, no job measures it and the notebook is told so.
    off = snakemake(wd, "-n", "-p", "--forceall", *args, "off.yaml")
    assert off.returncode == 0, off.stderr[-2000:]
    assert "measure_epoll_wait" not in off.stdout and "-p epoll_wait_table ''" in off.stdout, off.stdout[-2000:]
