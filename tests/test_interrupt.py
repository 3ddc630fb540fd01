"""Interrupted runs leave no partial results, and the next run resumes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml
from conftest import snakemake, tool_env

from iolab import tables


def long_config(tmp_path: Path) -> Path:
    cfg = tmp_path / "long.yaml"
    # ~5 s per repetition, so the run is surely mid-measurement when killed.
    cfg.write_text(yaml.safe_dump({"repeats": 2, "experiments": {"syscall": {"batches": 50000}}}))
    return cfg


def start(workflow: Path, cfg: Path) -> subprocess.Popen[bytes]:
    # Only the syscall measurements: the long ones this test interrupts.
    return subprocess.Popen([sys.executable, "-m", "snakemake", "results/tables/syscall.parquet",
                             "--cores", "all", "--configfile", str(cfg)], cwd=workflow,
                            env=tool_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


def wait_for_measurement(workflow: Path, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if list((workflow / "data").glob("raw/*/syscall/*/.tmp-*")):
            return
        time.sleep(0.2)
    raise AssertionError("the measurement never started")


def live_processes(session: int, name: str | None = None) -> list[str]:
    """Processes of a session that are still running (zombies are dead: they
    only wait for a PID 1 that may not reap them in containers)."""
    res = subprocess.run(["ps", "-s", str(session), "-o", "stat=,comm="],
                         capture_output=True, text=True)
    rows = [ln.split(None, 1) for ln in res.stdout.splitlines() if ln.strip()]
    return [comm for stat, comm in rows if not stat.startswith("Z") and (name is None or comm == name)]


def results(workflow: Path) -> list[Path]:
    return sorted((workflow / "data" / "raw").rglob("syscall/*/rep*.csv"))


def assert_only_complete_results(workflow: Path) -> None:
    for raw in sorted((workflow / "data" / "raw").rglob("rep*.csv")):
        if raw.name.endswith(".histograms.csv"):
            continue
        if raw.parent.parent.name == "trace":
            tables.trace_table([raw])
        else:
            tables.probe_table([raw])  # parses, has its sidecar


def test_ctrl_c_leaves_nothing_partial_and_resume_completes(workflow: Path, tmp_path: Path) -> None:
    cfg = long_config(tmp_path)
    proc = start(workflow, cfg)
    wait_for_measurement(workflow)
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal sends
    if proc.wait(timeout=120) == 0:
        # Snakemake 9's log handler swallows a KeyboardInterrupt raised while
        # it writes a message (snakemake/logging.py), so a rare Ctrl-C is
        # lost and the run goes on; success must then mean complete results.
        assert len(results(workflow)) == 2, "the run reported success with results missing"
    assert not list((workflow / "data" / "raw").rglob(".tmp-*"))
    assert_only_complete_results(workflow)
    assert live_processes(proc.pid) == [], "processes left running"

    res = snakemake(workflow, "results/tables/syscall.parquet", "--cores", "all",
                    "--configfile", str(cfg))
    assert res.returncode == 0, res.stderr[-3000:]
    assert len(results(workflow)) == 2
    assert_only_complete_results(workflow)


def test_killed_measurement_is_never_a_result(workflow: Path, tmp_path: Path) -> None:
    cfg = long_config(tmp_path)
    proc = start(workflow, cfg)
    wait_for_measurement(workflow)
    # SIGKILL the launcher: no chance to clean up, as with an OOM kill.
    # Only this test's session: pgrep/pkill -s select by session id.
    subprocess.run(["pkill", "-KILL", "-s", str(proc.pid), "-f", "iolab.measure"], check=True)
    assert proc.wait(timeout=120) != 0
    assert_only_complete_results(workflow)
    time.sleep(0.5)
    assert live_processes(proc.pid, "cost-probe") == [], "the probe outlived its launcher"

    res = snakemake(workflow, "results/tables/syscall.parquet", "--cores", "all",
                    "--configfile", str(cfg))
    assert res.returncode == 0, res.stderr[-3000:]
    assert not list((workflow / "data" / "raw").rglob(".tmp-*"))
    assert len(results(workflow)) == 2
