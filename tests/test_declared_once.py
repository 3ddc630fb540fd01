"""A list is declared once and derived everywhere else: a second copy of
the native programs' names (native/programs.mk) in the code or the
Makefile is found here, before it drifts."""

from __future__ import annotations

import ast

from conftest import REPO

from iolab import live, native, presets

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
