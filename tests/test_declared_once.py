"""A list is declared once and derived everywhere else: a second copy of
the native programs' names (native/programs.mk), the runners' names
(iolab.capabilities) or the cost-probe modes' names (their manifests) in
the code, the Makefile or the config's schema, or a caption off the one
rule of where captions live (iolab.paths.caption), is found here, before
it drifts."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import yaml
from conftest import REPO

from iolab import capabilities, live, native, paths, presets, runners, schema

PROGRAMS = set(native.program_sources())


def copies_in_python(source: str, names: set[str]) -> list[int]:
    """Lines of literal tuples, lists, sets or dicts that hold two or more
    of ``names`` as strings: a second declaration of the list."""
    found = []
    for node in ast.walk(ast.parse(source)):
        items: list[ast.expr | None] = []
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            items = list(node.elts)
        elif isinstance(node, ast.Dict):
            items = [*node.keys, *node.values]
        held = {i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str)} & names
        if len(held) >= 2:
            found.append(node.lineno)
    return found


def copies_in_yaml(text: str, names: set[str]) -> list[list[Any]]:
    """YAML lists (an enum, say) that hold two or more of ``names``."""
    found = []
    stack: list[Any] = [yaml.safe_load(text)]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            stack += node.values()
        elif isinstance(node, list):
            if len({i for i in node if isinstance(i, str)} & names) >= 2:
                found.append(node)
            stack += node
    return found


def copies_in_package(names: set[str], *declared: tuple[str, str]) -> list[str]:
    """Every literal list of two or more of ``names`` in iolab/, but those
    ``declared`` (a module's path and the name it binds)."""
    found = []
    for path in sorted((REPO / "iolab").rglob("*.py")):
        where, source = str(path.relative_to(REPO)), path.read_text()
        skip = {n for module, name in declared if module == where for n in declaration_lines(source, name)}
        found += [f"{where}:{n}" for n in copies_in_python(source, names) if n not in skip]
    return found


def declaration_lines(source: str, name: str) -> set[int]:
    """Lines of the literals bound to ``name`` at a module's top level."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                return {n.lineno for n in ast.walk(node.value) if isinstance(n, ast.expr)}
    raise AssertionError(f"{name} is bound nowhere at the top level")


def copies_in_make(text: str, names: set[str]) -> list[str]:
    """Make lines naming two or more programs."""
    return [ln for ln in text.splitlines() if len({w for w in ln.replace("/", " ").split() if w in names}) >= 2]


def test_the_checks_find_a_second_copy() -> None:
    # Negative controls: each check fails on a list written out again.
    assert copies_in_python('MEASURING = ("echo-epoll", "loadgen", "mpirun")', PROGRAMS) == [1]
    assert copies_in_python('SERVERS = {"epoll": "echo-epoll", "uring": "echo-uring"}', PROGRAMS) == [1]
    assert copies_in_make("PROGRAMS := $(OUT)/cost-probe $(OUT)/loadgen", PROGRAMS)
    assert copies_in_python('run("loadgen")', PROGRAMS) == []


def test_the_native_programs_are_named_once() -> None:
    found = []
    for path in sorted((REPO / "iolab").rglob("*.py")):
        found += [f"{path.relative_to(REPO)}:{n}" for n in copies_in_python(path.read_text(), PROGRAMS)]
    makefile = (REPO / "native" / "Makefile").read_text()
    found += [f"native/Makefile: {ln}" for ln in copies_in_make(makefile, PROGRAMS)]
    assert not found, "program names listed again (derive them from native/programs.mk): " + ", ".join(found)


def test_every_program_is_built_one_way_and_the_derived_lists_follow() -> None:
    variables = native._variables()
    by_tool = [set(variables[f"{tool}_PROGRAM_NAMES"]) for tool in ("C", "GO", "MPI")]
    assert set().union(*by_tool) == PROGRAMS and sum(map(len, by_tool)) == len(PROGRAMS)
    assert set(native.MPI_PROGRAMS) == by_tool[2]
    assert set(presets.SERVER_PROGRAMS.values()) == {p for p in PROGRAMS if p.startswith("echo-")}
    assert PROGRAMS <= set(live.MEASURING)


RUNNERS = set(capabilities.RUNNER_NAMES)
RUNNERS_DECLARED = ("iolab/capabilities.py", "RUNNERS")
# Not a list of runners: `python -m iolab.deps check GROUP`'s groups of
# tools, some of which share a runner's name (the ssh client, netns's ip).
NOT_RUNNERS = ("iolab/deps.py", "GROUPS")


def test_the_runner_checks_find_a_second_copy() -> None:
    # Negative controls: the lists this replaced, written out again.
    assert copies_in_python('runner: Literal["local", "netns", "ssh", "slurm", "vm"]', RUNNERS) == [1]
    assert copies_in_python('_CLASSES = {"local": LocalRunner, "ssh": SshRunner}', RUNNERS) == [1]
    assert copies_in_yaml("runner: {type: string, enum: [local, netns, ssh, slurm, vm]}", RUNNERS)
    source = (REPO / RUNNERS_DECLARED[0]).read_text()
    assert copies_in_python(source, RUNNERS) and not set(copies_in_python(source, RUNNERS)) - declaration_lines(
        source, RUNNERS_DECLARED[1]
    )


def test_the_runners_are_named_once() -> None:
    found = copies_in_package(RUNNERS, RUNNERS_DECLARED, NOT_RUNNERS)
    found += [f"config/schema.yaml: {c}" for c in copies_in_yaml((REPO / "config/schema.yaml").read_text(), RUNNERS)]
    assert not found, "runner names listed again (derive them from iolab.capabilities): " + ", ".join(found)


def test_the_runner_lists_derive_from_the_declaration() -> None:
    assert set(runners._CLASSES) == set(capabilities.RUNNER_CAPABILITIES)
    assert all(cls.capabilities == capabilities.RUNNER_CAPABILITIES[name] for name, cls in runners._CLASSES.items())
    assert set(schema.subschema("nodes", "[]", "runner")["enum"]) == RUNNERS


def probe_mode_names() -> set[str]:
    """The cost-probe modes' experiments and subcommands, as their manifests
    declare them (the subcommand's own declaration is its PROBE_MODE)."""
    from iolab.registry import REGISTRY

    return {n for name, e in REGISTRY.items() if e.probe_mode for n in (name, e.probe_mode)}


def test_the_probe_mode_checks_find_a_second_copy() -> None:
    names = probe_mode_names()
    # Negative controls: the lists this replaced, written out again.
    assert copies_in_python('ROOM = Room(("syscall", "sendrecv", "uring_batch", "nop", "epoll_wait"), t)', names) == [1]
    assert copies_in_python('missing = [e for e in ("syscall", "sendrecv", "uring_batch") if e]', names) == [1]


def test_the_probe_modes_are_named_once() -> None:
    found = copies_in_package(probe_mode_names())
    assert not found, "cost-probe modes listed again (derive them from iolab.registry): " + ", ".join(found)


def test_the_cost_probe_room_reads_every_mode_without_a_room_of_its_own() -> None:
    from iolab.rooms import ROOMS
    from iolab.rooms.cost_probes.tidy import ROOM

    modes = {name for name in probe_mode_names() if name in ROOMS}
    assert set(ROOM.experiments) == {m for m in modes if ROOMS[m] is ROOM} and "send_zc" not in ROOM.experiments
    assert {"syscall", "sendrecv", "uring_batch", "nop", "epoll_wait"} <= set(ROOM.experiments)


def misplaced_captions(files: list[Path]) -> list[str]:
    """Caption files not where iolab.paths.caption's rule puts them: a
    second copy, or one the rule would never read."""
    return [str(p.relative_to(REPO)) for p in files if p != paths.caption(p.stem)]


def caption_files() -> list[Path]:
    return sorted([*(REPO / "report" / "captions").glob("*.rst"), *(REPO / "iolab" / "rooms").glob("*/*.rst")])


def test_the_caption_check_finds_a_second_copy() -> None:
    # Negative controls: a room's caption kept in report/captions/ again, and
    # a notebook's own in a room.
    assert misplaced_captions([REPO / "report" / "captions" / "syscall_cost.rst"]) == [
        "report/captions/syscall_cost.rst"
    ]
    assert misplaced_captions([REPO / "iolab" / "rooms" / "echo" / "claims_forest.rst"])
    assert paths.caption("syscall_cost") == REPO / "iolab" / "rooms" / "cost_probes" / "syscall_cost.rst"
    assert paths.caption("claims_forest") == REPO / "report" / "captions" / "claims_forest.rst"


def test_every_caption_is_where_its_figure_declares_it() -> None:
    files = caption_files()
    assert files and not misplaced_captions(files), "captions off their rule (iolab.paths.caption): " + ", ".join(
        misplaced_captions(files)
    )
