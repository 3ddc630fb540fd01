"""pyproject.toml, requirements.lock and environment.yml pin the same
versions; the workflow runs only in that environment, and the catalog and
environment.yml say what running it takes."""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

import yaml
from conftest import REPO, snakemake, tool_env
from test_config import PREAMBLE

from iolab import deps, environment


def canon(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def lock_pins() -> dict[str, str]:
    text = (REPO / "requirements.lock").read_text()
    return {canon(n): v for n, v in re.findall(r"^([A-Za-z0-9_.-]+)==([^\s\\;]+)", text, re.M)}


def pyproject_pins() -> dict[str, str]:
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    return {canon(d.split("==")[0]): d.split("==")[1] for d in deps}


def conda_pins() -> dict[str, str]:
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    pins: dict[str, str] = {}
    for dep in env["dependencies"]:
        if isinstance(dep, dict):
            for pip_dep in dep.get("pip", []):
                name, version = pip_dep.split("==")
                pins[canon(name)] = version
        elif "=" in dep:
            name, version = dep.split("=", 1)
            pins[canon(name)] = version.lstrip("=")
    return pins


def test_every_direct_dependency_is_pinned_in_the_lock() -> None:
    lock = lock_pins()
    for name, version in pyproject_pins().items():
        assert lock.get(name) == version, f"{name}: pyproject {version}, lock {lock.get(name)}"


def test_environment_yml_agrees_with_the_lock() -> None:
    lock, conda, direct = lock_pins(), conda_pins(), pyproject_pins()
    for name in direct:
        assert name in conda, f"{name} is missing from environment.yml"
    for name, version in conda.items():
        if name == "python":
            continue
        assert lock.get(name) == version, f"{name}: environment.yml {version}, lock {lock.get(name)}"


def test_lock_has_hashes_for_every_package() -> None:
    blocks = re.split(r"\n(?=[A-Za-z0-9_.-]+==)", (REPO / "requirements.lock").read_text())
    pkgs = [b for b in blocks if re.match(r"^[A-Za-z0-9_.-]+==", b)]
    assert pkgs and all("--hash=sha256:" in b for b in pkgs)


def test_the_lock_leaves_out_the_iri_grammar_jsonschema_compiles_at_import() -> None:
    # About 1 s of every Snakemake, papermill and jupytext start
    # (docs/decisions/0002-the-python-lock-leaves-out-the-iri-grammar.md);
    # a lock regenerated without --no-emit-package brings it back.
    lock = lock_pins()
    assert "rfc3987-syntax" not in lock and "lark" not in lock, (
        "regenerate the lock with --no-emit-package rfc3987-syntax --no-emit-package lark"
    )
    assert "--no-emit-package rfc3987-syntax --no-emit-package lark" in (REPO / "requirements.lock").read_text()


def test_conda_provides_the_native_dependencies() -> None:
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    names = {d.split("=")[0] for d in env["dependencies"] if isinstance(d, str)}
    assert {"liburing", "openmpi", "c-compiler", "make", "pkg-config"} <= names
    assert "conda-forge" in env["channels"]


# --- what the workflow needs, and what says so --------------------------------


def test_the_workflows_guard_reads_the_pins_pyproject_holds() -> None:
    # iolab.environment reads pyproject.toml without tomllib (it runs on any
    # Snakemake's interpreter): the same pins as tomllib's.
    assert environment.pinned() == pyproject_pins()
    assert environment.problem() is None, environment.problem()


def fake_distribution(where: Path, name: str, version: str) -> None:
    """A distribution's metadata at another version, first on the path."""
    meta = where / f"{name}-{version}.dist-info"
    meta.mkdir(parents=True)
    (meta / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


def test_outside_its_environment_the_workflow_stops_before_planning_with_one_line(
    workflow: Path, tmp_path: Path
) -> None:
    # A Snakemake whose interpreter has another pydantic (or none): one
    # line naming the command that makes the environment, nothing planned.
    fake_distribution(tmp_path / "elsewhere", "pydantic", "1.10.0")
    env = {**tool_env(), "PYTHONPATH": str(tmp_path / "elsewhere")}
    res = snakemake(workflow, "-n", "--cores", "all", env=env)
    assert res.returncode == 1
    said = [ln for ln in (res.stdout + res.stderr).splitlines() if ln.strip() and not ln.startswith(PREAMBLE)]
    assert said == [
        f"iolab: this Snakemake runs outside iolab's environment ({sys.executable}: pydantic 1.10.0, not "
        f"{pyproject_pins()['pydantic']}); make it with ./repro setup, then run source .venv/bin/activate "
        "and this command again"
    ], said
    assert not (workflow / ".snakemake" / "locks").exists() or not list((workflow / ".snakemake" / "locks").iterdir())
    # The control: in the environment, the same dry run plans the pipeline.
    res = snakemake(workflow, "-n", "--cores", "all")
    assert res.returncode == 0 and "measure_syscall" in res.stdout, res.stderr[-2000:]


def test_the_catalog_says_what_running_the_workflow_takes() -> None:
    catalog = yaml.safe_load((REPO / ".snakemake-workflow-catalog.yml").read_text())["usage"]
    flags = catalog["mandatory-flags"]
    # The flags a run passes; the rest is the workflow profile's
    # (profiles/default).
    assert flags["flags"] == "--cores all"
    # Where it runs: the environment the guard asks for, made as it says.
    assert environment.SETUP in flags["desc"] and environment.ACTIVATE in flags["desc"]
    # The workflow imports iolab while it is read (the Snakefile's guard
    # first), so Snakemake itself runs in the environment: per-rule conda
    # environments cannot provide it, and the catalog must not offer them.
    assert "stop_unless_ready()" in (REPO / "Snakefile").read_text()
    assert catalog["software-stack-deployment"]["conda"] is False
    # The HTML report it offers: rules that put figures in it.
    assert catalog["report"] is True and "report(" in (REPO / "rules" / "notebooks.smk").read_text()


def test_environment_yml_provides_what_a_run_checks_for() -> None:
    # What the measurements of a run check before they start (iolab.deps):
    # each comes from conda-forge in environment.yml, or its header says
    # it comes from the system.
    text = (REPO / "environment.yml").read_text()
    env = yaml.safe_load(text)
    names = {d.split("=")[0] for d in env["dependencies"] if isinstance(d, str)}
    system = next(ln for ln in text.splitlines() if ln.startswith("# From the system, not conda-forge:"))
    for group in ("build", "mpi", "netns", "trace", "ib"):
        for dep in deps.GROUPS[group]:
            provided = dep.conda in names or dep.apt in system
            assert provided, f"environment.yml lacks {dep.what} ({dep.conda}) and does not say it is the system's"
