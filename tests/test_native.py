"""The native programs: strict flags, documented help, stable raw schema,
and clean sanitizer builds."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from iolab import tables

SYSCALL_FLAGS = ["--batches", "--warmup-batches", "--batch-us", "--calls-per-batch",
                 "--variants", "--seed", "--cpu", "--output", "--help"]


def run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


def test_help_documents_every_flag(native_build: Path) -> None:
    res = run([str(native_build / "cost-probe"), "--help"])
    assert res.returncode == 0
    for flag in SYSCALL_FLAGS:
        assert flag in res.stdout, flag
    src = (native_build.parent / "probes" / "cost_probe.c").read_text()
    declared = set(re.findall(r'\{ "([a-z-]+)", (?:required|no)_argument', src))
    assert {f"--{d}" for d in declared} <= set(SYSCALL_FLAGS)


@pytest.mark.parametrize("argv,message", [
    (["syscall", "--batches", "x"], "--batches: 'x' is not an integer"),
    (["syscall", "--batches", "0"], "--batches: 0 is out of range"),
    (["syscall", "--variants", "fork"], "unknown variant 'fork'"),
    (["warp"], "unknown mode 'warp'"),
    ([], "missing MODE"),
    (["syscall", "--cpu", "1000"], "--cpu 1000: cannot pin"),
    (["syscall", "--output", "/nonexistent/dir/x.csv"], "--output /nonexistent/dir/x.csv"),
])
def test_bad_input_is_one_line_and_nonzero(native_build: Path, argv: list[str], message: str) -> None:
    res = run([str(native_build / "cost-probe"), *argv])
    assert res.returncode != 0
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], res.stderr


@pytest.mark.parametrize("build", ["", "san"])
def test_syscall_output_schema_parses(native_build: Path, tmp_path: Path, build: str) -> None:
    exe = native_build / build / "cost-probe"
    out = tmp_path / "raw.csv"
    res = run([str(exe), "syscall", "--batches", "20", "--warmup-batches", "3",
               "--cpu", "0", "--output", str(out)])
    assert res.returncode == 0, res.stderr  # sanitizers abort with a report otherwise
    frame = tables.read_raw_csv(out)
    assert list(frame.columns) == tables.SYSCALL_COLUMNS
    assert len(frame) == 2 * 23
    assert frame.groupby("variant")["warmup"].sum().to_dict() == {"enosys": 3, "getppid": 3}
    assert set(frame["cpu"]) == {0}
    meta = tables.read_metadata(out)
    assert float(meta["timer_overhead_ns"]) > 0
    # Timer overhead under 5 % of every batch, as the probe promises.
    assert (frame["ns"] * 0.05 > float(meta["timer_overhead_ns"])).all()


def test_run_order_is_randomised_and_seeded(native_build: Path) -> None:
    def order(seed: str) -> list[str]:
        res = run([str(native_build / "cost-probe"), "syscall", "--batches", "30",
                   "--warmup-batches", "0", "--calls-per-batch", "10", "--seed", seed])
        return [ln.split(",")[1] for ln in res.stdout.splitlines() if ln.startswith("syscall,")]

    a, b, c = order("7"), order("7"), order("8")
    assert a == b and a != c
    assert a != sorted(a)
