"""The package is a Y over a shared base (DESIGN.md): the run side (measure ->
experiments -> runners) and the read side both import the base (config,
settings, formats, readers, provenance, ...) and never each other.

The read side's layers are declared once, in iolab.paths (READ_LAYERS,
LAYER_PATTERNS): every module's layer is computed from its path, and no
import runs back up them. Checked on each module's own imports (an
indirect import is a chain of direct ones) and on whole import closures
(iolab.paths.module_closure) for the two sides.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from iolab.paths import (
    READ_LAYERS,
    REPO,
    imports_of,
    module_closure,
    read_layer,
    read_side_modules,
    room_packages,
)

# Run code: the measurement entry point and every experiment module, a file
# or a package (iolab/experiments/__init__.py only dispatches to them; the
# registry is iolab/registry.py).
EXPERIMENTS_DIR = REPO / "iolab" / "experiments"
EXPERIMENT_MODULES = sorted(
    [p.stem for p in EXPERIMENTS_DIR.glob("*.py") if p.name != "__init__.py"]
    + [p.parent.name for p in EXPERIMENTS_DIR.glob("*/__init__.py")]
)
RUN_CODE = {"iolab/measure.py"} | {
    p.relative_to(REPO).as_posix() for p in EXPERIMENTS_DIR.rglob("*.py") if p != EXPERIMENTS_DIR / "__init__.py"
}
# The run side's packages: everything else under iolab/ that is a folder is
# the read side's, and every module in it has a layer.
RUN_PACKAGES = {"experiments", "runners"}


def under(paths: list[str], folder: str) -> list[str]:
    return [p for p in paths if p.startswith(f"iolab/{folder}/")]


def read_side(paths: list[str]) -> list[str]:
    return [p for p in paths if read_layer(p) is not None]


Graph = dict[str, list[str]]


def import_graph() -> Graph:
    """Every iolab module's own imports, as repository-relative paths."""
    return {
        p.relative_to(REPO).as_posix(): sorted({q.relative_to(REPO).as_posix() for q in imports_of(p)})
        for p in sorted((REPO / "iolab").rglob("*.py"))
    }


def upward_imports(graph: Graph) -> list[str]:
    """Each import that runs back up the read side's layers, or from the
    base or the run side into the read side, as "importer (layer) ->
    imported (layer)"."""
    rank = {layer: i for i, layer in enumerate(READ_LAYERS)}
    found = []
    for importer, imported in graph.items():
        low = read_layer(importer)
        for target in imported:
            high = read_layer(target)
            if high is not None and (low is None or rank[high] > rank[low]):
                found.append(f"{importer} ({low or 'base'}) -> {target} ({high})")
    return found


def test_no_import_runs_back_up_the_layers() -> None:
    assert upward_imports(import_graph()) == []


def test_the_check_finds_an_import_that_runs_back_up() -> None:
    # Negative control: the tables reading a verdict, a room's statistics
    # reading its presentation, and the base reading a claim are each caught.
    graph = import_graph()
    graph["iolab/tables.py"].append("iolab/claims/verdicts.py")
    graph["iolab/rooms/echo/modern_stats.py"].append("iolab/rooms/echo/present.py")
    graph["iolab/formats.py"].append("iolab/claims/__init__.py")
    assert upward_imports(graph) == [
        "iolab/formats.py (base) -> iolab/claims/__init__.py (claims)",
        "iolab/rooms/echo/modern_stats.py (rooms) -> iolab/rooms/echo/present.py (report)",
        "iolab/tables.py (tables) -> iolab/claims/verdicts.py (claims)",
    ]


def test_a_real_upward_import_is_read_from_the_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Negative control on parsing: a module of a copied tree that imports
    # the report from a claim (inside a function) shows up in the graph.
    import shutil

    import iolab.paths as paths

    shutil.copytree(REPO / "iolab", tmp_path / "iolab", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "iolab" / "claims" / "upward.py").write_text("def f():\n    from ..report import labels\n")
    monkeypatch.setattr(paths, "REPO", tmp_path)
    module = tmp_path / "iolab" / "claims" / "upward.py"
    graph = {"iolab/claims/upward.py": sorted(q.relative_to(tmp_path).as_posix() for q in paths.imports_of(module))}
    assert upward_imports(graph) == [
        "iolab/claims/upward.py (claims) -> iolab/report/__init__.py (report)",
        "iolab/claims/upward.py (claims) -> iolab/report/labels.py (report)",
    ]


def test_every_read_side_module_has_a_layer() -> None:
    # A new folder under iolab/ is either the run side's or gets its layer
    # in iolab.paths; so does every module a room adds.
    for path in sorted((REPO / "iolab").glob("*/**/*.py")):
        rel = path.relative_to(REPO).as_posix()
        if rel.split("/")[1] not in RUN_PACKAGES:
            assert read_layer(rel) is not None, f"{rel} has no layer in iolab.paths.LAYER_PATTERNS"


def test_a_layer_is_read_from_the_path() -> None:
    # A room is cut by file name; its shared helpers sit with the tidy steps.
    assert read_layer("iolab/rooms/echo/tidy.py") == "tidy"
    assert read_layer("iolab/rooms/context.py") == "tidy"
    assert read_layer("iolab/rooms/echo/summaries.py") == "rooms"
    assert read_layer("iolab/rooms/echo/present_modern.py") == "report"
    assert read_layer("iolab/claims/verdicts.py") == "claims"
    assert read_layer("iolab/report/plots/cost.py") == "report"
    assert read_layer("iolab/formats.py") is None and read_layer("iolab/runners/base.py") is None
    assert "iolab.archive.pooling" not in read_side_modules(below="archive")
    assert "iolab.claims" in read_side_modules(below="archive")


@pytest.mark.parametrize(
    "root", ["iolab.measure", "iolab.runners", *[f"iolab.experiments.{m}" for m in EXPERIMENT_MODULES]]
)
def test_the_run_side_never_reaches_the_read_side(root: str) -> None:
    assert read_side(module_closure([root])) == []


def test_the_read_side_never_reaches_the_runners_or_the_run_code() -> None:
    closure = module_closure([], read_side_modules())
    assert under(closure, "runners") == []
    assert sorted(RUN_CODE & set(closure)) == []


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


def test_the_registries_are_base_and_light() -> None:
    # The workflow imports the registries at every start, and both sides
    # read them: they import neither side, nor pandas or the runners.
    closure = set(module_closure(["iolab.registry"]))
    assert sorted(RUN_CODE & closure) == []
    assert [p for p in closure if read_layer(p) is not None or p.startswith("iolab/runners/")] == []
    assert "iolab/experiments/__init__.py" not in closure
