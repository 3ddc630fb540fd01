"""The paper's references as a reader sees them: every entry of
paper/references.yml rendered by Typst's bibliography, each author as a
person ("S. R. Howard") or as the body it is, its title whole; checked
against the entry, and shown to catch the mangled list ("Hoefler, Torsten,
Belli, and Roberto") the file once held."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
# The last commit whose references rendered mangled.
BEFORE = "4c554dc"
# The last commit whose sources' references printed no year.
UNDATED = "70b01e3"


def rendered(bib: str, tmp: Path) -> dict[str, str]:
    """Each entry's rendered reference, by key, from a document citing all."""
    import typst

    keys = list(yaml.safe_load(bib))
    (tmp / "refs.yml").write_text(bib)
    (tmp / "doc.typ").write_text(" ".join(f"@{k}" for k in keys) + '\n#bibliography("refs.yml")\n')
    typst.compile(str(tmp / "doc.typ"), output=str(tmp / "doc.pdf"))
    text = subprocess.run(["pdftotext", str(tmp / "doc.pdf"), "-"], capture_output=True, text=True, check=True).stdout
    body = text[text.index("Bibliography") :]
    items = re.split(r"\[(\d+)\]", body)[1:]
    refs = {int(items[i]): " ".join(items[i + 1].split()) for i in range(0, len(items), 2)}
    # Typst's default style numbers by first citation: the document cites in file order.
    return {k: refs[i + 1] for i, k in enumerate(keys)}


def expected_authors(entry: dict) -> list[str]:
    """How each author should read: "Last, First Middle" as "F. M. Last", a
    name without a comma (a body) as itself."""
    authors = entry.get("author", [])
    out = []
    for a in [authors] if isinstance(authors, str) else authors:
        if "," in a:
            last, first = (x.strip() for x in a.split(",", 1))
            initials = " ".join(f"{p[0]}." for p in first.replace(".", " ").split())
            out.append(f"{initials} {last}")
        else:
            out.append(a)
    return out


def flat(s: str) -> str:
    return re.sub(r"[\s\-]", "", s)


def problems(bib: str, tmp: Path) -> list[str]:
    entries, refs = yaml.safe_load(bib), rendered(bib, tmp)
    found = []
    for key, entry in entries.items():
        ref = refs[key]
        found += [f"{key}: author {a!r} not in {ref!r}" for a in expected_authors(entry) if flat(a) not in flat(ref)]
        if flat(str(entry["title"])) not in flat(ref):
            found.append(f"{key}: title not whole in {ref!r}")
        if re.search(r"\b(?:[A-Z]\. ){3,}", ref):
            found.append(f"{key}: a name read as a run of initials in {ref!r}")
        if re.search(r", and [A-Z][a-z]+,", ref.split("\u201c")[0]):
            found.append(f"{key}: a first name read as a person of its own in {ref!r}")
    return found


def test_every_reference_renders_as_its_entry_says(tmp_path: Path) -> None:
    bib = (REPO / "paper" / "references.yml").read_text()
    assert problems(bib, tmp_path) == []
    # Entries a reader needs: a year or the reason there is none (a
    # repository is cited as it stands, undated), an address or the reason
    # there is none, and a repost said to be one.
    for key, entry in yaml.safe_load(bib).items():
        text = " ".join(str(v) for v in entry.values())
        assert "url" in entry or "serial-number" in entry or "without an address" in text, key
    assert undated(bib, tmp_path) == []
    assert "repost" in yaml.safe_load(bib)["openanolis"]["parent"]["title"]


def undated(bib: str, tmp: Path) -> list[str]:
    """Entries whose printed reference shows neither their year nor the
    word that they are undated (Typst's style drops a blog post's date)."""
    refs = rendered(bib, tmp)
    found = []
    for key, entry in yaml.safe_load(bib).items():
        year = str(entry["date"])[:4] if "date" in entry else None
        if not (year and year in refs[key]) and "undated" not in refs[key]:
            found.append(key)
    return found


def test_the_years_check_catches_the_references_a_referee_found_undated(tmp_path: Path) -> None:
    # Negative control: as the referee read them, the sources' entries showed
    # no year (part 1's date was in the file, its blog parent dropped it).
    old = subprocess.run(
        ["git", "show", f"{UNDATED}:paper/references.yml"], cwd=REPO, capture_output=True, text=True, check=False
    )
    if old.returncode != 0:
        pytest.skip(f"commit {UNDATED} is not in this clone's history")
    assert {"habr-part1", "go-uring-benchmark", "hpchub"} <= set(undated(old.stdout, tmp_path))


def test_the_check_catches_the_references_as_they_once_rendered(tmp_path: Path) -> None:
    old = subprocess.run(
        ["git", "show", f"{BEFORE}:paper/references.yml"], cwd=REPO, capture_output=True, text=True, check=False
    )
    if old.returncode != 0:
        pytest.skip(f"commit {BEFORE} is not in this clone's history")
    found = problems(old.stdout, tmp_path)
    assert any(p.startswith("hoefler2015: a first name read as a person") for p in found), found
    assert any("osu:" in p for p in found), found
