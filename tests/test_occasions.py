"""The between-occasion spread, estimated from archived runs (iolab.estimation.occasion_spread,
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
from crate_support import another_run, craft, raw_copy

from iolab.estimation import occasion_spread as occasions


def shifted(numbers: dict, factor: float, rng: np.random.Generator) -> dict:
    """A run on another occasion: every number's repetitions drawn afresh
    around its median, moved by the run's one shared factor, with 5 % noise
    of their own (copying a noisy run's repetitions into every run would
    give all runs the same within-run noise, which no two runs share)."""
    out = json.loads(json.dumps(numbers))
    findings = out.get("findings", {}).get("value", []) if isinstance(out.get("findings"), dict) else []
    # The claims' parts move with the run too: left as they were, a claims
    # group would read no spread between runs at all.
    for entry, field in [*((e, "reps") for e in out.values()), *((f, "per_rep") for f in findings)]:
        reps = entry.get(field) if isinstance(entry, dict) else None
        if isinstance(reps, list) and reps and all(isinstance(v, (int, float)) for v in reps):
            centre = float(np.median(reps))
            entry[field] = [centre * factor * float(rng.lognormal(0, 0.05)) for _ in reps]
    return out


def test_the_estimate_recovers_an_occasion_effect_from_runs() -> None:
    rng = np.random.default_rng(3)
    base = {
        f"q{i}": {
            "value": 1.0,
            "unit": "ns",
            "kind": "time",
            "notebook": "cost_model",
            "reps": list(rng.lognormal(0, 0.05, 6)),
        }
        for i in range(30)
    }
    runs = [shifted(base, float(np.exp(rng.normal(0, 0.1))), rng) for _ in range(6)]
    # Each run's quantities share its occasion's factor; within a run, 5 % noise.
    got = occasions.estimate(runs)["cost_model:time"]
    assert 0.04 < got.sigma_occasion < 0.2 and got.runs == 6 and got.quantities == 30
    # Its uncertainty: a run's effect is shared by its quantities, so 6 runs
    # give 5 degrees of freedom, and the upper bound is sigma x sqrt(5 / chi2_0.05(5)).
    assert got.df == 5 and got.upper == pytest.approx(got.sigma_occasion * math.sqrt(5 / 1.1455), rel=1e-3)


def runs_of_two_kinds(
    rng: np.random.Generator, runs: int, ratio_sd: float, rate_sd: float, quantities: int = 20
) -> list[dict]:
    """Runs of one notebook with paired ratios and absolute rates, both
    unit-less, each kind moved by its own occasion effect."""
    out = []
    for _ in range(runs):
        ratio_f, rate_f = float(np.exp(rng.normal(0, ratio_sd))), float(np.exp(rng.normal(0, rate_sd)))
        numbers = {}
        for i in range(quantities):
            numbers[f"ratio{i}"] = {
                "notebook": "echo",
                "unit": "",
                "kind": "ratio",
                "reps": list(ratio_f * rng.lognormal(0, 0.05, 6)),
            }
            numbers[f"rps{i}"] = {
                "notebook": "echo",
                "unit": "",
                "kind": "rate",
                "reps": list(1e5 * rate_f * rng.lognormal(0, 0.05, 6)),
            }
        out.append(numbers)
    return out


def test_each_kind_is_estimated_apart_and_a_number_of_no_kind_adds_nothing() -> None:
    # Unit-less requests/s were once filed as ratios: a paired ratio's small
    # spread then read as the rates' large one.
    rng = np.random.default_rng(5)
    groups = occasions.estimate(runs_of_two_kinds(rng, 8, 0.03, 0.25))
    assert set(groups) == {"echo:ratio", "echo:rate"}
    assert groups["echo:ratio"].sigma_occasion < 0.08 < 0.12 < groups["echo:rate"].sigma_occasion
    # A crate from before kinds: a unit names a time for certain; a unit-less
    # number could be a ratio or a count, and is left out, not guessed.
    old = {"a": {"notebook": "echo", "unit": "", "reps": [1.0, 1.1, 0.9]}}
    old["b"] = {"notebook": "echo", "unit": "ns", "reps": [1.0, 1.1, 0.9]}
    assert set(occasions.observations(old)) == {("echo:time", "b")}
    # Shares and differences have no log scale, so no estimate.
    assert occasions.observations({"s": {"notebook": "mpi", "kind": "share", "reps": [0.5, 0.6, 0.7]}}) == {}


def test_an_estimate_carries_its_own_uncertainty_and_no_group_falls_back() -> None:
    spread = occasions.Spread(0.10, 0.05, 10, 4, 240)
    assert spread.df == 3 and spread.upper == pytest.approx(0.292, abs=1e-3)
    assert occasions.Spread(0.10, 0.05, 10, 1, 60).upper == math.inf
    occ = occasions.Occasions({"echo:ratio": spread}, {})
    assert occ.sigma("echo:ratio") == 0.10 and occ.sigma("mpi:ratio") is None and occ.spread("all") is None
    # Unknown: no interval claims to cover a re-run; the run's own one stays available.
    values = [1.0, 1.1, 0.9, 1.05, 0.95, 1.02]
    assert all(math.isnan(x) for x in occasions.prediction_interval(values, None))
    low, high = occasions.prediction_interval(values, None, within_only=True)
    wide_low, wide_high = occasions.prediction_interval(values, spread)
    assert wide_low < low < 1.0 < high < wide_high


def test_a_number_with_an_interval_declares_its_kind(tmp_path: Path) -> None:
    from iolab.estimation.intervals import across_reps
    from iolab.report.outputs import Outputs

    out = Outputs("echo", tmp_path, tmp_path / "n.json", tmp_path / "m.json")
    est = across_reps([1.0, 1.1, 0.9, 1.0, 1.05, 0.95])
    with pytest.raises(ValueError, match="declare its kind"):
        out.number("x", est.value, estimate=est)
    with pytest.raises(ValueError, match="is not one of"):
        out.number("x", est.value, estimate=est, kind="absolute")
    out.number("x", est.value, estimate=est, kind="ratio")
    assert out.numbers["x"]["kind"] == "ratio" and out.numbers["x"]["group"] == "echo:ratio"


def test_a_groups_numbers_without_repetitions_add_nothing() -> None:
    assert occasions.observations({"x": {"value": 1.0, "notebook": "echo", "unit": "", "kind": "ratio"}}) == {}
    with pytest.raises(ValueError, match="at least two runs"):
        occasions.estimate(
            [{"x": {"value": 1.0, "reps": [1.0, 1.1, 0.9], "notebook": "echo", "unit": "", "kind": "ratio"}}]
        )


def test_prediction_intervals_hold_a_re_run_as_often_as_they_say_and_without_the_occasion_they_do_not() -> None:
    from iolab.archive import calibration

    # Sets of six runs, each run moved by its occasion (0.10 in log),
    # repetitions 5 % apart: each run held out in turn, the others estimate
    # the spread (5 runs, 4 degrees of freedom). Averaged over the sets, as
    # a re-run meets them; one set's share moves with its own estimate.
    def mean_shares(with_occasion: bool = True) -> dict[float, float]:
        got = [
            calibration.coverage(
                runs_of_two_kinds(np.random.default_rng(seed), 6, 0.10, 0.10, quantities=8), with_occasion
            )
            for seed in range(8)
        ]
        return {level: float(np.mean([c.share(level) for c in got])) for level in calibration.LEVELS}

    shares = mean_shares()
    lo, hi = calibration.GOAL_95
    assert lo <= shares[0.95] <= hi, shares
    assert shares[0.5] < shares[0.8] < shares[0.9] < shares[0.95] < shares[0.99], shares
    assert abs(shares[0.5] - 0.5) < 0.1 and abs(shares[0.8] - 0.8) < 0.08, shares
    # Negative control: the same intervals without the occasion term (this
    # run's repetitions only) hold far fewer re-runs.
    narrow = mean_shares(with_occasion=False)
    assert narrow[0.95] < lo, narrow


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
    crates = []
    for i, f in enumerate((0.9, 1.0, 1.15)):
        replace, edit = another_run(base_crate, i, shifted(numbers, f, rng))
        crates.append(craft(base_crate, tmp_path / f"run{i}.crate.zip", replace=replace, edit_metadata=edit))
    target = tmp_path / "occasions.json"
    res = subprocess.run(
        [sys.executable, "-m", "iolab.archive.spread", "estimate", *map(str, crates), "--output", str(target)],
        env=tool_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stderr
    doc = json.loads(target.read_text())
    assert [r["crate"] for r in doc["runs"]] == [c.name for c in crates]
    assert doc["method"] == occasions.METHOD and "all" not in doc["groups"]
    assert all(g.rsplit(":", 1)[1] in occasions.LOG_KINDS for g in doc["groups"]), doc["groups"]
    assert max(g["sigma_occasion"] for g in doc["groups"].values()) > 0.05
    assert all(g["df"] == 2 and g["upper95"] > g["sigma_occasion"] for g in doc["groups"].values())
    loaded = occasions.load(target)
    assert loaded.sigma("no such group") is None
    # A crate that does not verify is refused in one line; nothing is written.
    bad = craft(base_crate, tmp_path / "bad.crate.zip", links={"data/raw/x/y": "/etc/passwd"})
    target.unlink()
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "iolab.archive.spread",
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
        [sys.executable, "-m", "iolab.archive.spread", "estimate", *args],
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
    # Copies with every raw file's bytes edited and their checksums
    # recomputed are still that one run: its launch, first start and
    # findings are the same (they once counted as runs of their own).
    copies = [
        craft(base_crate, tmp_path / f"copy{i}.crate.zip", replace=raw_copy(base_crate, str(i))) for i in range(3)
    ]
    res = estimate_cli(str(base_crate), *map(str, copies), "--output", str(target))
    assert res.returncode == 1 and not target.exists(), res.stderr
    assert res.stderr.count("is the same run as") == 3
    # An existing estimate (the tracked one by default) stays unless --replace.
    replace, edit = another_run(base_crate, 1)
    other = craft(base_crate, tmp_path / "other.crate.zip", replace=replace, edit_metadata=edit)
    target.write_text("{}")
    res = estimate_cli(str(base_crate), str(other), "--output", str(target))
    assert res.returncode == 2 and "pass --replace" in res.stderr and target.read_text() == "{}"
    res = estimate_cli(str(base_crate), str(other), "--output", str(target), "--replace")
    assert res.returncode == 0, res.stderr
    assert len({r["run"] for r in json.loads(target.read_text())["runs"]}) == 2
