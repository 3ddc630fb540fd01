"""Interrupted runs leave no partial results, and the next run resumes."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest
import yaml
from conftest import REPO, default_sigint, snakemake, tool_env

from iolab import tables


def long_config(tmp_path: Path, batches: int = 200000) -> Path:
    cfg = tmp_path / "long.yaml"
    # 200,000 batches: ~28 s per repetition here, so the run is surely
    # mid-measurement when stopped even when Snakemake loses Ctrl-C presses
    # (see interrupt): with 50,000 (~7 s) a fresh-clone run once finished
    # first. A SIGKILL cannot be lost: 50,000 leave it a margin of seconds.
    # One repetition: the tests stop the first one, and each resume measures all.
    cfg.write_text(yaml.safe_dump({"repeats": 1, "experiments": {"syscall": {"batches": batches}}}))
    return cfg


def start(workflow: Path, cfg: Path) -> subprocess.Popen[bytes]:
    # Only the syscall measurements: the long ones this test interrupts.
    # Snakemake's log goes beside the config, for the failure messages.
    with open(cfg.with_name("snakemake.log"), "wb") as log:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "snakemake",
                "results/tables/syscall.parquet",
                "--cores",
                "all",
                "--configfile",
                str(cfg),
            ],
            cwd=workflow,
            env=tool_env(),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=default_sigint,
        )


def log_tail(cfg: Path) -> str:
    return cfg.with_name("snakemake.log").read_text(errors="replace")[-3000:]


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
    res = subprocess.run(["ps", "-s", str(session), "-o", "stat=,comm="], capture_output=True, text=True)
    rows = [ln.split(None, 1) for ln in res.stdout.splitlines() if ln.strip()]
    return [comm for stat, comm in rows if not stat.startswith("Z") and (name is None or comm == name)]


def results(workflow: Path) -> list[Path]:
    return sorted((workflow / "data" / "raw").rglob("syscall/*/rep*.csv"))


def assert_only_complete_results(workflow: Path) -> None:
    for raw in sorted((workflow / "data" / "raw").rglob("rep*.csv")):
        if raw.name.endswith(".histograms.csv"):
            continue
        if raw.parent.parent.name == "trace":
            tables.tidy("trace", [raw])
        else:
            tables.tidy("syscall", [raw])  # parses, has its sidecar


def interrupt(proc: subprocess.Popen[bytes], every: float = 5.0, limit: float = 120) -> int:
    """Ctrl-C, pressed again every ``every`` seconds until the run stops: the
    terminal sends SIGINT to the whole foreground process group. Snakemake 9's
    log handler swallows a KeyboardInterrupt raised while it writes a message
    (snakemake/logging.py), so one press can be lost; a user presses again."""
    deadline = time.monotonic() + limit
    while True:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            return proc.wait(timeout=every)
        except subprocess.TimeoutExpired:
            assert time.monotonic() < deadline, "the run ignored Ctrl-C"


def test_ctrl_c_leaves_nothing_partial_and_resume_completes(workflow: Path, tmp_path: Path) -> None:
    cfg = long_config(tmp_path)
    proc = start(workflow, cfg)
    wait_for_measurement(workflow)
    assert interrupt(proc) != 0, "an interrupted run reported success:\n" + log_tail(cfg)
    assert results(workflow) == [], "the run was not interrupted:\n" + log_tail(cfg)
    assert not list((workflow / "data" / "raw").rglob(".tmp-*"))
    assert_only_complete_results(workflow)
    assert live_processes(proc.pid) == [], "processes left running"
    # The job's log says what happened in one line, without a traceback.
    (job_log,) = (workflow / "results" / "logs" / "measure").rglob("syscall/*/rep1.log")
    text = job_log.read_text()
    assert "Traceback" not in text and "KeyboardInterrupt" not in text, text[-2000:]
    assert "iolab: stopped by SIGINT; nothing partial was kept" in text, text[-2000:]

    res = snakemake(workflow, "results/tables/syscall.parquet", "--cores", "all", "--configfile", str(cfg))
    assert res.returncode == 0, res.stderr[-3000:]
    assert len(results(workflow)) == 1
    assert_only_complete_results(workflow)


def test_killed_measurement_is_never_a_result(workflow: Path, tmp_path: Path) -> None:
    cfg = long_config(tmp_path, batches=50000)
    proc = start(workflow, cfg)
    wait_for_measurement(workflow)
    # SIGKILL the launcher: no chance to clean up, as with an OOM kill.
    # Only this test's session: pgrep/pkill -s select by session id.
    subprocess.run(["pkill", "-KILL", "-s", str(proc.pid), "-f", "iolab.measure"], check=True)
    assert proc.wait(timeout=120) != 0
    assert_only_complete_results(workflow)
    # The probe dies with its launcher (PR_SET_PDEATHSIG), asynchronously.
    deadline = time.monotonic() + 30
    while live_processes(proc.pid, "cost-probe") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert live_processes(proc.pid, "cost-probe") == [], "the probe outlived its launcher"

    res = snakemake(workflow, "results/tables/syscall.parquet", "--cores", "all", "--configfile", str(cfg))
    assert res.returncode == 0, res.stderr[-3000:]
    assert not list((workflow / "data" / "raw").rglob(".tmp-*"))
    assert len(results(workflow)) == 1


def repro_env(workflow: Path) -> dict[str, str]:
    """./repro in a copy of the workflow, with a venv of its own (so the copy
    never points this environment at itself) that reuses this environment's
    packages and carries its lock stamp: ./repro installs nothing."""
    here = Path(sys.executable).parent.parent
    stamp = here / ".iolab-lock.sha256"
    want = hashlib.sha256(
        (REPO / "requirements.lock").read_bytes() + (REPO / "pyproject.toml").read_bytes()
    ).hexdigest()
    if not stamp.exists() or stamp.read_text().strip() != want:
        pytest.fail(f"{here} is older than requirements.lock/pyproject.toml; run ./repro setup")
    venv = workflow / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    ours = sysconfig.get_paths()["purelib"]
    (Path(site) / "reuse-packages.pth").write_text(f"{ours}\n")
    # Python reads .pth files only in site directories, not in a path a .pth
    # adds: coverage's start-up hook (./repro coverage's subprocesses) comes along.
    for hook in Path(ours).glob("a1_coverage.pth"):
        shutil.copy(hook, Path(site) / hook.name)
    snakemake_bin = venv / "bin" / "snakemake"
    snakemake_bin.write_text(f'#!/bin/sh\nexec {venv / "bin" / "python"} -m snakemake "$@"\n')
    snakemake_bin.chmod(0o755)
    (venv / ".iolab-lock.sha256").write_text(want + "\n")
    # This checkout and its plugins on the venv's path, as ./repro setup
    # writes them (Snakemake alone, never started through ./repro, needs them).
    (Path(site) / "iolab-repo.pth").write_text(f"{workflow}\n{workflow / 'plugins'}\n")
    env = {**tool_env(), "IOLAB_SKIP_APT": "1"}
    env["PATH"] = os.pathsep.join([str(venv / "bin"), env["PATH"]])
    return env


# The two ways to start a run (the README's): each is guarded alike, by the
# workflow itself (iolab.live.before_run).
STARTERS = {"repro": ["./repro", "all"], "snakemake": ["snakemake", "--cores", "all"]}


@pytest.mark.parametrize("starter", sorted(STARTERS))
def test_a_run_resumes_after_the_whole_run_is_killed(workflow: Path, tmp_path: Path, starter: str) -> None:
    cfg = long_config(tmp_path, batches=50000)
    argv = [*STARTERS[starter], "results/tables/syscall.parquet", "--configfile", str(cfg)]
    env = repro_env(workflow)
    proc = subprocess.Popen(
        argv, cwd=workflow, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    wait_for_measurement(workflow)
    # A reboot or the OOM killer: every process of the run dies at once.
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    assert list((workflow / ".snakemake" / "locks").glob("*.lock")), "the killed run left no lock"

    res = subprocess.run(argv, cwd=workflow, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    said = [ln for ln in res.stderr.splitlines() if ln.startswith(("repro:", "iolab:"))]
    assert said == [
        "iolab: removed the lock of a run that was killed (no snakemake process holds it); incomplete jobs run again"
    ], said
    assert len(results(workflow)) == 1
    assert not list((workflow / "data" / "raw").rglob(".tmp-*"))
    assert_only_complete_results(workflow)


@pytest.mark.parametrize("starter", sorted(STARTERS))
def test_a_live_run_is_never_unlocked(workflow: Path, tmp_path: Path, starter: str) -> None:
    cfg = long_config(tmp_path)
    argv = [*STARTERS[starter], "results/tables/syscall.parquet", "--configfile", str(cfg)]
    env = repro_env(workflow)
    proc = subprocess.Popen(
        argv, cwd=workflow, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    try:
        wait_for_measurement(workflow)
        res = subprocess.run(argv, cwd=workflow, env=env, capture_output=True, text=True, timeout=120)
        assert res.returncode != 0
        assert res.stderr.strip().splitlines()[-1].startswith("iolab: a snakemake run (pid "), res.stderr
        assert proc.poll() is None, "the second command disturbed the live run"
    finally:
        # Done with it: SIGKILL, as a Ctrl-C Snakemake swallowed left it
        # measuring to the end (~20 s).
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=120)


INNER_TEST = """
import subprocess, time

def test_waits_on_a_process_tree():
    # A child that has a child of its own, as a snakemake run has measurements;
    # its cleanup fails once the child is stopped, raising in place of Ctrl-C.
    try:
        subprocess.run(["sh", "-c", "sleep 6011 & sleep 6012"])
    finally:
        raise RuntimeError("cleanup found its server gone")

def test_after_it():
    open("ran-after-ctrl-c", "w").close()
"""


def test_ctrl_c_stops_the_suite_and_leaves_nothing_running(tmp_path: Path) -> None:
    (tmp_path / "test_inner.py").write_text(INNER_TEST)
    env = dict(tool_env(), PYTHONPATH=str(REPO / "tests"))
    # Started as from a script's background: SIGINT ignored, which the suite
    # once kept, running on for minutes.
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "stop_on_interrupt", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    deadline = time.monotonic() + 60
    while subprocess.run(["pgrep", "-f", "sleep 6012"], capture_output=True).returncode != 0:
        assert time.monotonic() < deadline and proc.poll() is None, "the inner test did not start"
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 2, out  # pytest's "interrupted"
    assert "interrupted by Ctrl-C" in out or "KeyboardInterrupt" in out
    assert not (tmp_path / "ran-after-ctrl-c").exists(), "the suite went on after Ctrl-C"
    left = subprocess.run(["pgrep", "-f", "sleep 601[12]"], capture_output=True, text=True).stdout.split()
    assert left == [], f"left running after Ctrl-C: {left}"
