"""The paper's artifact appendix (iolab.report.artifact): what the run took,
read from Snakemake's benchmark files and the disk, and where a re-run is
expected to land, from each headline number's prediction interval."""

from __future__ import annotations

import json
from pathlib import Path

from iolab.report import artifact

BENCH = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"


def test_resources_sum_the_jobs_and_name_the_peak_and_the_disk(tmp_path: Path) -> None:
    assert artifact.resources(tmp_path) == ""  # nothing recorded: nothing said
    for i, (s, rss) in enumerate(((120.0, 80.5), (60.0, 300.2))):
        f = tmp_path / "results" / "benchmarks" / "measure" / "local" / "echo" / "k" / f"rep{i + 1}.tsv"
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(BENCH + f"{s}\t0:02:00\t{rss}\t1\t1\t1\t0\t0\t50\t{s}\n")
    nb = tmp_path / "results" / "benchmarks" / "notebooks" / "echo.tsv"
    nb.parent.mkdir(parents=True)
    nb.write_text(BENCH + "30.0\t0:00:30\t900.0\t1\t1\t1\t0\t0\t50\t30\n")
    # Only the raw files (and sidecars) a table read count: the same bytes
    # a re-analysis of the run's crate unpacks, so it says the same.
    raw = tmp_path / "data" / "raw" / "x.csv"
    raw.parent.mkdir(parents=True)
    raw.write_bytes(b"0" * (3 << 20))
    (raw.parent / "x.provenance.json").write_bytes(b"0" * (1 << 19))
    (raw.parent / "left-over.csv").write_bytes(b"0" * (5 << 20))
    tables = tmp_path / "results" / "tables"
    tables.mkdir(parents=True)
    (tables / "echo.sources.json").write_text(
        json.dumps({"raw": [{"raw": "data/raw/x.csv", "provenance": "data/raw/x.provenance.json"}]})
    )
    said = artifact.resources(tmp_path)
    assert "its 2 measurement jobs ran 3.0 min in all (peak memory of one job 300 MB)" in said
    assert "its 1 notebooks 0.5 min (peak 900 MB)" in said
    assert "the raw data its tables read take 3.5 MiB of disk" in said
    assert artifact.run_seconds(tmp_path) == 210.0
    assert artifact.entries({}, tmp_path)["artifact_run_seconds"]["value"] == 210.0


def test_a_rerun_is_expected_in_each_headline_numbers_prediction_interval() -> None:
    numbers = {
        "w_send_ns": {"value": 2900.0, "text": "2 900", "pi95": [1800.0, 4600.0]},
        "w_recv_ns": {"value": 900.0, "text": "900", "pi95": None},  # a kind without an estimate
        "echo_epoll_c50_server_ns_per_request": {"value": 5000.0, "text": "5 000", "pi95": [3000.0, 8000.0]},
        "echo_epoll_c500_server_ns_per_request": {"value": 5000.0, "text": "5 000", "pi95": [3000.0, 8000.0]},
    }
    numbers["mpi_shm_latency_us"] = {"value": 0.4, "text": "0.40", "pi95": [0.1, 2.0]}
    numbers["t1_recv_ns"] = {"value": 600.0, "text": "600", "pi95": [300.0, 1200.0]}
    numbers["s_getppid_ns"] = {"value": 77.0, "text": "77", "pi95": [40.0, 150.0]}
    rows = artifact.expected_rerun(numbers)
    # Each row names its quantity in words, never by its key.
    assert [r["quantity"].rsplit(": ", 1)[1] for r in rows] == [
        "s (getppid)",
        "t(1), recv",
        "w, send",
        "epoll",
        "shared memory",
    ]
    assert not [r for r in rows for key in numbers if key in r["quantity"]]
    assert rows[2]["a re-run, 95 %"] == "1\u2009800\u20134\u2009600"
