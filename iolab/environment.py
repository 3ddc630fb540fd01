"""Whether this interpreter is iolab's environment: the one ``./repro setup``
makes in .venv, with every package pyproject.toml names at the version
requirements.lock pins. The workflow asks first, while it is read and before
anything is planned, since it imports iolab as it is read and its jobs run
python, papermill and jupytext beside the interpreter that runs Snakemake;
a Snakemake from elsewhere stops there with one line naming the command
that makes the environment.

Standard library only, and no newer syntax than Python 3.8's: this runs on
whatever interpreter the Snakemake at hand runs on (Debian's Snakemake 7
among them).
"""

from __future__ import annotations

import os
import re
import sys
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# The command that makes the environment, and how to run the workflow in it.
SETUP = "./repro setup"
ACTIVATE = "source .venv/bin/activate"


def canonical(name: str) -> str:
    """A distribution's name as pip compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def pinned(pyproject: Path = REPO / "pyproject.toml") -> dict[str, str]:
    """Each direct dependency of pyproject.toml and its pinned version (read
    without tomllib, which older interpreters lack)."""
    text = pyproject.read_text()
    block = re.search(r"^dependencies = \[(.*?)^\]", text, re.M | re.S)
    if block is None:
        return {}
    return {canonical(n): v for n, v in re.findall(r'"([A-Za-z0-9_.-]+)==([^"]+)"', block.group(1))}


def installed() -> dict[str, str]:
    """Every distribution this interpreter sees, by canonical name."""
    found: dict[str, str] = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            found.setdefault(canonical(name), dist.version)
    return found


def differences(want: dict[str, str], have: dict[str, str]) -> list[str]:
    """What this interpreter lacks or has at another version, one phrase each."""
    out = []
    for name, version in sorted(want.items()):
        got = have.get(name)
        if got is None:
            out.append(f"{name} missing")
        elif got != version:
            out.append(f"{name} {got}, not {version}")
    return out


def problem() -> str | None:
    """One line saying why this interpreter is not iolab's environment and
    what makes it; None when it is."""
    wrong = differences(pinned(), installed())
    if not wrong:
        return None
    shown = ", ".join(wrong[:4]) + (f" and {len(wrong) - 4} more" if len(wrong) > 4 else "")
    return (
        f"iolab: this Snakemake runs outside iolab's environment ({sys.executable}: {shown}); "
        f"make it with {SETUP}, then run {ACTIVATE} and this command again"
    )


def stop_unless_ready() -> None:
    """The workflow's first step: stop with ``problem``'s line, before
    anything is planned. ``os._exit``: Snakemake before 9 reports a
    SystemExit raised while the workflow is read as an error with its
    traceback."""
    why = problem()
    if why is None:
        return
    sys.stdout.flush()
    print(why, file=sys.stderr, flush=True)
    os._exit(1)
