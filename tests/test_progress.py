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
from types import SimpleNamespace

import pytest
import yaml
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
    # Plain `snakemake`, as the README says: the workflow profile sets the display.
    env = tool_env()
    env["PYTHONPATH"] = os.pathsep.join([str(workflow), str(workflow / "plugins")])
    res = snakemake(
        workflow,
        "results/tables/syscall.parquet",
        "--cores",
        "all",
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


def test_the_workflow_profile_gives_every_run_the_display() -> None:
    profiles = REPO / "profiles" / "default"
    assert yaml.safe_load((profiles / "config.v9+.yaml").read_text())["logger"] == ["iolab"]
    # Snakemake before 9 reads config.yaml, which must not name what it
    # lacks: the Snakefile then stops it with its one line.
    assert "logger" not in yaml.safe_load((profiles / "config.yaml").read_text())
    # The plugin loads the display of its own checkout by path and leaves
    # `iolab` for the workflow to import from its checkout.
    res = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, snakemake_logger_plugin_iolab as p; print(p.LogHandler.__module__, 'iolab' in sys.modules)",
        ],
        env={**os.environ, "PYTHONPATH": str(REPO / "plugins")},
        cwd="/",
        capture_output=True,
        text=True,
    )
    assert res.stdout.split() == ["snakemake_logger_plugin_iolab.progress", "False"], res.stderr


def settings(dryrun: bool) -> SimpleNamespace:
    """Snakemake's output settings, as a logger plugin gets them."""
    return SimpleNamespace(
        printshellcmds=False,
        nocolor=True,
        quiet=None,
        debug_dag=False,
        verbose=False,
        show_failed_logs=True,
        stdout=False,
        dryrun=dryrun,
    )


def message(text: str, level: int = logging.INFO, **fields: object) -> logging.LogRecord:
    r = logging.LogRecord("snakemake", level, __file__, 0, text, None, None)
    for k, v in fields.items():
        setattr(r, k, v)
    return r


def shown(dryrun: bool, records: list[logging.LogRecord], capsys: pytest.CaptureFixture[str]) -> str:
    handler = progress.LogHandler(settings(dryrun), None)
    for r in records:
        handler.emit(r)
    handler.close()
    return capsys.readouterr().err


def test_a_command_that_runs_no_workflow_prints_snakemakes_own_output(capsys: pytest.CaptureFixture[str]) -> None:
    # A lint, a report, an unlock: Snakemake's words, not the display's.
    said = shown(
        False,
        [message("Building DAG of jobs..."), message("Congratulations, your workflow is in a good condition!")],
        capsys,
    )
    assert "Congratulations, your workflow is in a good condition!" in said and "Building DAG" in said
    assert shown(True, [message("Building DAG of jobs...")], capsys).strip() == "Building DAG of jobs..."


def test_a_run_shows_the_display_and_drops_snakemakes_preamble(capsys: pytest.CaptureFixture[str]) -> None:
    said = shown(
        False,
        [
            message("Assuming unrestricted shared filesystem usage."),
            message("a lock was left", logging.WARNING),
            message("Workflow has started!", event=LogEvent.WORKFLOW_STARTED),
            message("Building DAG of jobs..."),
            message("Nothing to be done (all requested files are present and up to date)."),
        ],
        capsys,
    )
    assert said.splitlines() == [
        "a lock was left",
        "Nothing to be done (all requested files are present and up to date).",
    ]
