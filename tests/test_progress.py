"""The progress display (iolab.progress, snakemake --logger iolab): one line
per finished step with the count, the time and an estimate of what is left,
what runs now, and a failure printed in full, from a real Snakemake run."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
from io import StringIO
from pathlib import Path

from conftest import REPO, snakemake, tool_env
from snakemake_interface_logger_plugins.common import LogEvent

from iolab import progress


def record(event: LogEvent, **fields: object) -> logging.LogRecord:
    r = logging.LogRecord("snakemake", logging.INFO, __file__, 0, "", None, None)
    r.event = event
    for k, v in fields.items():
        setattr(r, k, v)
    return r


def test_the_state_says_what_runs_and_how_long_is_left(tmp_path: Path) -> None:
    log = tmp_path / "rep2.log"
    log.write_text("iolab: measuring echo on local (vm), rep 2\niolab: echo [7/120] default c=50 128 B: ok\n")
    out = StringIO()
    p = progress.Progress(out, live=False)
    p.handle(record(LogEvent.RUN_INFO, stats={"measure_echo": 2, "all": 1, "total": 3}))
    # Snakemake 9's order: the start, then the job's details.
    p.handle(record(LogEvent.JOB_STARTED, jobs=[1]))
    p.handle(
        record(
            LogEvent.JOB_INFO,
            jobid=1,
            rule_name="measure_echo",
            wildcards={"node": "local", "rep": "1"},
            log=[str(tmp_path / "none.log")],
        )
    )
    p.jobs[1].started -= 90  # it ran 90 s
    p.handle(record(LogEvent.JOB_FINISHED, job_id=1))
    p.handle(record(LogEvent.PROGRESS, done=1, total=3))
    first = out.getvalue().splitlines()[0]
    assert re.match(r"^\[1/3\] 0:\d\d elapsed, about 1:30 left · done: measure echo rep 1 on local \(90 s\)$", first), (
        first
    )
    p.handle(
        record(
            LogEvent.JOB_INFO,
            jobid=2,
            rule_name="measure_echo",
            wildcards={"node": "local", "rep": "2"},
            log=[str(log)],
        )
    )
    p.handle(record(LogEvent.JOB_STARTED, jobs=[2]))
    assert p.status().endswith("· measure echo rep 2 on local: echo [7/120] default c=50 128 B: ok")


def test_a_run_shows_one_line_per_step_and_a_failure_in_full(workflow: Path) -> None:
    env = tool_env()
    env["PYTHONPATH"] = os.pathsep.join([str(workflow), str(workflow / "plugins")])
    res = snakemake(
        workflow,
        "results/tables/syscall.parquet",
        "--cores",
        "all",
        "--logger",
        "iolab",
        "--configfile",
        "config/overlays/smoke.yaml",
        env=env,
        timeout=600,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    lines = res.stderr.splitlines()
    done = [ln for ln in lines if " · done: " in ln]
    assert any("done: measure syscall rep 1 on local" in ln for ln in done), res.stderr
    assert done[-1].startswith(f"[{len(done)}/{len(done)}]"), done
    # Snakemake's job records and the jobs' own output stay in the logs.
    assert not any(ln.startswith(("localrule", "Finished job", "iolab: wrote")) for ln in lines), res.stderr
    # A failing job: one line, then its log in full.
    (workflow / "config" / "broken.yaml").write_text("experiments:\n  mpi:\n    mpirun: /nonexistent/mpirun\n")
    res = snakemake(
        workflow,
        "--cores",
        "all",
        "--logger",
        "iolab",
        "--configfile",
        "config/overlays/smoke.yaml",
        "config/broken.yaml",
        "--until",
        "measure_mpi",
        env=env,
        timeout=600,
    )
    assert res.returncode != 0
    assert "FAILED: Error in rule measure_mpi" in res.stderr, res.stderr[-3000:]
    assert "/nonexistent/mpirun" in res.stderr.split("FAILED: Error in rule measure_mpi", 1)[1]


def test_repro_passes_the_display_and_keeps_the_plugin_on_the_path() -> None:
    text = (REPO / "repro").read_text()
    # Every command that runs the workflow (all, figures, study) shows one display.
    runs = re.findall(r"exec snakemake [^\n]*", text)
    assert len(runs) == 3 and all(r.startswith("exec snakemake --cores all --logger=iolab") for r in runs), runs
    assert (REPO / "plugins" / "snakemake_logger_plugin_iolab" / "__init__.py").exists()
    res = subprocess.run(
        [sys.executable, "-c", "import snakemake_logger_plugin_iolab as p; print(p.LogHandler)"],
        env={**os.environ, "PYTHONPATH": str(REPO / "plugins")},
        capture_output=True,
        text=True,
    )
    assert "iolab.progress.LogHandler" in res.stdout, res.stderr
