"""One protocol for every runner (iolab/runners/base.py): each implements all
of it, declares its capabilities, and callers never ask for a class."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from conftest import REPO

from iolab.experiments import REGISTRY, can_host
from iolab.runners import (Capability, LocalRunner, RunError, Runner, SshRunner, VmRunner, capabilities_of,
                           runner_for)

RUNNER_CLASSES = ("LocalRunner", "SshRunner", "VmRunner")


def test_every_runner_implements_the_whole_protocol() -> None:
    runners = [LocalRunner(), SshRunner({"name": "far", "runner": "ssh", "host": "far.example.org"}),
               VmRunner({"name": "guest", "runner": "vm", "vm": {"accel": "tcg"}})]
    members = [m for m in dir(Runner) if not m.startswith("_")]
    for runner in runners:
        assert isinstance(runner, Runner), type(runner).__name__
        missing = [m for m in members if not hasattr(runner, m)]
        assert missing == [], (type(runner).__name__, missing)
        assert isinstance(runner.capabilities, frozenset)


def test_a_vm_node_says_in_one_line_what_it_cannot_do(tmp_path: Path) -> None:
    vm = VmRunner({"name": "guest", "runner": "vm", "vm": {"accel": "tcg"}})
    for call in (lambda: vm.popen(["x"]), lambda: vm.read_file("/etc/hostname"),
                 lambda: vm.write_file(str(tmp_path / "f"), "x"), lambda: vm.scratch("x")):
        with pytest.raises(RunError, match=r"^node guest: a vm node cannot "):
            call()
    assert vm.provenance()["accel"] == "tcg"


def test_experiments_go_where_the_runner_has_what_they_need() -> None:
    assert can_host(capabilities_of("local"), "trace") and can_host(capabilities_of("slurm"), "trace")
    assert not can_host(capabilities_of("ssh"), "trace") and can_host(capabilities_of("ssh"), "mpi")
    assert [e for e in ("syscall", "echo", "mpi", "trace") if can_host(capabilities_of("vm"), e)] == ["syscall"]
    assert Capability.MPI_PEER in capabilities_of("ssh") and Capability.MPI_PEER not in capabilities_of("local")
    assert isinstance(runner_for({"name": "cn1", "runner": "slurm"}), LocalRunner)


def test_what_an_experiment_needs_lives_in_the_registry_not_in_the_runners() -> None:
    # The runners package names capabilities only; it never names an experiment.
    for source in sorted((REPO / "iolab" / "runners").glob("*.py")):
        text = source.read_text()
        assert "EXPERIMENT_NEEDS" not in text and "def can_host" not in text, source.name
    assert REGISTRY["trace"].needs == frozenset({Capability.KERNEL_TRACING})
    assert REGISTRY["syscall"].needs == frozenset()


def test_no_caller_branches_on_a_runner_class() -> None:
    offenders = []
    for path in sorted((REPO / "iolab").rglob("*.py")):
        if path.parent.name == "runners":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "isinstance":
                named = {n.id for n in ast.walk(node.args[1]) if isinstance(n, ast.Name)}
                if named & set(RUNNER_CLASSES):
                    offenders.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert offenders == []
