"""Imports only go down the data flow: runners <- experiments <- analysis <- report.

Checked on the whole import closure (iolab.paths.module_closure), so an
indirect import through a third module counts too.
"""

from __future__ import annotations

import pytest

from iolab.paths import module_closure

RUN_CODE = {"iolab/measure.py", "iolab/echo.py", "iolab/latency.py", "iolab/mpi.py", "iolab/trace.py",
            "iolab/probes.py"}


def under(paths: list[str], folder: str) -> list[str]:
    return [p for p in paths if p.startswith(f"iolab/{folder}/")]


@pytest.mark.parametrize("layer", ["iolab.analysis", "iolab.report"])
def test_analysis_and_report_never_reach_the_runners_or_the_run_code(layer: str) -> None:
    closure = module_closure([layer])
    assert under(closure, "runners") == []
    assert sorted(RUN_CODE & set(closure)) == []


def test_analysis_never_imports_the_report() -> None:
    assert under(module_closure(["iolab.analysis"]), "report") == []


def test_runners_import_nothing_above_them() -> None:
    closure = module_closure(["iolab.runners"])
    assert under(closure, "analysis") == [] and under(closure, "report") == []
    assert sorted(RUN_CODE & set(closure)) == []


def test_the_closure_follows_relative_and_indirect_imports() -> None:
    closure = module_closure(["iolab.analysis"])
    # analysis/models.py imports iolab.tables (relative, two levels), which
    # imports iolab.formats: both are in.
    assert {"iolab/tables.py", "iolab/formats.py", "iolab/analysis/stats.py"} <= set(closure)
