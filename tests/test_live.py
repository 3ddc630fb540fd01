"""A measurement that outlives its Snakemake is seen as live: nothing new
starts beside it (iolab.live), and the next run re-measures what it was
doing; a killed run's temporary directories are removed by the next."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from conftest import REPO, snakemake, tool_env
from test_interrupt import repro_env

from iolab import live


def _measure_pid(wd: Path, deadline: float) -> int:
    while time.monotonic() < deadline:
        found = list(live.measurements(wd))
        if found:
            return next(pid for pid, cmd in found if "iolab.measure" in cmd)
        time.sleep(0.1)
    raise AssertionError("no measurement started")


def test_killing_only_snakemake_leaves_a_live_measurement_that_blocks_a_new_run(workflow: Path) -> None:
    (workflow / "config" / "slow.yaml").write_text(
        "repeats: 1\nexperiments:\n  sendrecv:\n    batches: 400\n    warmup_batches: 4\n"
    )
    env = tool_env()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "snakemake",
            "--cores",
            "all",
            "--configfile",
            "config/slow.yaml",
            "--until",
            "measure_sendrecv",
        ],
        cwd=workflow,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        pid = _measure_pid(workflow, time.monotonic() + 120)
        proc.kill()  # only snakemake, as the OOM killer would
        proc.wait()
        assert live.pid_alive(pid)
        res = subprocess.run(
            [sys.executable, "-m", "iolab.live", "check", str(workflow)], env=env, capture_output=True, text=True
        )
        assert res.returncode == 1
        (line,) = res.stderr.strip().splitlines()
        assert f"pid {pid}:" in line and "iolab.measure sendrecv" in line and f"kill {pid}" in line
        # ./repro all and Snakemake started directly (even to unlock) refuse
        # with that line before planning, start nothing and keep the lock.
        argv = ["--configfile", "config/slow.yaml", "--until", "measure_sendrecv"]
        logs = workflow / "results" / "logs"
        before = {p: p.read_bytes() for p in logs.rglob("*.log")}
        res = subprocess.run(
            ["./repro", "all", *argv],
            cwd=workflow,
            env=repro_env(workflow),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert res.returncode != 0 and res.stderr.strip().splitlines()[-1] == line, res.stderr[-2000:]
        for direct in (["--cores", "all", *argv], ["--unlock"]):
            res = snakemake(workflow, *direct)
            assert res.returncode != 0 and res.stderr.strip().splitlines()[-1] == line, res.stderr[-2000:]
        assert list((workflow / ".snakemake" / "locks").glob("*.lock"))
        # No job started: the logs are the orphan's alone (it goes on writing its own).
        assert set(logs.rglob("*.log")) == set(before), sorted(set(logs.rglob("*.log")) - set(before))
        assert [p for p, _ in live.measurements(workflow)] == [pid]
        # A measurement started by anything else (the workflow's guard
        # bypassed) refuses to start beside the orphan too.
        out = workflow / "data" / "raw" / "elsewhere" / "rep1.csv"
        res = subprocess.run(
            [
                *(sys.executable, "-m", "iolab.measure", "sendrecv", "--node", '{"name": "local", "runner": "local"}'),
                *("--settings", "{}", "--rep", "1", "--seed", "1", "--output", str(out)),
            ],
            cwd=workflow,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert res.returncode == 1 and res.stderr.strip().splitlines()[-1] == line, res.stderr[-2000:]
        assert not out.exists()
        left = list(live.measurements(workflow))
        assert [p for p, _ in left] == [pid], left
        assert not list((workflow / "data" / "raw").rglob("sendrecv/*/rep1.csv"))
        os.kill(pid, signal.SIGTERM)
        for _ in range(300):
            if not live.pid_alive(pid):
                break
            time.sleep(0.1)
        assert list(live.measurements(workflow)) == []
    finally:
        for pid, _ in live.measurements(workflow):
            os.kill(pid, signal.SIGKILL)
    # The next run removes the killed run's lock and measures the repetition
    # again, alone.
    res = snakemake(
        workflow, "--cores", "all", "--configfile", "config/slow.yaml", "--until", "measure_sendrecv", timeout=600
    )
    assert res.returncode == 0, res.stderr[-2000:]
    raws = list((workflow / "data" / "raw" / "local" / "sendrecv").glob("*/rep1.csv"))
    assert len(raws) == 1 and not list(raws[0].parent.glob(".tmp-*"))


def test_a_killed_runs_temporary_directories_are_removed_by_the_next(tmp_path: Path) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    mine = os.getpid()
    # A killed notebook job's directory holds its kernel's connection file.
    names = [
        f"iolab-run-{dead.pid}-abc",
        f"iolab-mpi-{dead.pid}-x",
        f"iol{dead.pid}-0",
        f"ompi.iol{dead.pid}-1.0",
        f"iolab-nb-{dead.pid}-k",
        f"iolab-run-{mine}-kept",
        "iolab-run-unnamed",
        "other-123-x",
    ]
    for n in names:
        (tmp_path / n).mkdir()
    removed, failed = live.remove_stale_tempdirs(tmp_path)
    assert sorted(p.name for p in removed) == sorted(names[:5]) and failed == []
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(names[5:])
    with live.tempdir("iolab-run-") as d:
        assert Path(d).name.startswith(f"iolab-run-{mine}-")
        assert Path(d).parent == live.SHARED_TMP and (Path(d).stat().st_mode & 0o777) == 0o700


NOBODY = 65534
# As uid 65534 (nobody): remove the stale directories under argv[1], print
# what it says it removed and could not. The module is imported first, as
# root, then the process drops to nobody (the checkout may sit where only
# root enters). PATCH (optional) replaces live's check of what is left.
AS_NOBODY = """
import os, sys
from pathlib import Path
from iolab import live
if os.environ.get("PATCH") == "no-check":  # the removal as it once was: not checked
    live.os.path.lexists = lambda p: False
os.setgid(65534)
os.setuid(65534)
removed, failed = live.remove_stale_tempdirs(Path(sys.argv[1]))
for p in removed:
    print("removed", p.name)
for line in failed:
    print("failed", line)
"""


def stale_tree(root: Path, dead: int) -> None:
    """Under ``root`` (open to all): a dead process's directory of root's,
    one of nobody's holding a folder of root's (nobody cannot empty it), and
    one of nobody's it can remove."""
    root.chmod(0o1777)
    (root / f"iolab-mpi-{dead}-root").mkdir()
    blocked = root / f"iolab-run-{dead}-blocked"
    (blocked / "rootowned").mkdir(parents=True)
    (blocked / "rootowned" / "f").write_text("x")
    os.chown(blocked, NOBODY, NOBODY)
    free = root / f"iolab-nb-{dead}-free"
    free.mkdir()
    os.chown(free, NOBODY, NOBODY)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as uid 65534")
def test_removed_is_said_only_of_what_is_gone_and_only_of_ones_own(tmp_path: Path) -> None:
    """A run as another user neither touches root's leftovers nor says it
    removed a folder it could not: that one is named, as still there."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    root = Path(tempfile.mkdtemp(dir="/tmp"))
    try:
        stale_tree(root, dead.pid)
        res = subprocess.run([sys.executable, "-c", AS_NOBODY, str(root)], capture_output=True, text=True, cwd=REPO)
        assert res.returncode == 0, res.stderr
        lines = res.stdout.splitlines()
        assert lines[0] == f"removed iolab-nb-{dead.pid}-free" and len(lines) == 2, lines
        assert lines[1].startswith(f"failed could not remove {root}/iolab-run-{dead.pid}-blocked, left by process")
        assert "Permission denied" in lines[1]
        assert sorted(p.name for p in root.iterdir()) == [f"iolab-mpi-{dead.pid}-root", f"iolab-run-{dead.pid}-blocked"]
        # The negative control: with the removal not checked, the folder
        # still there is said to be removed.
        shutil.rmtree(root)
        root.mkdir()
        stale_tree(root, dead.pid)
        res = subprocess.run(
            [sys.executable, "-c", AS_NOBODY, str(root)],
            capture_output=True,
            text=True,
            cwd=REPO,
            env=dict(os.environ, PATCH="no-check"),
        )
        assert f"removed iolab-run-{dead.pid}-blocked" in res.stdout.splitlines(), res.stdout
        assert (root / f"iolab-run-{dead.pid}-blocked").exists()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_a_measurements_programs_get_a_temporary_directory_of_its_own(tmp_path: Path) -> None:
    shared = tempfile.gettempdir()
    probe = [sys.executable, "-c", "import os, tempfile; print(os.environ['TMPDIR'], tempfile.gettempdir())"]
    with live.private_tmp() as private:
        assert private.parent == live.SHARED_TMP and private.name.startswith(f"iolab-tmp-{os.getpid()}-")
        info = private.stat()
        assert (info.st_mode & 0o777) == 0o700 and info.st_uid == os.geteuid()
        assert subprocess.run(probe, capture_output=True, text=True).stdout.split() == [str(private)] * 2
        env = live.private_tmp_env(private)
        assert set(env) == set(live.PRIVATE_TMP_VARIABLES) and set(env.values()) == {str(private)}
        assert tempfile.gettempdir() == str(private)
    assert not private.exists() and tempfile.gettempdir() == shared
    assert all(os.environ.get(v) != str(private) for v in live.PRIVATE_TMP_VARIABLES)
    # A directory others may enter is refused: it would defeat the point.
    (tmp_path / "open").mkdir()
    (tmp_path / "open").chmod(0o777)
    with pytest.raises(PermissionError, match="not a directory of this user's alone"):
        live.private_tmp_env(tmp_path / "open")
