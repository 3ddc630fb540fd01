"""The paper's artifact appendix (iolab.report.artifact): what the run took,
read from Snakemake's benchmark files and the disk, and where a re-run is
expected to land: each claim part's range over launches, and how often it
held a launch it was not built from; where the artifact lives, what needs
root, and the oldest kernel each preset runs on."""

from __future__ import annotations

import json
from pathlib import Path

from iolab import presets
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


def test_a_rerun_range_holds_each_launch_it_was_not_built_from() -> None:
    # Each launch held out in turn against the others' range: the middle
    # ones fall inside, the extremes outside.
    assert artifact.held_out([1.0, 2.0, 3.0, 2.5]) == 2
    assert artifact.held_out([1.0, 1.0]) == 2
    assert artifact.held_out([1.0, 2.0]) == 0


def test_the_artifact_names_its_deposit_and_what_needs_root(tmp_path: Path) -> None:
    (tmp_path / "CITATION.cff").write_text("cff-version: 1.2.0\nrepository-code: https://example.org/iolab\n")
    said = artifact.deposit(tmp_path)
    assert said.startswith("The repository is https://example.org/iolab; no DOI yet")
    assert artifact.deposit(tmp_path / "missing").startswith("CITATION.cff names no public repository yet")
    root = artifact.root_needs()
    assert "the trace experiment (bpftrace" in root and "The trace experiment also needs bpftrace" in root


def unclassified(declared: dict[str, set[str]]) -> dict[str, set[str]]:
    """Each server's declared flags that neither FLAG_KERNEL nor PLAIN_FLAGS places."""
    programs = {program: server for server, program in presets.SERVER_PROGRAMS.items()}
    return {
        program: left
        for program, flags in declared.items()
        if (left := flags - set(presets.FLAG_KERNEL[programs[program]]) - presets.PLAIN_FLAGS[programs[program]])
    }


def test_every_flag_a_server_declares_has_its_kernel_or_needs_none() -> None:
    declared = presets.server_flags()
    assert unclassified(declared) == {}
    # The negative control: a flag the tables do not know is found.
    declared["echo-uring"] = declared["echo-uring"] | {"--new-feature"}
    assert unclassified(declared) == {"echo-uring": {"--new-feature"}}


def test_each_preset_runs_from_the_kernel_its_newest_flag_needs() -> None:
    rows = [
        {"preset": "epoll", "server": "echo-epoll", "flags": ""},
        {"preset": "default", "server": "echo-uring", "flags": ""},
        {"preset": "recv_bundle", "server": "echo-uring", "flags": "--buf-ring --recv-bundle"},
        {"preset": "single_ring", "server": "echo-uring", "flags": "--rings 1"},
    ]
    got = artifact.kernel_rows({"echo_preset_flags": {"value": rows}})
    assert [(r["Linux"], r["presets"]) for r in got] == [
        ("any", "epoll"),
        ("5.11 or later", "default, single_ring"),
        ("6.10 or later", "recv_bundle"),
    ]
    assert got[2]["what needs it"] == "receive bundles"
