"""The between-occasion spread, estimated from archived runs (iolab.analysis.occasions,
./repro occasions): REML over the runs' per-repetition values, written with
the runs it rests on, read back by every prediction interval; crates are
checked before anything is read from them."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
from conftest import tool_env
from crate_support import craft, raw_of_another_run

from iolab.analysis import occasions


def shifted(numbers: dict, factor: float, rng: np.random.Generator) -> dict:
    """A run on another occasion: every number's repetitions drawn afresh
    around its median, moved by the run's one shared factor, with 5 % noise
    of their own (copying a noisy run's repetitions into every run would
    give all runs the same within-run noise, which no two runs share)."""
    out = json.loads(json.dumps(numbers))
    for entry in out.values():
        reps = entry.get("reps") if isinstance(entry, dict) else None
        if isinstance(reps, list) and reps and all(isinstance(v, (int, float)) for v in reps):
            centre = float(np.median(reps))
            entry["reps"] = [centre * factor * float(rng.lognormal(0, 0.05)) for _ in reps]
    return out


def test_the_estimate_recovers_an_occasion_effect_from_runs() -> None:
    rng = np.random.default_rng(3)
    base = {
        f"q{i}": {"value": 1.0, "unit": "ns", "notebook": "cost_model", "reps": list(rng.lognormal(0, 0.05, 6))}
        for i in range(30)
    }
    runs = [shifted(base, float(np.exp(rng.normal(0, 0.1))), rng) for _ in range(6)]
    # Each run's quantities share its occasion's factor; within a run, 5 % noise.
    got = occasions.estimate(runs)["cost_model:absolute"]
    assert 0.04 < got.sigma_occasion < 0.2 and got.runs == 6 and got.quantities == 30


def test_a_groups_numbers_without_repetitions_add_nothing() -> None:
    assert occasions.observations({"x": {"value": 1.0, "notebook": "echo", "unit": ""}}) == {}
    with pytest.raises(ValueError, match="at least two runs"):
        occasions.estimate([{"x": {"value": 1.0, "reps": [1.0, 1.1, 0.9], "notebook": "echo", "unit": ""}}])


@pytest.fixture(scope="module")
def base_crate(smoke_run: tuple[Path, object], tmp_path_factory: pytest.TempPathFactory) -> Path:
    wd, _ = smoke_run
    out = tmp_path_factory.mktemp("occ-crate")
    res = subprocess.run(
        [sys.executable, "-m", "iolab.archive.crate", "build", "--out", str(out)],
        cwd=wd,
        env=tool_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stderr
    (crate,) = out.glob("*.crate.zip")
    return crate


def test_repro_occasions_writes_the_estimate_with_the_runs_it_rests_on(base_crate: Path, tmp_path: Path) -> None:
    with zipfile.ZipFile(base_crate) as z:
        numbers = json.loads(z.read("paper/generated/numbers.json"))
    assert any(isinstance(e, dict) and e.get("reps") for e in numbers.values()), "numbers keep their repetitions"
    rng = np.random.default_rng(1)
    crates = [
        craft(
            base_crate,
            tmp_path / f"run{i}.crate.zip",
            replace={
                "paper/generated/numbers.json": json.dumps(shifted(numbers, f, rng)).encode(),
                **raw_of_another_run(base_crate, str(i)),
            },
        )
        for i, f in enumerate((0.9, 1.0, 1.15))
    ]
    target = tmp_path / "occasions.json"
    res = subprocess.run(
        [sys.executable, "-m", "iolab.archive.occasions", "estimate", *map(str, crates), "--output", str(target)],
        env=tool_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stderr
    doc = json.loads(target.read_text())
    assert [r["crate"] for r in doc["runs"]] == [c.name for c in crates]
    assert doc["method"] == occasions.METHOD and "all" in doc["groups"]
    assert doc["groups"]["all"]["sigma_occasion"] > 0.05
    loaded = occasions.load(target)
    assert math.isclose(loaded.sigma("no such group"), doc["groups"]["all"]["sigma_occasion"], rel_tol=1e-6)
    # A crate that does not verify is refused in one line; nothing is written.
    bad = craft(base_crate, tmp_path / "bad.crate.zip", links={"data/raw/x/y": "/etc/passwd"})
    target.unlink()
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "iolab.archive.occasions",
            "estimate",
            str(bad),
            str(crates[0]),
            "--output",
            str(target),
        ],
        env=tool_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 1 and res.stderr.count("\n") == 1 and "a symbolic link" in res.stderr
    assert not target.exists()


def estimate_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "iolab.archive.occasions", "estimate", *args],
        env=tool_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_one_run_counts_once_and_an_estimate_in_use_is_never_replaced_unasked(base_crate: Path, tmp_path: Path) -> None:
    # The same crate twice, and the same run zipped again: one run, which
    # cannot give a between-run spread (it once wrote 0.000 for every group).
    again = craft(base_crate, tmp_path / "again.crate.zip")
    target = tmp_path / "occasions.json"
    res = estimate_cli(str(base_crate), str(base_crate), str(again), "--output", str(target))
    assert res.returncode == 1 and not target.exists(), res.stderr
    assert f"{again.name} is the same run as {base_crate.name}" in res.stderr
    assert res.stderr.strip().splitlines()[-1] == (
        "occasions: the crates hold 1 distinct run(s); an estimate needs runs of at least two occasions"
    )
    # An existing estimate (the tracked one by default) stays unless --replace.
    other = craft(base_crate, tmp_path / "other.crate.zip", replace=raw_of_another_run(base_crate, "b"))
    target.write_text("{}")
    res = estimate_cli(str(base_crate), str(other), "--output", str(target))
    assert res.returncode == 2 and "pass --replace" in res.stderr and target.read_text() == "{}"
    res = estimate_cli(str(base_crate), str(other), "--output", str(target), "--replace")
    assert res.returncode == 0, res.stderr
    assert len({r["run"] for r in json.loads(target.read_text())["runs"]}) == 2
