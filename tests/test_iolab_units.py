"""Unit tests for the iolab package: atomic writes, statistics, loaders,
provenance, outputs and paper assembly."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from conftest import REPO

from iolab import atomic, hostfacts, provenance, readers, tables
from iolab.config import ConfigError, check_semantics, key_path, load, validate_config
from iolab.nodes import Node
from iolab.registry import REGISTRY
from iolab.report import paper

NODE = Node(name="t", runner="local", kind="vm", kind_reason="test")


# --- atomic writes ----------------------------------------------------------


def test_atomic_write_replaces_only_on_success(tmp_path: Path) -> None:
    dest = tmp_path / "r.csv"
    dest.write_text("old complete result\n")
    with pytest.raises(RuntimeError):
        with atomic.atomic_open(dest) as f:
            f.write("half of a new res")
            raise RuntimeError("killed mid-write")
    assert dest.read_text() == "old complete result\n"
    assert [p.name for p in tmp_path.iterdir()] == ["r.csv"]


def test_atomic_write_creates_parents_and_file(tmp_path: Path) -> None:
    dest = tmp_path / "a" / "b" / "x.json"
    atomic.write_json(dest, {"k": 1})
    assert json.loads(dest.read_text()) == {"k": 1}


def test_stale_temporaries_are_removed(tmp_path: Path) -> None:
    dest = tmp_path / "rep1.csv"
    (tmp_path / ".tmp-rep1.csv.abc").write_text("partial")
    (tmp_path / ".tmp-rep2.csv.abc").write_text("another run's")
    removed = atomic.remove_stale_temporaries(dest)
    assert [p.name for p in removed] == [".tmp-rep1.csv.abc"]
    assert (tmp_path / ".tmp-rep2.csv.abc").exists()


# --- raw loaders ----------------------------------------------------------------

RAW = """# iolab-raw: cost-probe syscall v2
# timer_overhead_ns=20.0
# unavailable: preset=sqpoll reason=not applicable: no enter to time
mode,variant,transport,pattern,ack,bytes,n,connections,seq,batch,warmup,calls,ns,cpu,emptied,not_inline
syscall,getppid,-,-,-,0,1,0,0,0,1,100,12020,1,0,0
syscall,getppid,-,-,-,0,1,0,1,0,0,100,10020,1,0,0
syscall,enosys,-,-,-,0,4,0,2,0,0,100,9020,1,0,0
"""


def write_raw(d: Path, rep: int = 1, body: str = RAW) -> Path:
    raw = d / "n1" / "syscall" / "abcdef012345" / f"rep{rep}.csv"
    raw.parent.mkdir(parents=True, exist_ok=True)
    raw.write_text(body)
    side = provenance.capture(NODE, "syscall", {"rep": rep, "seed": 1}, facts=hostfacts.gather())
    atomic.write_json(provenance.sidecar_for(raw), side)
    return raw


def test_probe_table_subtracts_timer_and_divides(tmp_path: Path) -> None:
    raw = write_raw(tmp_path)
    t = tables.tidy("syscall", [raw])
    assert list(t["ns_per_call"]) == [120.0, 100.0, 90.0]
    assert list(t["ns_per_sqe"]) == [120.0, 100.0, 22.5]
    assert list(t["warmup"]) == [True, False, False]
    assert set(t["node"]) == {"t"} and set(t["kind"]) == {"vm"} and set(t["rep"]) == {1}


def test_truncated_raw_file_is_rejected(tmp_path: Path) -> None:
    raw = write_raw(tmp_path, body=RAW.rsplit(",", 2)[0] + "\n")
    with pytest.raises(readers.RawFormatError):
        tables.tidy("syscall", [raw])


def test_unavailable_presets_are_read(tmp_path: Path) -> None:
    raw = write_raw(tmp_path)
    assert readers.read_unavailable(raw) == [{"preset": "sqpoll", "reason": "not applicable: no enter to time"}]


def test_each_reader_checks_the_format_its_header_names(tmp_path: Path) -> None:
    # A newer version of a format, or another format, is refused by name; a
    # file from before the header line existed is read by its columns.
    newer = write_raw(tmp_path, body="# iolab-raw: cost-probe syscall v9\n" + RAW)
    # Every cost-probe mode's format, in name order (the registry's: a new
    # mode joins the list).
    probe_formats = ", ".join(sorted(e.raw_format for e in REGISTRY.values() if e.probe_mode))
    with pytest.raises(
        readers.RawFormatError,
        match=r"its format is 'cost-probe syscall v9', which this iolab "
        r"does not read \(it reads " + re.escape(probe_formats) + r"\);",
    ):
        readers.read_raw_csv(newer)
    other = write_raw(tmp_path, rep=2, body="# iolab-raw: mpi iterations v1\n" + RAW)
    with pytest.raises(readers.RawFormatError, match="'mpi iterations v1'"):
        readers.read_raw_csv(other)
    assert len(readers.read_raw_csv(write_raw(tmp_path, rep=3))) == 3
    assert (
        readers.raw_format(write_raw(tmp_path, rep=4, body="# x=1\n# iolab-raw: cost-probe nop v2\n" + RAW))
        == "cost-probe nop v2"
    )


def test_the_cost_probes_format_version_is_the_registrys() -> None:
    header = (Path(__file__).resolve().parents[1] / "native" / "probes" / "probe.h").read_text()
    version = int(re.search(r"#define RAW_FORMAT_VERSION (\d+)", header).group(1))
    assert {e.raw_format for e in REGISTRY.values() if e.probe_mode} == {
        f"cost-probe {e.probe_mode} v{version}" for e in REGISTRY.values() if e.probe_mode
    }


def test_raw_file_without_sidecar_is_rejected(tmp_path: Path) -> None:
    raw = write_raw(tmp_path)
    provenance.sidecar_for(raw).unlink()
    with pytest.raises(readers.RawFormatError, match="sidecar"):
        tables.tidy("syscall", [raw])


def test_load_from_raw_root_and_from_parquet(tmp_path: Path) -> None:
    write_raw(tmp_path, 1)
    write_raw(tmp_path, 2)
    from_raw = tables.load("syscall", tmp_path)
    assert sorted(from_raw["rep"].unique()) == [1, 2]
    out = tmp_path / "t.parquet"
    tables.write_table("syscall", tables.raw_files_under(tmp_path, "syscall"), out)
    assert len(tables.load("syscall", out)) == len(from_raw)
    sources = json.loads(tables.sources_path(out).read_text())
    assert len(sources["raw"]) == 2 and all(len(s["sha256"]) == 64 for s in sources["raw"])


@pytest.mark.parametrize("experiment", sorted(p.name for p in (REPO / "data" / "reference" / "local").iterdir()))
def test_reference_data_loads(experiment: str) -> None:
    t = tables.load(experiment, "data/reference")
    assert len(t) > 10 and t["rep"].nunique() >= 2


# --- provenance ---------------------------------------------------------------------


def test_provenance_records_the_setup() -> None:
    p = provenance.capture(
        NODE, "syscall", {"batches": 3}, command=["x"], placement={"probe_cpu": 1}, facts=hostfacts.gather()
    )
    assert p["host"]["kernel"] == os.uname().release
    assert p["cpu"]["count"] == os.cpu_count() and p["cpu"]["placement"] == {"probe_cpu": 1}
    assert p["cpu"]["allowed"] == sorted(os.sched_getaffinity(0))
    # This checkout's build: its compiler and liburing, as the build recorded them.
    build = provenance.build_info()
    assert p["toolchain"]["liburing"] == build.get("liburing_version")
    assert p["toolchain"]["cc"] == (build.get("cc_version") or hostfacts.gather().get("cc"))
    assert p["mitigations"]["state"] in ("on", "off", "none-needed", "unknown")
    assert p["settings"] == {"batches": 3}
    assert set(p["git"]) == {"commit", "dirty"}


@pytest.mark.parametrize(
    "vulns,cmdline,state",
    [
        ({"spectre_v2": "Mitigation: Enhanced IBRS"}, "quiet", "on"),
        ({"spectre_v2": "Vulnerable"}, "mitigations=off quiet", "off"),
        ({"meltdown": "Not affected"}, "", "none-needed"),
        ({}, None, "unknown"),
    ],
)
def test_mitigation_state(vulns: dict, cmdline: str | None, state: str) -> None:
    assert provenance.mitigation_state(vulns, cmdline) == state


# --- config semantics ------------------------------------------------------------------


def test_key_path() -> None:
    assert key_path(["nodes", 0, "cpus", "probe"]) == "nodes[0].cpus.probe"


def test_semantic_checks() -> None:
    good = {**load(), "nodes": [{"name": "a", "runner": "local", "cpus": {"probe": 1}}]}
    validate_config(good)  # the semantic checks run on a config the schema filled in
    check_semantics(good, cpu_count=2)
    with pytest.raises(ConfigError, match="CPU 1 does not exist"):
        check_semantics(good, cpu_count=1)


# --- paper assembly -----------------------------------------------------------------------


def test_numbers_merge_rejects_a_key_from_two_notebooks(tmp_path: Path) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps({"x": {"notebook": "a", "value": 1}}))
    b.write_text(json.dumps({"x": {"notebook": "b", "value": 2}}))
    with pytest.raises(ValueError, match="'x' is produced by both a and b"):
        paper.merge_numbers([a, b])


def test_numbers_merge_includes_quoted_figures_labelled(tmp_path: Path) -> None:
    a = tmp_path / "a.json"
    a.write_text(json.dumps({"ours": {"notebook": "a", "value": 1}}))
    merged = paper.merge_numbers([a])
    assert merged["ours"]["value"] == 1
    assert merged["c1_s_mitigations_on_ns"]["quoted_from"]


def test_atomic_files_get_ordinary_permissions(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        dest = tmp_path / "r.json"
        atomic.write_json(dest, {})
    finally:
        os.umask(old)
    assert dest.stat().st_mode & 0o777 == 0o644


def test_numbers_with_unbounded_intervals_are_valid_json(tmp_path: Path) -> None:
    from iolab.estimation.intervals import Estimate
    from iolab.report.outputs import Outputs

    out = Outputs("t", tmp_path, tmp_path / "n.json", tmp_path / "m.json")
    out.number("nstar", 20.5, digits=1, estimate=Estimate(20.5, 18.0, float("inf"), 6), kind="count")
    out.finish()
    entry = json.loads((tmp_path / "n.json").read_text())["nstar"]
    assert entry["ci95"] == [18.0, None] and entry["ci_text"] == "18.0–∞"


def test_a_figure_laid_out_to_its_edges_prints_no_font_below_its_size(tmp_path: Path) -> None:
    """Saving pads a figure's tight box on both sides. A figure drawn at the
    figure width whose content reaches both its edges (as a legend below the
    panels may: the layout leaves it out) saves no wider than the text, so
    its 7 pt stamp prints at 7 pt. Negative control: drawn at the text's own
    width, it saves wider than the text and the stamp prints below 7 pt (as
    mpi_method_ratio's did once, at 6.98 pt)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from iolab.report import plots
    from iolab.report.outputs import Outputs

    plots.style.apply()
    style = plots.style
    printed = {}
    for width in (style.FIGURE_WIDTH_IN, style.TEXT_WIDTH_IN):
        fig = plt.figure(figsize=(width, 2.0))
        fig.text(0.0, 0.5, "left edge", ha="left")
        fig.text(1.0, 0.5, "right edge", ha="right")
        out = Outputs("t", tmp_path / str(width), tmp_path / "n.json", tmp_path / "m.json")
        out.figure(fig, "edges", caption="c")
        printed[width] = out.figures["edges"]["smallest_font_pt"]
        plt.close(fig)
    assert printed[style.FIGURE_WIDTH_IN] >= style.MIN_FONT_PT, printed
    assert printed[style.TEXT_WIDTH_IN] < style.MIN_FONT_PT, printed


def test_figures_are_cropped_as_savefig_crops_them(tmp_path: Path) -> None:
    """Outputs measures the tight box once for all three formats (with Agg's
    text metrics); each file has the size matplotlib's own
    bbox_inches="tight" gives it within 1 %, and the figure keeps its layout
    engine."""
    import re

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from PIL import Image

    from iolab.report import plots
    from iolab.report.outputs import Outputs

    plots.style.apply()
    # Long tick labels, as in the claims' forest plot: measured at the
    # figure's own 110 dpi they come out about 2 % wider.
    fig, ax = plt.subplots(figsize=(7, 7))
    ax.set_yticks(range(20), [f"U{i}: c={100 * i} 1024 B, reactor/baseline requests/s (slower) *" for i in range(20)])
    ax.set_xscale("log", base=2)
    ax.errorbar([1.1] * 20, range(20), xerr=0.2, fmt="o", label="undecided")
    ax.legend(loc="lower right", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    engine = fig.get_layout_engine()
    out = Outputs("t", tmp_path / "ours", tmp_path / "n.json", tmp_path / "m.json")
    (svg, png) = [p for p in out.figure(fig, "crop", caption="c") if p.suffix in (".svg", ".png")][::-1]
    fig.savefig(tmp_path / "tight.svg", bbox_inches="tight")
    fig.savefig(tmp_path / "tight.png", bbox_inches="tight")
    assert fig.get_layout_engine() is engine

    def svg_size(path: Path) -> list[float]:
        return [float(v) for v in re.search(r'viewBox="0 0 ([\d.]+) ([\d.]+)"', path.read_text()).groups()]

    assert svg_size(svg) == pytest.approx(svg_size(tmp_path / "tight.svg"), rel=0.01)
    assert Image.open(png).size == pytest.approx(Image.open(tmp_path / "tight.png").size, rel=0.01)
    plt.close(fig)


def test_json_writer_refuses_nan(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        atomic.write_json(tmp_path / "x.json", {"v": float("nan")})
    assert not (tmp_path / "x.json").exists()


def test_paper_source_keeps_its_semicolons() -> None:
    """In Typst markup a semicolon right after an embedded call ends the call
    and is swallowed ("Ranks: 2, 4 with 4 ranks" lost its ";"): such a
    semicolon must be escaped."""
    import re

    source = (Path(__file__).resolve().parents[1] / "paper" / "paper.typ").read_text()
    swallowed = [source.count("\n", 0, m.start()) + 1 for m in re.finditer(r'#\w+\("[^"]*"\);', source)]
    assert swallowed == [], f"escape as \\; on paper.typ lines {swallowed}"


def test_the_title_falls_back_when_a_check_doubts_its_number(tmp_path: Path) -> None:
    def merged_title(reps: list[float]) -> str:
        a = tmp_path / "claims.json"
        entry = {"notebook": "claims", "unit": "", "note": ""}
        a.write_text(
            json.dumps(
                {
                    "paper_title": {
                        **entry,
                        "value": "On X, io_uring costs 0.95x",
                        "text": "On X, io_uring costs 0.95x",
                    },
                    "paper_title_plain": {
                        **entry,
                        "value": "io_uring against epoll on X",
                        "text": "io_uring against epoll on X",
                    },
                    "paper_title_cell": {**entry, "value": "headline_cpu_c500_b128", "text": "headline_cpu_c500_b128"},
                    "headline_cpu_c500_b128": {**entry, "value": 0.95, "text": "0.95", "reps": reps, "kind": "ratio"},
                }
            )
        )
        return str(paper.merge_numbers([a], run_root=tmp_path)["paper_title"]["text"])

    # Two groups of repetitions with the median between them: the bimodal check flags it.
    assert merged_title([0.75, 0.78, 0.81, 1.09, 1.10, 1.11]) == "io_uring against epoll on X"
    # Negative control: repetitions in one group keep the finding in the title.
    assert merged_title([0.93, 0.94, 0.95, 0.95, 0.96, 0.97]) == "On X, io_uring costs 0.95x"
