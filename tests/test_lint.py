"""The Python code passes the linter, the formatter's check and the type
checker configured in pyproject.toml, and each gate fails on code that
breaks it (the negative controls)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

BIN = Path(sys.executable).parent


def tool(name: str, *args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / name), *args], cwd=cwd, capture_output=True, text=True, timeout=600)


def test_ruff_finds_nothing() -> None:
    res = tool("ruff", "check", "--no-cache", ".")
    assert res.returncode == 0, res.stdout + res.stderr


def test_ruff_format_would_change_nothing() -> None:
    res = tool("ruff", "format", "--check", "--no-cache", ".")
    assert res.returncode == 0, res.stdout + res.stderr + "\nrun: ruff format ."


def test_mypy_finds_nothing() -> None:
    res = tool("mypy", "--no-incremental")
    assert res.returncode == 0, res.stdout + res.stderr


@pytest.fixture
def broken(tmp_path: Path) -> Path:
    """A module with an unused import, a line of 130 characters, a badly
    formatted call and a type error: each gate must fail on it."""
    (tmp_path / "pyproject.toml").write_text(
        (REPO / "pyproject.toml").read_text().replace('files = ["iolab", "plugins"]', 'files = ["broken.py"]')
    )
    (tmp_path / "broken.py").write_text(
        f"import os\n\n\ndef half(x: int) -> int:\n    return x / 2\n\n\nTEXT = '{'x' * 118}'\nprint( half(1) )\n"
    )
    return tmp_path


def test_each_gate_fails_on_broken_code(broken: Path) -> None:
    check = tool("ruff", "check", "--no-cache", ".", cwd=broken)
    assert check.returncode == 1 and "F401" in check.stdout and "E501" in check.stdout, check.stdout
    fmt = tool("ruff", "format", "--check", "--no-cache", ".", cwd=broken)
    assert fmt.returncode == 1 and "broken.py" in fmt.stdout, fmt.stdout
    types = tool("mypy", "--no-incremental", cwd=broken)
    assert types.returncode == 1 and "broken.py:5" in types.stdout, types.stdout


def bare_suppressions(lines: list[str]) -> list[int]:
    """The 1-based lines holding a ``# type: ignore[...]`` or ``# noqa: X``
    with no reason on the line itself or in a comment just above."""
    bare = []
    for i, line in enumerate(lines):
        m = re.search(r"#\s*(type:\s*ignore\[[^\]]+\]|noqa:\s*[A-Z0-9, ]+)(.*)$", line)
        if m and not m.group(2).strip() and not (i > 0 and lines[i - 1].strip().startswith("#")):
            bare.append(i + 1)
    return bare


def test_every_suppression_says_why() -> None:
    """A suppression left in the code has its reason beside it."""
    assert bare_suppressions(["x = f()  # type: ignore[misc]"]) == [1]  # the check can fail
    reasoned = ["# f is made at run time", "x = f()  # type: ignore[misc]", "import y  # noqa: E402 (path set above)"]
    assert bare_suppressions(reasoned) == []
    found = []
    patterns = ("iolab/**/*.py", "plugins/**/*.py", "tests/*.py", "notebooks/*.py", "benchmarks/*.py")
    for path in sorted(p for pattern in patterns for p in REPO.glob(pattern)):
        if path.name == "test_lint.py":
            continue
        found += [f"{path.relative_to(REPO)}:{n}" for n in bare_suppressions(path.read_text().splitlines())]
    assert not found, "suppressions without a reason: " + ", ".join(found)
