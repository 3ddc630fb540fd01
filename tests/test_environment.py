"""pyproject.toml, requirements.lock and environment.yml pin the same versions."""

from __future__ import annotations

import re
import tomllib

import yaml
from conftest import REPO


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
