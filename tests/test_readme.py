"""The README is what a new user reads first: its two commands are what CI
runs, every command it names exists, and each fact it states (a number from
the reference run, a time, a package it installs) is the recorded one."""

from __future__ import annotations

import json
import re

from conftest import REPO

from iolab import clidoc, packages

README = (REPO / "README.md").read_text()


def readme_commands() -> list[str]:
    """The commands of the README's first code block (comments stripped)."""
    block = re.search(r"```sh\n(.*?)```", README, re.S)
    assert block, "the README has no sh code block"
    return [ln.split("#")[0].strip() for ln in block.group(1).splitlines() if ln.split("#")[0].strip()]


def test_the_readme_starts_with_the_two_commands() -> None:
    assert readme_commands() == ["./repro all", "./repro test"]


def test_the_readme_is_read_in_two_minutes() -> None:
    assert len(README.splitlines()) <= 100
    assert max(len(ln) for ln in README.splitlines() if ln.startswith("|")) <= 100


def test_ci_runs_the_readmes_test_command_and_nothing_else() -> None:
    run = (REPO / ".ci" / "run").read_text()
    steps = [
        ln.strip()
        for ln in run.splitlines()
        if ln.strip() and not ln.lstrip().startswith("#") and not ln.startswith(("set ", "cd ", "#!"))
    ]
    assert steps == ["./repro test"], steps
    assert "./repro test" in readme_commands()


def test_every_command_the_readme_names_exists() -> None:
    commands = {" ".join(words) for words in clidoc.command_paths()}
    named = set(re.findall(r"\./repro ([a-z]+)", README))
    assert named and named <= commands, named - commands
    for doc in ("docs/archive.md", "docs/configure.md"):
        named = set(re.findall(r"\./repro ([a-z]+(?: [a-z]+)?)", (REPO / doc).read_text()))
        assert {n for n in named if n not in commands and n.split()[0] not in commands} == set(), doc


def test_the_readme_shows_both_ways_to_run_it() -> None:
    # ./repro all, and Snakemake in the environment ./repro setup makes.
    both = re.search(r"```sh\n(\./repro setup[^\n]*)\n(snakemake --cores all)\n```", README)
    assert both and "source .venv/bin/activate" in both.group(1), "the README's snakemake block"


def test_the_readme_claims_only_the_distribution_it_tests() -> None:
    assert "Debian 12" in README and "Ubuntu" not in README


def test_the_headline_is_the_reference_runs() -> None:
    # The numbers of the README's second paragraph are the reference run's
    # (tests/data/reference_numbers.json, which the notebooks' test holds to
    # what the shipped data gives).
    record = json.loads((REPO / "tests" / "data" / "reference_numbers.json").read_text())
    headline = " ".join(README.split("\n\n")[2].split())
    quoted = {
        ("cost_model", "t1_over_w"): "cost **{text} times** (95 % interval {ci_text})",
        (
            "echo",
            "echo_ratio_defer_taskrun_multishot_c50_rps",
        ): "**{text} times** epoll's requests per second ({ci_text})",
    }
    for (notebook, key), phrase in quoted.items():
        number = record[notebook][key]
        assert phrase.format(**number) in headline, (key, number["text"], number["ci_text"])
    assert "reference run" in headline and "data/reference/" in headline


def recorded_seconds() -> dict[str, list[float]]:
    """Command -> the wall times benchmarks/wall_times.md records for it:
    a section titled by a command lists its runs; a table with a command
    column names it on each row."""
    out: dict[str, list[float]] = {}
    section = ""
    header: list[str] = []
    for line in (REPO / "benchmarks" / "wall_times.md").read_text().splitlines():
        if line.startswith("## "):
            m = re.match(r"## `([^`]+)`", line)
            section = m.group(1) if m else ""
            header = []
            continue
        if not line.lstrip().startswith("|") or re.fullmatch(r"[|\s:-]+", line.strip()):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not header:
            header = cells
            continue
        row = dict(zip(header, cells, strict=False))
        command = row["command"].strip("`") if "command" in row else section
        seconds = re.match(r"(\d+) s\b", row.get("wall", ""))
        if command and seconds:
            out.setdefault(command, []).append(float(seconds.group(1)))
    return out


def test_every_readme_time_is_a_recorded_run() -> None:
    section = README[README.index("## How long it takes") :]
    section = section[: section.index("\n## ", 1)]
    rows = re.findall(r"^\| `([^`]+)` \| (\d+) \|$", section, re.M)
    assert {c for c, _ in rows} >= {"./repro all", "./repro test", "./repro preview"}, rows
    recorded = recorded_seconds()
    for command, minutes in rows:
        assert int(minutes) in {round(s / 60) for s in recorded.get(command, [])}, (command, minutes)


def test_the_readme_lists_what_each_group_installs() -> None:
    section = README[README.index("## What it installs") :]
    section = section[: section.index("\n## ", 1)]
    named = set(re.findall(r"`([a-z0-9][a-z0-9.+-]+)`", section))
    listed = {*packages.BOOTSTRAP, *(p for g in packages.GROUPS.values() for p in g.packages)}
    assert listed <= named, listed - named
    assert named - listed <= {"requirements.lock", "setup"}, named - listed
