"""Comparing independent runs: verdict flips and interval calibration."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from iolab.archive import reruns


def numbers(outcomes: dict[str, str], values: dict[str, tuple[float, list[float]]]) -> dict:
    findings = [{"claim": k.split(":")[0], "part": k.split(": ")[1], "outcome": o} for k, o in outcomes.items()]
    out = {"findings": {"value": findings, "text": ""}}
    for key, (value, pi) in values.items():
        out[key] = {"value": value, "pi95": pi, "ci95": [value * 0.99, value * 1.01]}
    return out


def test_a_flip_needs_both_decided_outcomes() -> None:
    a = numbers({"U1: c=50": "reproduced", "U3: c=1": "reproduced", "U4: x": "undecided at this precision"}, {})
    b = numbers({"U1: c=50": "not reproduced", "U3: c=1": "undecided at this precision", "U4: x": "not reproduced"}, {})
    assert reruns.flips([a, b]) == ["U1: c=50"]


def test_calibration_counts_values_inside_the_first_runs_interval() -> None:
    a = numbers({}, {"s_ns": (100.0, [90.0, 110.0]), "w_ns": (700.0, [650.0, 750.0]), "open": (1.0, [None, 2.0])})
    b = numbers({}, {"s_ns": (105.0, [0, 1]), "w_ns": (800.0, [0, 1]), "open": (1.5, [0, 1])})
    c = reruns.calibration(a, b)
    # "open" has an unbounded end: not checked.
    assert (c.checked, c.inside) == (2, 1) and c.misses == ("w_ns: 800 outside [650, 750]",)


def test_command_line_report(tmp_path: Path) -> None:
    paths = []
    for i, outcome in enumerate(("reproduced", "not reproduced")):
        p = tmp_path / f"n{i}.json"
        p.write_text(json.dumps(numbers({"U3: c=1": outcome}, {"s_ns": (100.0 + i, [95.0, 105.0])})))
        paths.append(str(p))
    res = subprocess.run([sys.executable, "-m", "iolab.archive.reruns", *paths], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert "| U3: c=1 **(flip)** | reproduced | not reproduced |" in res.stdout
    assert "- run 2: 1 of 1 values inside (100%)" in res.stdout
    one = subprocess.run([sys.executable, "-m", "iolab.archive.reruns", paths[0]], capture_output=True, text=True)
    assert one.returncode == 2 and one.stderr.strip() == "iolab: give the numbers files of at least two runs"


def test_claim_parts_are_calibrated_too() -> None:
    def with_finding(value: float, pred: list[float]) -> dict:
        return {
            "findings": {
                "value": [
                    {
                        "claim": "U3",
                        "part": "c=1",
                        "outcome": "not reproduced",
                        "estimate": {
                            "value": value,
                            "low": value,
                            "high": value,
                            "pred_low": pred[0],
                            "pred_high": pred[1],
                        },
                    }
                ]
            }
        }

    c = reruns.calibration(with_finding(1.7, [1.5, 1.9]), with_finding(2.0, [0, 1]))
    assert (c.checked, c.inside) == (1, 0) and c.misses == ("U3: c=1: 2 outside [1.5, 1.9]",)
