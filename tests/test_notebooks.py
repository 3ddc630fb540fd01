"""Notebooks: paired .py/.ipynb in sync, a tagged parameters cell, thin code,
and a by-hand run against the shipped reference data."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jupytext
import numpy as np
import pandas as pd
import pytest
from conftest import REPO, tool_env

from iolab import paths
from iolab.registry import NOTEBOOKS as NOTEBOOKS_REGISTRY

NOTEBOOKS = sorted((REPO / "notebooks").glob("*.py"))


@pytest.mark.parametrize("source", NOTEBOOKS, ids=lambda p: p.stem)
def test_pair_is_in_sync(source: Path) -> None:
    paired = source.with_suffix(".ipynb")
    assert paired.exists(), f"run: jupytext --sync {source}"
    from_py = [c.source for c in jupytext.read(source).cells]
    from_ipynb = [c.source for c in jupytext.read(paired).cells]
    assert from_py == from_ipynb, f"out of sync; run: jupytext --sync {source}"


# What a person changes to look at something else; everything else the
# parameters cell used to hold is the pipeline's plumbing.
KNOBS = {"node", "reps", "presets", "transports", "kind_a", "kind_b"}


def assigned(cell: Any) -> set[str]:
    """The names a cell assigns."""
    body = ast.parse(cell.source).body
    return {t.id for n in body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}


@pytest.mark.parametrize("source", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_first_cell_holds_the_knobs_and_the_plumbing_comes_after(source: Path) -> None:
    # The first code cell is papermill's parameters cell, with only what a
    # person explores; the tables and outputs the pipeline passes come
    # next, then the cell papermill replaces with the values it is given,
    # so that they override both cells.
    code = [c for c in jupytext.read(source).cells if c.cell_type == "code"]
    knobs, plumbing, injected = code[:3]
    assert "parameters" in knobs.metadata.get("tags", [])
    assert assigned(knobs) and assigned(knobs) <= KNOBS, assigned(knobs)
    wanted = {f"{e}_table" for e in NOTEBOOKS_REGISTRY[source.stem].tables} | {
        "figure_dir",
        "numbers_out",
        "manifest_out",
    }
    assert wanted <= assigned(plumbing) and not assigned(plumbing) & KNOBS, assigned(plumbing) ^ wanted
    assert injected.metadata.get("tags") == ["injected-parameters"] and not assigned(injected)


# What a thin notebook's code may contain: imports, assignments, calls,
# attribute access and indexing by name or constant, f-strings, a
# conditional on whether an input exists. No loops, comprehensions,
# functions, lambdas, arithmetic or comparisons: computation lives in iolab/,
# where it is tested.
ALLOWED = (
    ast.Module,
    ast.Import,
    ast.ImportFrom,
    ast.alias,
    ast.Assign,
    ast.Expr,
    ast.Call,
    ast.keyword,
    ast.Name,
    ast.Load,
    ast.Store,
    ast.Attribute,
    ast.Subscript,
    ast.Constant,
    ast.List,
    ast.Tuple,
    ast.Dict,
    ast.JoinedStr,
    ast.FormattedValue,
    ast.IfExp,
    ast.If,
    ast.BoolOp,
    ast.And,
    ast.Or,
    ast.Starred,
)


def thin_violations(code: str) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(code)):
        if (
            isinstance(node, ast.BinOp)
            and isinstance(node.op, ast.Add)
            and (isinstance(node.left, (ast.Constant, ast.JoinedStr)))
        ):
            continue  # "label " + name: text, not computation
        if isinstance(node, ast.Add):
            continue
        if (
            isinstance(node, ast.Compare)
            and all(isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops)
            and all(isinstance(c, ast.Constant) and c.value is None for c in node.comparators)
        ):
            continue  # whether an optional input exists
        if isinstance(node, (ast.Is, ast.IsNot)):
            continue
        if not isinstance(node, ALLOWED):
            out.append(f"line {getattr(node, 'lineno', '?')}: {type(node).__name__}")
    return out


@pytest.mark.parametrize("source", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_code_stays_thin(source: Path) -> None:
    code = "\n".join(c.source for c in jupytext.read(source).cells if c.cell_type == "code")
    assert thin_violations(code) == []


def test_the_thinness_check_catches_computation() -> None:
    assert thin_violations("x = [f(a) for a in b]")[0] == "line 1: ListComp"
    assert thin_violations("y = t[t['n'] == 1]")[0] == "line 1: Compare"
    assert thin_violations("for r in rows:\n    out.number(r)")[0] == "line 1: For"
    assert thin_violations("z = a / 1e3")[0] == "line 1: BinOp"
    assert thin_violations("y = t[t['n'] is 1]")[0] == "line 1: Compare"
    assert thin_violations("fig = plotting.f(t, 'MPI ' + title)\nif x is not None:\n    out.figure(fig)") == []


def raw_frames(experiment: str) -> dict[int, pd.DataFrame]:
    """rep -> the raw CSV of the shipped reference data, read with pandas alone."""
    files = sorted((REPO / "data" / "reference").glob(f"*/{experiment}/*/rep*.csv"))
    return {int(f.stem[3:]): pd.read_csv(f, comment="#") for f in files if f.stem[3:].isdigit()}


def expected_epoll_c50_rps() -> float:
    values = [
        float(
            f.loc[(f["preset"] == "epoll") & (f["connections"] == 50) & (f["bytes"] == f["bytes"].min()), "rps"].iloc[0]
        )
        for f in raw_frames("echo").values()
    ]
    return float(np.median(values))


def expected_shm_latency_us() -> float:
    per_rep = []
    for frame in raw_frames("mpi").values():
        pp = frame[
            (frame["transport"] == "shm") & (frame["bench"] == "pingpong") & (frame["rank"] == 0) & (frame["late"] == 0)
        ]
        pp = pp[pp["bytes"] == pp["bytes"].min()]
        per_rep.append((pp["ns"] / 2).median())
    return float(np.median(per_rep)) / 1e3


def expected_u1_c50_ratio() -> float:
    ratios = []
    for f in raw_frames("echo").values():
        cell = (f["connections"] == 50) & (f["bytes"] == 128)
        ratios.append(
            float(f.loc[cell & (f["preset"] == "default"), "rps"].iloc[0])
            / float(f.loc[cell & (f["preset"] == "epoll"), "rps"].iloc[0])
        )
    return float(np.median(ratios))


# notebook -> the experiments whose tables it reads (iolab.registry), where
# the reference data has them (it has no ib run).
REFERENCE = {p.parent.parent.name for p in (REPO / "data" / "reference").glob("*/*/*/rep*.csv")}
NOTEBOOK_TABLES = {name: [e for e in nb.tables if e in REFERENCE] for name, nb in NOTEBOOKS_REGISTRY.items()}


def papermill(cwd: Path, notebook: str, out: Path, *params: str) -> subprocess.CompletedProcess[str]:
    """Run a notebook of the checkout ``cwd/..`` by hand, with that checkout's iolab."""
    out.mkdir(parents=True, exist_ok=True)
    env = {**tool_env(), "PYTHONPATH": str(cwd.parent)}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "papermill",
            "--no-progress-bar",
            f"{notebook}.ipynb",
            str(out / "executed.ipynb"),
            "-p",
            "figure_dir",
            str(out / "figures"),
            "-p",
            "numbers_out",
            str(out / "numbers.json"),
            "-p",
            "manifest_out",
            str(out / "manifest.json"),
            *params,
        ],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


# Each notebook's numbers by hand on the reference data, run once per session.
_BY_HAND: dict[str, dict] = {}


@pytest.fixture
def by_hand(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], dict]:
    def numbers(notebook: str) -> dict:
        if notebook not in _BY_HAND:
            _BY_HAND[notebook] = run_by_hand(tmp_path_factory.mktemp(f"by-hand-{notebook}"), notebook)
        return _BY_HAND[notebook]

    return numbers


def run_by_hand(tmp_path: Path, notebook: str) -> dict:
    """The notebook run by hand on the shipped reference data (named
    explicitly: "auto" would prefer a pipeline run's tables if this checkout
    has one)."""
    out = tmp_path / "out"
    tables = [a for e in NOTEBOOK_TABLES[notebook] for a in ("-p", f"{e}_table", "data/reference")]
    # The records of earlier launches are evidence, never what a test
    # expects: the claims notebook pools none here.
    extra = ["-p", "records_dir", ""] if notebook == "claims" else []
    res = papermill(REPO / "notebooks", notebook, out, *tables, *extra)
    assert res.returncode == 0, res.stderr[-3000:]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["figures"] and all((out / "figures" / f"{name}.svg").exists() for name in manifest["figures"])
    # By hand on raw files, the manifest still lists every raw file it read.
    assert manifest["raw"] and all(r["raw"].startswith("data/reference/") for r in manifest["raw"])
    return json.loads((out / "numbers.json").read_text())


NUMBERS_RECORD = REPO / "tests" / "data" / "reference_numbers.json"

# Floats agree to this relative difference. The last bits of a sum or a
# least-squares fit depend on the CPU's vector width (numpy's AVX-512 and
# AVX2 reductions add in different orders), so the record made on one CPU
# differs from another's by about 1e-15; every text, count and verdict must
# still be equal.
FLOAT_REL = 1e-9


def differences(want: object, got: object, where: str = "") -> list[str]:
    """Where ``got`` differs from ``want``: floats beyond FLOAT_REL, anything
    else (texts, ints, None, keys, lengths) at all."""
    if isinstance(want, dict) and isinstance(got, dict):
        if sorted(want) != sorted(got):
            return [f"{where or '/'}: keys {sorted(set(want) ^ set(got))}"]
        return [d for k in want for d in differences(want[k], got[k], f"{where}/{k}")]
    if isinstance(want, list) and isinstance(got, list):
        if len(want) != len(got):
            return [f"{where}: {len(got)} items, recorded {len(want)}"]
        return [d for i, (w, g) in enumerate(zip(want, got, strict=True)) for d in differences(w, g, f"{where}[{i}]")]
    if isinstance(want, float) and isinstance(got, float):
        return [] if got == pytest.approx(want, rel=FLOAT_REL, abs=0) else [f"{where}: {got!r}, recorded {want!r}"]
    return [] if type(want) is type(got) and want == got else [f"{where}: {got!r}, recorded {want!r}"]


def test_the_comparison_with_the_record_tolerates_last_bits_only() -> None:
    want = {"a": {"value": 273.5540578353493, "text": "274"}, "f": [{"low": None, "n": 3}]}
    assert differences(want, {"a": {"value": 273.55405783534997, "text": "274"}, "f": [{"low": None, "n": 3}]}) == []
    assert differences(want, {"a": {"value": 273.56, "text": "274"}, "f": [{"low": None, "n": 3}]}) == [
        "/a/value: 273.56, recorded 273.5540578353493"
    ]
    assert differences(want, {"a": {"value": 273.5540578353493, "text": "273"}, "f": [{"low": 0.0, "n": 3}]}) == [
        "/a/text: '273', recorded '274'",
        "/f[0]/low: 0.0, recorded None",
    ]
    assert differences(want, {"a": {"value": 273.5540578353493, "text": "274"}, "f": [{"low": None, "n": 3.0}]}) == [
        "/f[0]/n: 3.0, recorded 3"
    ]
    assert differences(want, {"a": {"value": 273.5540578353493}, "f": []}) == [
        "/a: keys ['text']",
        "/f: 0 items, recorded 1",
    ]


@pytest.mark.parametrize("notebook", sorted(NOTEBOOK_TABLES))
def test_the_reference_data_gives_the_recorded_numbers(by_hand: Callable[[str], dict], notebook: str) -> None:
    # What the notebook handed the paper when the record was made, text for
    # text and (to the last bits, see FLOAT_REL) value for value; after a
    # deliberate change, rewrite it with
    # `.venv/bin/python tests/test_notebooks.py --record` and say why.
    want = json.loads(NUMBERS_RECORD.read_text())[notebook]
    got = by_hand(notebook)
    assert sorted(got) == sorted(want)
    assert differences(want, got) == []


def first_output(executed: Path) -> str:
    """What the first cell that printed anything printed."""
    for c in json.loads(executed.read_text())["cells"]:
        said = "".join("".join(o.get("text", "")) for o in c.get("outputs", []) if o.get("name") == "stdout")
        if said:
            return said
    return ""


def test_cost_model_by_hand_matches_an_independent_computation(by_hand: Callable[[str], dict]) -> None:
    numbers = by_hand("cost_model")
    syscall = raw_frames("syscall")
    timers = {
        rep: float(next(ln for ln in f.read_text().splitlines() if ln.startswith("# timer_overhead_ns=")).split("=")[1])
        for f in sorted((REPO / "data" / "reference").glob("*/syscall/*/rep*.csv"))
        for rep in [int(f.stem[3:])]
    }
    per_rep = [
        (
            (f.loc[(f["variant"] == "getppid") & (f["warmup"] == 0), "ns"] - timers[rep])
            / f.loc[(f["variant"] == "getppid") & (f["warmup"] == 0), "calls"]
        ).median()
        for rep, f in syscall.items()
    ]
    assert numbers["s_getppid_ns"]["value"] == pytest.approx(float(np.median(per_rep)), rel=1e-12)
    assert numbers["s_getppid_ns"]["n"] == len(per_rep)


def test_echo_by_hand_matches_an_independent_computation(by_hand: Callable[[str], dict]) -> None:
    numbers = by_hand("echo")
    assert numbers["echo_epoll_c50_rps"]["value"] == pytest.approx(expected_epoll_c50_rps(), rel=1e-12)


def test_collectives_by_hand_matches_an_independent_computation(by_hand: Callable[[str], dict]) -> None:
    numbers = by_hand("collectives")
    assert numbers["mpi_shm_latency_us"]["value"] == pytest.approx(expected_shm_latency_us(), rel=1e-12)


def test_claims_by_hand_pair_ratios_within_each_repetition(by_hand: Callable[[str], dict]) -> None:
    numbers = by_hand("claims")
    u1 = [
        f
        for f in numbers["findings"]["value"]
        if f["claim"] == "U1" and f["part"].startswith("c=50 128 B, io_uring/epoll requests/s")
    ]
    assert len(u1) == 1
    assert u1[0]["value"].startswith(f"{expected_u1_c50_ratio():.3g}")
    for claim in ("c1", "c2", "c3", "u1", "u2", "u3", "u4", "m1", "m2"):
        assert numbers[f"{claim}_verdict"]["text"].split(":")[0].split(" (")[0] in (
            "reproduced",
            "not reproduced",
            "undecided at this precision",
            "not testable here",
        )


def test_nodes_by_hand_runs_on_one_node_kind(by_hand: Callable[[str], dict]) -> None:
    numbers = by_hand("nodes")
    assert numbers["node_kinds"]["value"] == 1 and "node_pair" not in numbers


def test_opened_by_hand_a_notebook_shows_the_pipelines_latest_tables(smoke_copy: Path, tmp_path: Path) -> None:
    # "auto": the pipeline's tables exist in this checkout, so they are used,
    # and the first output says which data it is (node, dates, commit).
    res = papermill(smoke_copy / "notebooks", "claims", tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    said = first_output(tmp_path / "executed.ipynb")
    assert "syscall: results/tables/syscall.parquet (the pipeline's latest run); node local; measured 20" in said
    assert "2 repetitions" in said and "commit " in said
    # Nothing written by hand touches the pipeline's outputs.
    assert json.loads((tmp_path / "numbers.json").read_text())["u1_verdict"]


def test_without_a_pipeline_run_auto_means_the_reference_data(tmp_path: Path) -> None:
    res = papermill(REPO / "notebooks", "collectives", tmp_path, "-p", "node", "local", "-y", "reps: [1]")
    assert res.returncode == 0, res.stderr[-3000:]
    said = first_output(tmp_path / "executed.ipynb")
    expected = (
        "results/tables/mpi.parquet"
        if (REPO / "results" / "tables" / "mpi.parquet").exists()
        else ("mpi: data/reference (the reference data shipped with iolab)")
    )
    assert expected in said
    assert json.loads((tmp_path / "numbers.json").read_text())["mpi_repeats"]["value"] == 1


def test_a_parameter_naming_a_node_that_is_not_there_is_one_line(tmp_path: Path) -> None:
    res = papermill(
        REPO / "notebooks",
        "cost_model",
        tmp_path,
        "-p",
        "node",
        "atlantis",
        *[a for e in NOTEBOOK_TABLES["cost_model"] for a in ("-p", f"{e}_table", "data/reference")],
    )
    assert res.returncode != 0
    assert "node 'atlantis' is not in this table (nodes: local); set the notebook's node parameter" in res.stderr


def test_every_figure_has_one_caption_file_and_every_caption_a_figure() -> None:
    import re as _re

    named = set()
    for source in NOTEBOOKS:
        named |= set(_re.findall(r'out\.figure\(\s*fig,\s*"([a-z_]+)"', source.read_text()))
    # A manifest's figures have their captions in its experiment's room, the
    # rest in report/captions/ (iolab.paths.caption; tests/test_declared_once.py).
    captions = [p.stem for p in (REPO / "report" / "captions").glob("*.rst")]
    captions += [p.stem for p in (REPO / "iolab" / "rooms").glob("*/*.rst")]
    assert named and named == set(captions) and len(captions) == len(set(captions))
    assert all(paths.caption(name).exists() for name in named)


if __name__ == "__main__":
    import argparse
    import tempfile

    ap = argparse.ArgumentParser(description="Record each notebook's numbers on the shipped reference data.")
    ap.add_argument("--record", action="store_true", help=f"rewrite {NUMBERS_RECORD.relative_to(REPO)}")
    if not ap.parse_args().record:
        ap.print_help()
        sys.exit(2)
    with tempfile.TemporaryDirectory() as scratch:
        record = {nb: run_by_hand(Path(scratch) / nb, nb) for nb in sorted(NOTEBOOK_TABLES)}
    NUMBERS_RECORD.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    print(f"wrote {NUMBERS_RECORD.relative_to(REPO)}")
