"""The package is a Y over a shared base (DESIGN.md): the run side (measure ->
experiments -> runners) and the read side (notebooks -> report -> analysis
-> tables) both import the base (config, settings, formats, readers,
provenance, ...) and never each other.

Checked on the whole import closure (iolab.paths.module_closure), so an
indirect import through a third module counts too.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from iolab.paths import module_closure, room_packages

# Run code: the measurement entry point and every experiment module, a file
# or a package (iolab/experiments/__init__.py only dispatches to them; the
# registry is iolab/registry.py).
EXPERIMENTS_DIR = Path(__file__).resolve().parents[1] / "iolab" / "experiments"
EXPERIMENT_MODULES = sorted(
    [p.stem for p in EXPERIMENTS_DIR.glob("*.py") if p.name != "__init__.py"]
    + [p.parent.name for p in EXPERIMENTS_DIR.glob("*/__init__.py")]
)
RUN_CODE = {"iolab/measure.py"} | {
    p.relative_to(EXPERIMENTS_DIR.parents[1]).as_posix()
    for p in EXPERIMENTS_DIR.rglob("*.py")
    if p != EXPERIMENTS_DIR / "__init__.py"
}


def under(paths: list[str], folder: str) -> list[str]:
    return [p for p in paths if p.startswith(f"iolab/{folder}/")]


READ_SIDE = (
    "iolab/tables.py",
    "iolab/rooms/",
    "iolab/estimation/",
    "iolab/claims/",
    "iolab/planning/",
    "iolab/procedure/",
    "iolab/report/",
    "iolab/archive/",
)
STATISTICS = ["iolab.estimation", "iolab.claims", "iolab.planning", "iolab.procedure"]


@pytest.mark.parametrize(
    "root", ["iolab.measure", "iolab.runners", *[f"iolab.experiments.{m}" for m in EXPERIMENT_MODULES]]
)
def test_the_run_side_never_reaches_the_read_side(root: str) -> None:
    closure = module_closure([root])
    assert [p for p in closure if p.startswith(READ_SIDE)] == []


@pytest.mark.parametrize("layer", ["iolab.tables", *STATISTICS, "iolab.report", "iolab.archive", *room_packages()])
def test_the_read_side_never_reaches_the_runners_or_the_run_code(layer: str) -> None:
    closure = module_closure([layer])
    assert under(closure, "runners") == []
    assert sorted(RUN_CODE & set(closure)) == []


def test_analysis_never_imports_the_report() -> None:
    assert under(module_closure(STATISTICS), "report") == []


def test_the_report_never_imports_the_archive() -> None:
    # Archiving sits above the report (it rebuilds the paper from a crate).
    assert under(module_closure(["iolab.report", *STATISTICS, "iolab.tables"]), "archive") == []


def test_the_run_code_reaches_the_runners_through_their_package_only() -> None:
    # One door: iolab.runners (its __init__) re-exports what experiments use.
    import ast

    root = Path(__file__).resolve().parents[1]
    for path in sorted(RUN_CODE):
        tree = ast.parse((root / path).read_text())
        deep = [
            n.module
            for n in ast.walk(tree)
            if isinstance(n, ast.ImportFrom)
            and n.module
            and (".runners." in f".{n.module}." and not n.module.endswith("runners"))
        ]
        deep += [
            f"{n.module}.{a.name}"
            for n in ast.walk(tree)
            if isinstance(n, ast.ImportFrom) and (n.module or "").endswith("runners")
            for a in n.names
            if a.name in {"base", "local", "ssh", "vm", "qemu", "slurm"}
        ]
        assert deep == [], f"{path} imports a runner module directly: {deep}"


def test_runners_import_nothing_above_them() -> None:
    closure = module_closure(["iolab.runners"])
    assert [p for p in closure if p.startswith(READ_SIDE)] == []
    assert sorted(RUN_CODE & set(closure)) == []


def test_the_closure_follows_relative_and_indirect_imports() -> None:
    closure = module_closure(["iolab.claims"])
    # the claims import rooms/cost_probes/summaries.py, which imports iolab.tables (relative,
    # three levels), which imports iolab.formats: all are in.
    assert {"iolab/tables.py", "iolab/formats.py", "iolab/estimation/intervals.py"} <= set(closure)


def test_every_experiment_runs_from_its_own_module() -> None:
    # RUNS holds each experiment's run_repetition by reference, from the
    # module its registry entry names first in its code; every run module
    # is used.
    from iolab.experiments import RUNS
    from iolab.registry import REGISTRY

    assert list(RUNS) == list(REGISTRY)
    assert {f.__module__.removeprefix("iolab.experiments.") for f in RUNS.values()} == set(EXPERIMENT_MODULES)
    for name, run in RUNS.items():
        assert run.__name__ == "run_repetition" and run.__module__ == REGISTRY[name].run_module


def test_runs_that_miss_or_misplace_an_experiment_fail_in_one_line() -> None:
    # Negative control for the import-time check.
    from iolab.experiments import RUNS, RunsError, check_runs

    missing = {k: v for k, v in RUNS.items() if k != "send_zc"}
    with pytest.raises(RunsError, match=r"^send_zc has no run_repetition in iolab.experiments.RUNS$"):
        check_runs(missing)
    with pytest.raises(RunsError, match=r"echo: RUNS holds iolab.experiments.cost_probes.run_repetition"):
        check_runs({**RUNS, "echo": RUNS["syscall"]})
    with pytest.raises(RunsError, match="RUNS names zcrx"):
        check_runs({**RUNS, "zcrx": RUNS["syscall"]})


def test_every_experiment_has_exactly_one_room() -> None:
    from iolab.registry import REGISTRY
    from iolab.rooms import ROOMS

    assert list(ROOMS) == list(REGISTRY)
    for name, room in ROOMS.items():
        assert name in room.experiments and callable(room.tidy)
        assert room.tidy.__module__ in {f"{r}.tidy" for r in room_packages()}


def test_rooms_that_miss_or_share_an_experiment_fail_in_one_line() -> None:
    # Negative control for the import-time check.
    from iolab.registry import REGISTRY
    from iolab.rooms import ROOMS, RoomError, check_rooms
    from iolab.rooms.room import Room

    rooms = [(name, room) for name, room in ROOMS.items()]
    without = [(n, r) for n, r in rooms if n != "send_zc"]
    with pytest.raises(RoomError, match=r"^send_zc has no room"):
        check_rooms(without, REGISTRY)
    with pytest.raises(RoomError, match="echo is read by rooms echo, copy"):
        check_rooms([*rooms, ("copy", Room(("echo",), ROOMS["echo"].tidy))], REGISTRY)
    with pytest.raises(RoomError, match="room extra reads zcrx"):
        check_rooms([*rooms, ("extra", Room(("zcrx",), ROOMS["echo"].tidy))], REGISTRY)


@pytest.mark.parametrize("room", room_packages())
def test_within_a_room_the_read_layers_hold(room: str) -> None:
    # tidy -> (tables); stats -> analysis; present -> report: a room's tidy
    # step reads no statistics or presentation, its statistics no report.
    folder = Path(__file__).resolve().parents[1] / room.replace(".", "/")
    tidy = module_closure([f"{room}.tidy"])
    assert [p for p in tidy if p.startswith(("iolab/estimation/", "iolab/claims/", "iolab/report/"))] == []
    assert [p for p in tidy if p.endswith(("/stats.py", "/present.py"))] == []
    if (folder / "stats.py").exists():
        # A room's statistics reach no presentation (present*.py) of any room.
        stats = module_closure([f"{room}.stats"])
        assert under(stats, "report") == []
        assert [p for p in stats if Path(p).name.startswith("present")] == []


def test_the_registries_are_base_and_light() -> None:
    # The workflow imports the registries at every start, and both sides
    # read them: they import neither side, nor pandas or the runners.
    closure = set(module_closure(["iolab.registry"]))
    assert sorted(RUN_CODE & closure) == []
    assert [p for p in closure if p.startswith(READ_SIDE) or p.startswith("iolab/runners/")] == []
    assert "iolab/experiments/__init__.py" not in closure
