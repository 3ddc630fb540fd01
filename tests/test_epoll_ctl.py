"""The epoll_ctl experiment, added by DESIGN.md's "Adding an experiment":
the probe mode (sanitizer build), the workflow measuring it only where a
config gives its section, its tidy rows, and its figure from them."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
from conftest import copy_workflow, snakemake
from probe_support import measured_rows, refusal

from iolab.rooms.cost_probes import present_epoll_ctl as epoll_ctl
from iolab.rooms.cost_probes import summaries as models

ON = "experiments:\n  epoll_ctl: {}\n"


def test_the_probe_times_a_mod_of_a_tcp_socket(native_build: Path, tmp_path: Path) -> None:
    measured = measured_rows(native_build, tmp_path / "epoll_ctl.csv", "epoll-ctl")
    assert set(measured["variant"]) == {"mod"} and set(measured["transport"]) == {"tcp"} and len(measured) == 6
    # A flag the mode does not take is refused.
    assert "--variants" in refusal(native_build, "epoll-ctl", "--variants", "mod")


def test_it_runs_where_a_config_gives_its_section_and_its_figure_draws(tmp_path: Path) -> None:
    wd = copy_workflow(tmp_path / "iolab")
    (wd / "on.yaml").write_text(ON)
    args = ("--cores", "all", "--configfile", "config/overlays/smoke.yaml")
    # Without its section no job measures it, and the notebook is told so.
    plan = snakemake(wd, "-n", "-p", "--forceall", *args)
    assert plan.returncode == 0, plan.stderr[-2000:]
    assert "measure_epoll_ctl" not in plan.stdout and "-p epoll_ctl_table ''" in plan.stdout, plan.stdout[-2000:]
    res = snakemake(wd, "results/tables/epoll_ctl.parquet", "results/tables/syscall.parquet", *args, "on.yaml")
    assert res.returncode == 0, res.stderr[-3000:]
    table = pd.read_parquet(wd / "results" / "tables" / "epoll_ctl.parquet")
    measured = table[~table["warmup"]]
    assert set(measured["variant"]) == {"mod"} and measured["rep"].nunique() >= 2
    assert (measured["ns_per_call"] > 0).all()
    plan = snakemake(wd, "-n", "-p", "results/notebooks/cost_model.ipynb", *args, "on.yaml")
    assert plan.returncode == 0, plan.stderr[-3000:]
    assert "-p epoll_ctl_table results/tables/epoll_ctl.parquet" in plan.stdout + plan.stderr
    # Its figure: one point per repetition for s and for the MOD.
    syscall = pd.read_parquet(wd / "results" / "tables" / "syscall.parquet")
    node = str(measured["node"].iloc[0])
    fig = epoll_ctl.figure(models.measured(table, node), models.measured(syscall, node))
    points = [line for line in fig.axes[0].get_lines() if line.get_marker() == "o"]
    assert [len(line.get_ydata()) for line in points] == [
        syscall.loc[~syscall["warmup"], "rep"].nunique(),
        measured["rep"].nunique(),
    ]
    plt.close(fig)
