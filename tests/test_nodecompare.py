"""The node-comparison notebook and its module, on two node kinds made from
the shipped reference data: a copy of the local node relabelled bare-metal,
with known scale factors, so every ratio has a known true value."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import REPO, tool_env

from iolab import tables
from iolab.claims import nodecompare

MPI_SCALE = 0.8  # bare-metal MPI times are 0.8 of the VM's
ECHO_SCALE = 1.25  # bare-metal serves 1.25x the requests


def _two_kinds(tmp_path: Path) -> dict[str, Path]:
    out = {}
    for experiment in ("syscall", "sendrecv", "uring_batch", "echo", "mpi"):
        vm = tables.load(experiment, REPO / "data" / "reference")
        metal = vm.assign(node="metal", kind="bare-metal")
        if experiment == "mpi":
            metal["ns"] = metal["ns"] * MPI_SCALE
        if experiment == "echo":
            metal["rps"] = metal["rps"] * ECHO_SCALE
        both = pd.concat([vm, metal], ignore_index=True)
        out[experiment] = tmp_path / f"{experiment}.parquet"
        both.to_parquet(out[experiment])
    return out


def test_ratios_recover_known_scale_factors(tmp_path: Path) -> None:
    t = _two_kinds(tmp_path)
    mpi = pd.read_parquet(t["mpi"])
    kinds = nodecompare.node_kinds(mpi)
    assert kinds == {"local": "vm", "metal": "bare-metal"}
    assert nodecompare.pick_pair(kinds) == ("metal", "local")
    assert nodecompare.pick_pair({"a": "vm", "b": "vm"}) is None
    _, mpi_summary = nodecompare.summaries(None, mpi)
    r = nodecompare.mpi_ratios(mpi_summary, "metal", "local")
    assert len(r) > 50 and r["ratio"].round(9).eq(MPI_SCALE).all()
    echo_summary, _ = nodecompare.summaries(pd.read_parquet(t["echo"]), None)
    er = nodecompare.echo_ratios(echo_summary, "metal", "local")
    rps = er[er["metric"] == "rps"]["ratio"]
    assert rps.round(9).eq(round(1 / ECHO_SCALE, 9)).all()  # the VM serves 0.8x
    cpu = er[er["metric"] == "server_ns_per_request"]["ratio"]
    assert cpu.round(9).eq(1.0).all()


def test_notebook_compares_two_kinds(tmp_path: Path) -> None:
    t = _two_kinds(tmp_path)
    out = tmp_path / "out"
    args = []
    for name, key in (
        ("syscall", "syscall_table"),
        ("sendrecv", "sendrecv_table"),
        ("uring_batch", "uring_batch_table"),
        ("echo", "echo_table"),
        ("mpi", "mpi_table"),
    ):
        args += ["-p", key, str(t[name])]
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "papermill",
            "--no-progress-bar",
            "nodes.ipynb",
            str(tmp_path / "executed.ipynb"),
            *args,
            "-p",
            "figure_dir",
            str(out / "figures"),
            "-p",
            "numbers_out",
            str(out / "numbers.json"),
            "-p",
            "manifest_out",
            str(out / "manifest.json"),
        ],
        cwd=REPO / "notebooks",
        env=tool_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    numbers = json.loads((out / "numbers.json").read_text())
    assert numbers["node_kinds"]["value"] == 2
    assert numbers["node_pair"]["text"] == "metal (bare-metal) and local (vm)"
    assert numbers["nodes_mpi_bcast_worst_ratio"]["value"] == pytest.approx(MPI_SCALE)
    assert numbers["nodes_echo_rps_median_ratio"]["value"] == pytest.approx(1 / ECHO_SCALE)
    assert numbers["node_metal_s_ns"]["value"] == numbers["node_local_s_ns"]["value"]
    for name in ("nodes_costs", "nodes_mpi_ratio", "nodes_echo_ratio"):
        assert (out / "figures" / f"{name}.svg").exists()
    # Drawn as HPC HUB drew it: every size and a <= 256 B row, the quoted
    # figures over ours.
    manifest = (out / "manifest.json").read_text()
    assert "every size and up to 256 B" in manifest and "Nodes: metal (bare-metal) / local (vm)" in manifest
    svg = (out / "figures" / "nodes_mpi_ratio.svg").read_text()
    assert "HPC HUB worst (quoted)" in svg and "bcast, \u2264 256 B" in svg
