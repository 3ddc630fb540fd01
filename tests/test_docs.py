"""The documents a newcomer reads hold together: every decision file
(docs/decisions/) has its sections, a date and a measured figure cited from
where it was measured; every link between the documents resolves; DESIGN.md
names every rule file; and no code or document cites the lab log
(docs/notes.md) for a reason, which is what the decision files are for.
Each check is a function of a tree, shown to fail on a broken one."""

from __future__ import annotations

import datetime
import os
import re
import shutil
from pathlib import Path

from conftest import REPO

SECTIONS = ("Context", "Decision", "Why", "Evidence", "Consequences")
DECISIONS = "docs/decisions"
LAB_LOG = "docs/notes.md"
# Where a decision's figure may be cited from: a file and one of its headings.
RECORDS = (LAB_LOG, "docs/machine.md", "benchmarks/wall_times.md")
# The only files that may name the lab log: the log itself, the decisions
# (which cite it for their figures), the README's list of documents, the
# paper (it points to the log for figures measured outside the pipeline),
# the wall-time record (it points to a pair of runs compared there) and this
# test. Anything else cites a decision file for its "why".
MAY_NAME_LOG = {LAB_LOG, "README.md", "paper/paper.typ", "benchmarks/wall_times.md", "tests/test_docs.py"}
# Documents whose links and named paths must resolve. The lab log is a
# record: the paths its entries name are as they were, so only its links
# are checked.
CURRENT_DOCS = ("README.md", "DESIGN.md", "docs/*.md", f"{DECISIONS}/*.md")
# A path named in backticks under one of these folders must exist; names with
# a placeholder (<name>, *, {x}) are patterns, and generated outputs
# (results/, paper/, native/build/) exist only after a run.
NAMED_PATH = re.compile(
    r"`((?:docs|benchmarks|config|iolab|native|rules|tests|notebooks)/[^`\s<>*{}]*|DESIGN\.md|README\.md)`"
)
LINK = re.compile(r"\]\(([^)\s]+)\)")
CITATION = re.compile(r'`([\w./-]+\.md)`,\s+"([^"]+)"')
# Not searched for citations: measurements, outputs and environments (by
# their path from the top), and caches (by name, anywhere).
SKIPPED_PATHS = {".venv", "data", "results", "archive", "native/build", "paper/generated", ".snakemake"}
SKIPPED_NAMES = {".git", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"}
# Source and documents (and files without a suffix: Snakefile, repro).
TEXT_SUFFIXES = {"", ".py", ".md", ".yaml", ".yml", ".smk", ".c", ".h", ".go", ".typ", ".ipynb", ".toml", ".mk"}
TEXT_SUFFIXES |= {".rst", ".txt", ".sh", ".json", ".cfg", ".j2", ".html"}


def headings(path: Path) -> set[str]:
    """Every Markdown heading's text in ``path``, whitespace collapsed."""
    found, fenced = set(), False
    for line in path.read_text().splitlines():
        fenced ^= line.startswith("```")
        if not fenced and (m := re.match(r"#{1,6} (.+)", line)):
            found.add(" ".join(m.group(1).split()))
    return found


def slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def sections(text: str) -> list[tuple[str, str]]:
    """The ``## `` sections of a decision file: (title, body)."""
    parts = re.split(r"^## (.+)$", text, flags=re.M)
    return [(parts[i].strip(), parts[i + 1].strip()) for i in range(1, len(parts), 2)]


def citation_problems(root: Path, name: str, text: str) -> list[str]:
    """Each `file`, "heading" citation in ``text`` names a record and one of
    its headings."""
    found = []
    for path, heading in CITATION.findall(text):
        heading = " ".join(heading.split())
        if path not in RECORDS:
            found.append(f"{name}: cites {path}, which is not a record of measurements ({', '.join(RECORDS)})")
        elif not (root / path).is_file() or heading not in headings(root / path):
            found.append(f'{name}: cites "{heading}", which is not a heading of {path}')
    return found


def decision_problems(root: Path, today: datetime.date | None = None) -> list[str]:
    """What is wrong with the decision files under ``root``, one line each."""
    today = today or datetime.date.today()
    folder = root / DECISIONS
    files = sorted(folder.glob("[0-9][0-9][0-9][0-9]-*.md"))
    index = (folder / "README.md").read_text() if (folder / "README.md").is_file() else ""
    found = [] if files else [f"{DECISIONS}: no decision files"]
    numbers: dict[str, str] = {}
    for path in files:
        name, text = path.name, path.read_text()
        number = name[:4]
        if number in numbers:
            found.append(f"{name}: number {number} is also {numbers[number]}'s")
        numbers[number] = name
        if not re.match(rf"# {number}\. \S", text):
            found.append(f"{name}: the first line is not '# {number}. <what was decided>'")
        date = re.search(r"^Date: (\d{4}-\d\d-\d\d)$", text, re.M)
        try:
            when = datetime.date.fromisoformat(date.group(1)) if date else None
        except ValueError:
            when = None
        if when is None or when > today:
            found.append(f"{name}: no 'Date: YYYY-MM-DD' line with a real date, not in the future")
        got = sections(text)
        if tuple(title for title, _ in got) != SECTIONS:
            found.append(f"{name}: sections {[t for t, _ in got]}, not {list(SECTIONS)}")
        found += [f"{name}: section {title!r} is empty" for title, body in got if not body]
        evidence = dict(got).get("Evidence", "")
        if not CITATION.search(evidence):
            found.append(f'{name}: its evidence cites no record as `file`, "heading" ({", ".join(RECORDS)})')
        found += citation_problems(root, name, text)
        if f"({name})" not in index:
            found.append(f"{name}: not listed in {DECISIONS}/README.md")
    return found


def doc_files(root: Path) -> list[Path]:
    return sorted({p for pattern in CURRENT_DOCS for p in root.glob(pattern)} | {root / LAB_LOG})


def link_problems(root: Path, files: list[Path]) -> list[str]:
    """Each relative link in ``files`` reaches a file (and a heading, for an
    anchor into Markdown), and each path named in backticks exists, in all
    but the lab log."""
    found = []
    for doc in files:
        if not doc.is_file():
            continue
        rel, text = doc.relative_to(root).as_posix(), doc.read_text()
        for target in LINK.findall(text):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            dest = (doc.parent / path).resolve() if path else doc
            if not dest.exists():
                found.append(f"{rel}: link to {target}, which does not exist")
            elif anchor and dest.suffix == ".md" and anchor not in {slug(h) for h in headings(dest)}:
                found.append(f"{rel}: link to {target}, whose heading does not exist")
        if rel != LAB_LOG:
            named = [p for p in NAMED_PATH.findall(text) if not p.startswith("native/build/")]
            found += [f"{rel}: names `{p}`, which does not exist" for p in named if not (root / p).exists()]
    return found


def log_citations(root: Path) -> list[str]:
    """Files under ``root`` that name the lab log but may not."""
    found = []
    for directory, dirs, names in os.walk(root):
        here = Path(directory).relative_to(root)
        dirs[:] = [d for d in dirs if (here / d).as_posix() not in SKIPPED_PATHS and d not in SKIPPED_NAMES]
        for name in names:
            path = Path(directory) / name
            rel = path.relative_to(root).as_posix()
            if rel in MAY_NAME_LOG or rel.startswith(f"{DECISIONS}/") or path.suffix not in TEXT_SUFFIXES:
                continue
            try:
                text = path.read_text()
            except (UnicodeDecodeError, OSError):
                continue
            if "notes.md" in text:
                found.append(f"{rel}: names the lab log; cite a file of {DECISIONS}/ for a reason")
    return found


def unnamed_rule_files(root: Path) -> list[str]:
    """The rule files DESIGN.md does not name."""
    design = (root / "DESIGN.md").read_text()
    rules = [p.relative_to(root).as_posix() for p in sorted((root / "rules").glob("*.smk"))]
    return [r for r in rules if f"`{r}`" not in design]


def test_every_decision_has_its_sections_a_date_and_its_figures_source() -> None:
    assert decision_problems(REPO) == []


def test_every_link_between_the_documents_resolves() -> None:
    files = doc_files(REPO)
    assert {"README.md", "DESIGN.md", "docs/method.md", LAB_LOG} <= {f.relative_to(REPO).as_posix() for f in files}
    assert link_problems(REPO, files) == []


def test_nothing_cites_the_lab_log_for_a_reason() -> None:
    assert log_citations(REPO) == []


def test_design_names_every_rule_file() -> None:
    assert len(list((REPO / "rules").glob("*.smk"))) >= 9
    assert unnamed_rule_files(REPO) == []


def copy_docs(dest: Path) -> Path:
    """The documents and what they name, without the code's bulk."""
    for rel in ("README.md", "DESIGN.md", "docs", "rules", "benchmarks/wall_times.md"):
        src, out = REPO / rel, dest / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if src.is_dir() else shutil.copy)(src, out)
    return dest


def test_the_decision_check_catches_a_malformed_decision(tmp_path: Path) -> None:
    root = copy_docs(tmp_path)
    assert decision_problems(root) == []
    first = sorted((root / DECISIONS).glob("0001-*.md"))[0]
    text = first.read_text()
    first.write_text(
        text.replace("## Why", "## Reasons")
        .replace("Date: ", "Date: 2999-")
        .replace(f'`{LAB_LOG}`, "', f'`{LAB_LOG}`, "no such entry, ')
    )
    (root / DECISIONS / "0099-not-listed.md").write_text(text.replace("# 0001.", "# 0099."))
    found = decision_problems(root)
    assert any("sections" in p and "Reasons" in p for p in found), found
    assert any("Date" in p for p in found), found
    assert any('"no such entry,' in p for p in found), found
    assert any(p.startswith("0099-not-listed.md: not listed") for p in found), found


def test_the_link_check_catches_a_broken_link_and_path(tmp_path: Path) -> None:
    root = copy_docs(tmp_path)
    design = root / "DESIGN.md"
    # The copy lacks the code the documents name: count only what the edit adds.
    before = set(link_problems(root, [design]))
    design.write_text(
        design.read_text() + "\nSee [gone](docs/gone.md), [a heading](docs/method.md#no-such-heading)"
        " and `benchmarks/gone.py`.\n"
    )
    found = [p for p in link_problems(root, [design]) if p not in before]
    assert found == [
        "DESIGN.md: link to docs/gone.md, which does not exist",
        "DESIGN.md: link to docs/method.md#no-such-heading, whose heading does not exist",
        "DESIGN.md: names `benchmarks/gone.py`, which does not exist",
    ], found


def test_a_file_citing_the_lab_log_for_a_reason_is_caught(tmp_path: Path) -> None:
    root = copy_docs(tmp_path)
    assert log_citations(root) == []
    fixture = root / "iolab" / "cells.py"
    fixture.parent.mkdir()
    fixture.write_text("# Cells run 1 s (docs/notes.md, 2026-12-02, night).\n")
    assert log_citations(root) == [f"iolab/cells.py: names the lab log; cite a file of {DECISIONS}/ for a reason"]


def test_the_rule_check_catches_a_rule_file_design_leaves_out(tmp_path: Path) -> None:
    root = copy_docs(tmp_path)
    design = root / "DESIGN.md"
    design.write_text(design.read_text().replace("`rules/study.smk`", "the study's rules"))
    assert unnamed_rule_files(root) == ["rules/study.smk"]
