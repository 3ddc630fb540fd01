"""Raw data that changed after it was measured stops the build, with one line
naming the file and how to go on; a change accepted on purpose is recorded
in the provenance (iolab.integrity)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, tool_env

from iolab import integrity, readers, tables
from iolab.provenance import sidecar_for


@pytest.fixture
def measured(tmp_path: Path, native_build: Path) -> Path:
    """One real syscall repetition, as the workflow writes it."""
    raw = tmp_path / "local" / "syscall" / "k" / "rep1.csv"
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "iolab.measure",
            "syscall",
            "--node",
            json.dumps({"name": "local", "runner": "local"}),
            "--settings",
            json.dumps({"batches": 40, "warmup_batches": 4}),
            "--rep",
            "1",
            "--seed",
            "1",
            "--output",
            str(raw),
        ],
        cwd=REPO,
        env=tool_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    return raw


def test_the_sidecar_fingerprints_the_raw_file_when_it_is_written(measured: Path) -> None:
    recorded = json.loads(sidecar_for(measured).read_text())[integrity.KEY]
    assert recorded == {"rep1.csv": integrity.fingerprint(measured)}
    assert recorded["rep1.csv"]["rows"] == 88  # (40 batches and 4 of warm-up) x 2 variants
    assert len(tables.load("syscall", measured.parents[3])) == 88


def test_an_edited_number_or_deleted_rows_stop_the_build(measured: Path) -> None:
    root = measured.parents[3]
    lines = measured.read_text().splitlines(keepends=True)
    data = [i for i, ln in enumerate(lines) if ln.startswith("syscall,")]
    edited = list(lines)
    cells = edited[data[5]].split(",")
    cells[-1] = str(int(cells[-1]) + 1) + "\n"
    edited[data[5]] = ",".join(cells)
    measured.write_text("".join(edited))
    with pytest.raises(readers.RawFormatError) as e:
        tables.load("syscall", root)
    message = str(e.value)
    assert "\n" not in message and "rep1.csv changed after it was measured (88 rows as recorded" in message
    assert message.endswith(f"--accept-edited {measured}")
    measured.write_text("".join(ln for i, ln in enumerate(lines) if i not in data[:20]))
    with pytest.raises(readers.RawFormatError, match=r"\(88 rows recorded, 68 now; SHA-256 "):
        tables.load("syscall", root)


def test_a_change_accepted_on_purpose_is_recorded_and_then_read(measured: Path) -> None:
    lines = measured.read_text().splitlines(keepends=True)
    measured.write_text("".join(lines[:-3]))  # three rows dropped, on purpose
    res = subprocess.run(
        [sys.executable, "-m", "iolab.integrity", "accept", str(measured)],
        cwd=REPO,
        env=tool_env(),
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0 and "iolab: accepted the change to" in res.stderr, res.stderr
    side = json.loads(sidecar_for(measured).read_text())
    (entry,) = side["accepted_edits"]
    assert entry["who"] and entry["when"] and entry["files"]["rep1.csv"]["recorded"]["rows"] == 88
    assert entry["files"]["rep1.csv"]["now"]["rows"] == 85
    assert len(tables.load("syscall", measured.parents[3])) == 85


def test_a_sidecar_that_lost_its_fingerprints_is_named(measured: Path) -> None:
    # Written by this checkout's code, which records fingerprints: a sidecar
    # without them was edited, and the reader says so rather than stay silent.
    side = json.loads(sidecar_for(measured).read_text())
    assert side["git"]["commit"] and integrity._records_fingerprints(side["git"]["commit"])
    del side[integrity.KEY]
    sidecar_for(measured).write_text(json.dumps(side))
    res = subprocess.run(
        [sys.executable, "-m", "iolab.integrity", "verify", str(measured)],
        cwd=REPO,
        env=tool_env(),
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0
    assert res.stderr.strip() == (
        f"iolab: warning: {measured}: its sidecar has no fingerprints, though the commit "
        f"that wrote it ({side['git']['commit'][:12]}) records them; its bytes cannot "
        "be checked"
    )
    # A sidecar from before fingerprints (the commit predates them): nothing to say.
    side["git"]["commit"] = "4389c89e09b209cfedc7b581e7c8471e28d1cda6"
    sidecar_for(measured).write_text(json.dumps(side))
    res = subprocess.run(
        [sys.executable, "-m", "iolab.integrity", "verify", str(measured)],
        cwd=REPO,
        env=tool_env(),
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0 and res.stderr == ""


def test_a_repetition_measured_already_is_kept_byte_for_byte(measured: Path) -> None:
    # Snakemake re-runs a job whose parameters' text or rule code changed;
    # the key in the path says the settings are the same, so the raw file
    # stays as measured (never deleted, never re-measured behind the user).
    before = {p.name: p.read_bytes() for p in measured.parent.iterdir()}
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "iolab.measure",
            "syscall",
            "--node",
            json.dumps({"name": "local", "runner": "local"}),
            "--settings",
            json.dumps({"batches": 40, "warmup_batches": 4}),
            "--rep",
            "1",
            "--seed",
            "2",
            "--output",
            str(measured),
        ],
        cwd=REPO,
        env=tool_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    assert res.stderr.strip() == (
        f"iolab: {measured} is measured already; kept as it is (to measure it again, "
        "move it and its sidecar away first)"
    )
    assert {p.name: p.read_bytes() for p in measured.parent.iterdir()} == before


def test_the_reference_data_carries_fingerprints() -> None:
    raws = sorted((REPO / "data" / "reference").glob("*/*/*/rep*.csv"))
    raws = [r for r in raws if r.name.count(".") == 1]
    assert raws and all(integrity.KEY in json.loads(sidecar_for(r).read_text()) for r in raws)
    for raw in raws:
        integrity.verify(raw)


def test_a_full_disk_gives_one_line_naming_the_file_and_keeps_nothing(tmp_path: Path, native_build: Path) -> None:
    tiny = tmp_path / "tiny"
    tiny.mkdir()
    # 16 KiB of tmpfs: the raw file of 2,000 batches (~170 KB) cannot fit.
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(tiny)]).returncode != 0:
        pytest.skip("needs root to mount a small tmpfs")
    try:
        raw = tiny / "local" / "syscall" / "k" / "rep1.csv"
        res = subprocess.run(
            [
                sys.executable,
                "-m",
                "iolab.measure",
                "syscall",
                "--node",
                json.dumps({"name": "local", "runner": "local"}),
                "--settings",
                json.dumps({"batches": 2000, "warmup_batches": 4}),
                "--rep",
                "1",
                "--seed",
                "1",
                "--output",
                str(raw),
            ],
            cwd=REPO,
            env=tool_env(),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert res.returncode == 1
        # One progress line, then one line naming the file.
        progress, line = res.stderr.strip().splitlines()
        assert progress.startswith("iolab: measuring syscall")
        assert (
            line.startswith("iolab: could not write ") and "rep1.csv" in line and "No space left on device" in line
        ), line
        assert "nothing partial was kept" in line
        assert [p for p in tiny.rglob("*") if p.is_file()] == []
    finally:
        subprocess.run(["umount", str(tiny)], check=True)


def test_a_sidecar_row_count_that_disagrees_with_its_file_is_named(measured: Path) -> None:
    side = json.loads(sidecar_for(measured).read_text())
    side[integrity.KEY]["rep1.csv"]["rows"] = 90  # the bytes as measured, the count not
    sidecar_for(measured).write_text(json.dumps(side))
    with pytest.raises(readers.RawFormatError, match=r"rep1\.csv: its sidecar records 90 rows, the file has 88"):
        tables.load("syscall", measured.parents[3])


def test_a_missing_value_names_its_row_and_column(tmp_path: Path) -> None:
    from iolab.formats import CELL_COLUMNS

    raw = tmp_path / "rep1.csv"
    header = ",".join(CELL_COLUMNS) + "\n"
    cells = {"order": "0", "preset": "epoll", "connections": "50", "bytes": "128", "status": "ok"}

    def row(**given: str) -> str:
        return ",".join({**cells, **given}.get(c, "") for c in CELL_COLUMNS) + "\n"

    raw.write_text(header + row() + row(order="1", connections=""))
    with pytest.raises(readers.RawFormatError, match=r"data row 2 has no connections: an empty or non-numeric value"):
        readers.read_echo_csv(raw)
    cut = ",".join(["1", *[""] * (CELL_COLUMNS.index("connections") - 1), "50"])
    raw.write_text(header + row() + cut)
    with pytest.raises(readers.RawFormatError, match=r"data row 2 has no bytes, status: the file ends inside it"):
        readers.read_echo_csv(raw)
