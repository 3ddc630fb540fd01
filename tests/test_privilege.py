"""Root where root is needed, known before the first job (iolab.privilege).

A workflow planned by a user other than root (uid 65534, by setpriv) leaves
out the trace experiment and the netns transports with one line each,
records them in results/nodes.json, and gives the trace table the node's
row with the reason, from no raw file; the MPI repetitions it plans are
not the directory a run as root fills. The same plan as root is the
negative control: it leaves nothing out."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from conftest import copy_workflow, others_can_enter, snakemake, tool_env

from iolab import privilege

NOBODY = 65534


pytestmark = [
    pytest.mark.skipif(
        os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv to plan as uid 65534"
    ),
    pytest.mark.skipif(
        not others_can_enter(Path(sys.prefix)),
        reason=f"uid 65534 cannot enter {sys.prefix} (a folder above it is closed to other users)",
    ),
]
ROOT_ONLY = {
    "trace": "bpftrace attaches kernel tracepoints, which needs root; run as root to measure it",
    "mpi netns": "the netns transport creates network namespaces, which needs root; run as root to measure it",
    "mpi netns_tbf": "the netns_tbf transport creates network namespaces and a tbf qdisc in them, which needs root; "
    "run as root to measure it",
}


@pytest.fixture
def nobodys_workflow() -> Iterator[Path]:
    """A copy of the workflow that uid 65534 owns, where it can go (not under
    root's pytest directory)."""
    top = Path(tempfile.mkdtemp(dir="/tmp"))
    try:
        top.chmod(0o755)
        wd = copy_workflow(top / "iolab")
        for path in [top, *top.rglob("*")]:
            os.chown(path, NOBODY, NOBODY, follow_symlinks=False)
        yield wd
    finally:
        shutil.rmtree(top, ignore_errors=True)


def as_nobody(wd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(tool_env(), HOME=str(wd), XDG_CACHE_HOME=str(wd / ".cache"))
    return subprocess.run(
        [
            "setpriv",
            f"--reuid={NOBODY}",
            f"--regid={NOBODY}",
            "--clear-groups",
            sys.executable,
            "-m",
            "snakemake",
            *args,
        ],
        cwd=wd,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


def planned_jobs(stdout: str) -> dict[str, int]:
    """Rule -> count from a dry run's job table."""
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", stdout, re.M)}


def mpi_keys(stdout: str) -> set[str]:
    return set(re.findall(r"data/raw/local/mpi/([0-9a-f]{12})/", stdout))


def test_planning_without_root_leaves_out_what_needs_it_before_the_first_job(nobodys_workflow: Path) -> None:
    wd = nobodys_workflow
    plan = as_nobody(wd, "-n", "-p", "--cores", "1")
    assert plan.returncode == 0, plan.stderr[-2000:]
    said = [ln for ln in plan.stderr.splitlines() if ln.startswith("iolab: leaving out ")]
    assert said == [f"iolab: leaving out {part} on local: {why}" for part, why in ROOT_ONLY.items()], said
    jobs = planned_jobs(plan.stdout)
    assert "measure_trace" not in jobs and jobs["measure_mpi"] > 0 and jobs["tidy_table"] > 0
    # The negative control: planned as root, nothing is left out and the
    # trace is measured; and its MPI repetitions go to another directory.
    as_root = snakemake(wd, "-n", "-p", "--cores", "1")
    assert as_root.returncode == 0, as_root.stderr[-2000:]
    assert "needs root" not in as_root.stderr
    if shutil.which("bpftrace"):
        assert "leaving out" not in as_root.stderr and planned_jobs(as_root.stdout)["measure_trace"] > 0
    assert mpi_keys(plan.stdout) and mpi_keys(as_root.stdout) and not mpi_keys(plan.stdout) & mpi_keys(as_root.stdout)


def test_what_was_left_out_is_recorded_and_no_raw_file_says_skipped(nobodys_workflow: Path) -> None:
    wd = nobodys_workflow
    res = as_nobody(wd, "--cores", "1", "results/nodes.json", "results/tables/trace.parquet")
    assert res.returncode == 0, res.stderr[-3000:]
    nodes = json.loads((wd / "results" / "nodes.json").read_text())
    assert nodes["local"]["left_out"] == ROOT_ONLY and "trace" not in nodes["local"]["experiments"]
    table = pd.read_parquet(wd / "results" / "tables" / "trace.parquet")
    assert list(table["node"]) == ["local"] and list(table["skipped"]) == [ROOT_ONLY["trace"]]
    sources = json.loads((wd / "results" / "tables" / "trace.sources.json").read_text())
    assert sources["raw"] == [] and sources["left_out"] == {"local": ROOT_ONLY["trace"]}
    assert not (wd / "data" / "raw").exists()


def test_the_rule_is_the_same_for_the_run_code() -> None:
    # What the planner asks is what the measurement asks (iolab.privilege):
    # as root nothing is left out; as uid 65534, the same three parts.
    assert privilege.transports_left_out(["shm", "tcp", "netns", "netns_tbf"]) == {}
    code = (
        "import json, os\nfrom iolab import privilege\nos.setgid(65534); os.setuid(65534)\n"
        "print(json.dumps([privilege.experiment_left_out('trace'), "
        "privilege.transports_left_out(['shm', 'tcp', 'netns', 'netns_tbf'])]))"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=Path(__file__).parent.parent)
    trace, transports = json.loads(res.stdout)
    assert trace == ROOT_ONLY["trace"]
    assert transports == {"netns": ROOT_ONLY["mpi netns"], "netns_tbf": ROOT_ONLY["mpi netns_tbf"]}
