"""The README's two commands are what a new user runs and what CI runs."""

from __future__ import annotations

import re

from conftest import REPO


def readme_commands() -> list[str]:
    """The commands of the README's first code block (comments stripped)."""
    block = re.search(r"```sh\n(.*?)```", (REPO / "README.md").read_text(), re.S)
    assert block, "the README has no sh code block"
    return [ln.split("#")[0].strip() for ln in block.group(1).splitlines() if ln.split("#")[0].strip()]


def test_the_readme_starts_with_the_two_commands() -> None:
    assert readme_commands() == ["./repro all", "./repro test"]


def test_ci_runs_the_readmes_test_command_and_nothing_else() -> None:
    run = (REPO / ".ci" / "run").read_text()
    steps = [
        ln.strip()
        for ln in run.splitlines()
        if ln.strip() and not ln.lstrip().startswith("#") and not ln.startswith(("set ", "cd ", "#!"))
    ]
    assert steps == ["./repro test"], steps
    assert "./repro test" in readme_commands()


def timing_rows(text: str) -> list[list[str]]:
    """The cells of every Markdown table row in ``text``."""
    return [
        [c.strip() for c in ln.strip().strip("|").split("|")]
        for ln in text.splitlines()
        if ln.lstrip().startswith("|") and not re.fullmatch(r"[|\s:-]+", ln.strip())
    ]


def test_every_readme_wall_time_is_a_recorded_run() -> None:
    # The README's "How long it takes" table quotes runs as "<N> s at <commit>";
    # each must be a row of benchmarks/wall_times.md with that commit and time.
    readme = (REPO / "README.md").read_text()
    section = readme[readme.index("### How long it takes") :]
    section = section[: section.index("\n#", 1)]
    quoted = re.findall(r"\b(\d+) s at ([0-9a-f]{7})\b", section)
    assert len(quoted) >= 4, quoted
    rows = timing_rows((REPO / "benchmarks" / "wall_times.md").read_text())
    missing = [
        (secs, commit)
        for secs, commit in quoted
        if not any(commit in row and any(re.search(rf"\b{secs} s\b", c) for c in row) for row in rows)
    ]
    assert missing == [], f"README wall times not in benchmarks/wall_times.md: {missing}"
