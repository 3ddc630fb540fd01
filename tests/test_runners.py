"""One protocol for every runner (iolab/runners/base.py): each implements all
of it, declares its capabilities, and callers never ask for a class."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import REPO, snakemake, tool_env

from iolab.inventory import NodeEntry
from iolab.registry import REGISTRY, can_host
from iolab.runners import (
    Capability,
    LocalRunner,
    RunError,
    Runner,
    SlurmRunner,
    SshRunner,
    VmRunner,
    capabilities_of,
    runner_for,
)

RUNNER_CLASSES = ("LocalRunner", "SlurmRunner", "SshRunner", "VmRunner")
RUNNER_NAMES = {"local", "slurm", "ssh", "vm", "netns"}


def test_every_runner_implements_the_whole_protocol() -> None:
    runners = [
        LocalRunner(),
        SshRunner(NodeEntry.of({"name": "far", "runner": "ssh", "host": "far.example.org"})),
        VmRunner(NodeEntry.of({"name": "guest", "runner": "vm", "vm": {"accel": "tcg"}})),
    ]
    members = [m for m in dir(Runner) if not m.startswith("_")]
    for runner in runners:
        assert isinstance(runner, Runner), type(runner).__name__
        missing = [m for m in members if not hasattr(runner, m)]
        assert missing == [], (type(runner).__name__, missing)
        assert isinstance(runner.capabilities, frozenset)


def test_a_vm_node_says_in_one_line_what_it_cannot_do(tmp_path: Path) -> None:
    vm = VmRunner(NodeEntry.of({"name": "guest", "runner": "vm", "vm": {"accel": "tcg"}}))
    for call in (
        lambda: vm.popen(["x"]),
        lambda: vm.read_file("/etc/hostname"),
        lambda: vm.write_file(str(tmp_path / "f"), "x"),
        lambda: vm.scratch("x"),
    ):
        with pytest.raises(RunError, match=r"^node guest: a vm node cannot "):
            call()
    assert vm.provenance()["accel"] == "tcg"


def test_experiments_go_where_the_runner_has_what_they_need() -> None:
    assert can_host(capabilities_of("local"), "trace") and can_host(capabilities_of("slurm"), "trace")
    assert not can_host(capabilities_of("ssh"), "trace") and can_host(capabilities_of("ssh"), "mpi")
    assert [e for e in ("syscall", "echo", "mpi", "trace") if can_host(capabilities_of("vm"), e)] == ["syscall"]
    assert Capability.PEER in capabilities_of("ssh") and Capability.PEER not in capabilities_of("local")
    assert Capability.CPUS_HERE in capabilities_of("local") and Capability.CPUS_HERE not in capabilities_of("slurm")
    slurm = runner_for(NodeEntry.of({"name": "cn1", "runner": "slurm"}))
    assert isinstance(slurm, SlurmRunner) and slurm.mpi_launcher == "srun"
    assert runner_for(NodeEntry.of({"name": "a", "runner": "local"})).mpi_launcher == "mpirun"


def test_what_an_experiment_needs_lives_in_the_registry_not_in_the_runners() -> None:
    # The runners package names capabilities only; it never names an experiment.
    for source in sorted((REPO / "iolab" / "runners").glob("*.py")):
        text = source.read_text()
        assert "EXPERIMENT_NEEDS" not in text and "def can_host" not in text, source.name
    assert REGISTRY["trace"].capabilities == frozenset({Capability.KERNEL_TRACING})
    assert REGISTRY["syscall"].capabilities == frozenset()


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


def _compares_a_runner_name(node: ast.AST) -> bool:
    """``x.runner == "ssh"``, ``runner in ("local", "ssh")`` and the like."""
    if not isinstance(node, ast.Compare):
        return False
    names = {c.value for c in ast.walk(node) if isinstance(c, ast.Constant) and isinstance(c.value, str)}
    mentions_runner = any(
        (isinstance(n, ast.Attribute) and n.attr == "runner")
        or (isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Constant) and n.slice.value == "runner")
        or (isinstance(n, ast.Name) and n.id == "runner")
        for n in ast.walk(node)
    )
    return mentions_runner and bool(names & RUNNER_NAMES)


def test_no_code_checks_a_runner_by_its_name() -> None:
    # What a runner can do is iolab/capabilities.py's table; which class a
    # name makes is the factory's (iolab/runners/__init__.py). Nothing else
    # compares a runner's name.
    offenders = [
        f"{path.relative_to(REPO)}:{node.lineno}"
        for path in sorted((REPO / "iolab").rglob("*.py"))
        if path != REPO / "iolab" / "runners" / "__init__.py"
        for node in ast.walk(ast.parse(path.read_text()))
        if _compares_a_runner_name(node)
    ]
    # The workflow's files are Snakemake, not Python: the same comparisons, by pattern.
    pattern = re.compile(r"""runner["']?\]?\)?\s*(==|!=|(not\s+)?in\b)""")
    offenders += [
        f"{path.relative_to(REPO)}:{i}"
        for path in [*sorted((REPO / "rules").glob("*.smk")), REPO / "Snakefile"]
        for i, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert offenders == []


def slurm_profile(wd: Path, env: dict[str, str]) -> list[str]:
    """``snakemake --profile profiles/slurm`` in ``wd``: what it says
    besides Snakemake's own opening lines."""
    res = snakemake(wd, "--profile", "profiles/slurm", env=env, timeout=300)
    assert res.returncode == 1, res.stdout[-2000:]
    return [
        ln
        for ln in (res.stdout + res.stderr).splitlines()
        if ln.strip() and not ln.startswith(("Using profile", "Config file"))
    ]


def test_the_slurm_profile_without_slurm_says_so_in_one_line(workflow: Path, tmp_path: Path) -> None:
    """Where no SLURM answers, the slurm profile once failed after 43 s with
    an error about the total number of cores (the executor's); now the
    planning says what is missing and how to go on, before any job."""
    if shutil.which("sinfo") and subprocess.run(["sinfo"], capture_output=True, timeout=60).returncode == 0:
        pytest.skip("a SLURM cluster answers here")
    fix = "run it on a SLURM cluster's login node, or drop --profile profiles/slurm to run on this machine"
    said = slurm_profile(workflow, tool_env())
    want = "no SLURM cluster answers here" if shutil.which("sbatch") else "with sbatch, which is not installed here"
    assert len(said) == 1 and said[0].startswith("iolab: the slurm profile submits") and want in said[0], said
    assert said[0].endswith(fix) and "total number of cores" not in said[0]


def test_without_sbatch_the_slurm_profile_names_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from iolab.runners import cluster_problem

    monkeypatch.setenv("PATH", str(tmp_path))  # a PATH with nothing on it
    said = cluster_problem([NodeEntry.of({"name": "cn1", "runner": "slurm"})]) or ""
    assert said.startswith("the slurm profile submits every measurement to SLURM with sbatch, which is not installed")
