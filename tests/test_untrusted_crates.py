"""A crate from someone else is data, never code (iolab.archive.untrusted).

Each attack is a crafted crate made from the smoke run's real one: a
member that climbs out of data/raw/, one the metadata does not list, a
symbolic link, a zip bomb, malformed metadata; and, in one full
re-analysis, executed notebooks whose recorded parameters carry code in a
parameter name and paths outside the checkout. ``verify`` and
``reanalyse`` refuse each refusable one with one line and leave nothing
outside the checkout; the full re-analysis runs none of the crate's code
and writes only where the pipeline would.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, copy_workflow, module_cli
from crate_support import craft

from iolab.archive import untrusted


@pytest.fixture(scope="module")
def base_crate(smoke_run: tuple[Path, object], tmp_path_factory: pytest.TempPathFactory) -> Path:
    wd, _ = smoke_run
    out = tmp_path_factory.mktemp("base-crate")
    res = module_cli("iolab.archive.crate", wd, "build", "--out", str(out), "--overlay", "smoke")
    assert res.returncode == 0, res.stderr
    (crate,) = out.glob("iolab-*.crate.zip")
    return crate


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A checkout that has analysed nothing; every refused crate leaves it so."""
    return copy_workflow(tmp_path_factory.mktemp("fresh") / "iolab")


def outside_marker(tmp_path: Path) -> Path:
    return tmp_path / "escaped" / "pwned.py"


SMALL = "data/raw/local/syscall/0123456789ab/rep9.csv"
MIB_OF_ZEROS = bytes(1 << 20)


def attacks(tmp_path: Path) -> dict[str, tuple[dict, str]]:
    """name -> (craft arguments, what the one refusal line must say)."""
    escaped = outside_marker(tmp_path)
    climb = "data/raw/" + "../" * 12 + str(escaped).lstrip("/")
    return {
        "traversal": ({"add": {climb: b"print('ran')\n"}}, "'..' in its name"),
        "traversal into the checkout": ({"add": {"data/raw/../../jupytext.py": b"print('ran')\n"}}, "'..' in its name"),
        "absolute name": ({"add": {str(escaped): b"x"}}, "an absolute name"),
        "unlisted raw member": (
            {"add": {"data/raw/local/syscall/0123456789ab/rep9.csv": b"# iolab-raw\n"}, "list_added": False},
            "not listed in the metadata with a SHA-256 (raw data)",
        ),
        "symbolic link": ({"links": {"data/raw/local/syscall/0123456789ab/rep9.csv": str(escaped)}}, "a symbolic link"),
        "expansion bomb": ({"add": {"data/raw/local/syscall/0123456789ab/rep9.csv": bytes(64 << 20)}}, "a zip bomb"),
        "graph not a list": (
            {"edit_metadata": lambda m: m.__setitem__("@graph", {"a": 1})},
            "its @graph is dict, not a list of entities",
        ),
        "checksum not a string": (
            {"edit_metadata": lambda m: next(e for e in m["@graph"] if e.get("sha256")).__setitem__("sha256", 12)},
            "has no valid @id or SHA-256",
        ),
        "encrypted member": (
            {"add": {SMALL: b"# iolab-raw\n"}, "encrypted": {SMALL}},
            "an encrypted member",
        ),
        "unknown compression method": (
            {"add": {SMALL: b"# iolab-raw\n"}, "method": {SMALL: 99}},
            "an unknown compression method (99)",
        ),
        "names that differ only by case": (
            {
                "add": {
                    "data/raw/Node1/syscall/0123456789ab/rep9.csv": b"# iolab-raw\n",
                    "data/raw/node1/syscall/0123456789ab/rep9.csv": b"# iolab-raw\n",
                }
            },
            "only by case",
        ),
        # Each member at the per-member floor (1 MiB), listed with its true
        # checksum: only the bound over the whole crate stops them.
        "many small members": (
            {"add": {f"data/raw/local/syscall/0123456789ab/rep{i}.csv": MIB_OF_ZEROS for i in range(10, 210)}},
            "(more than 100 times in all: a zip bomb)",
        ),
    }


ATTACKS = [
    "traversal",
    "traversal into the checkout",
    "absolute name",
    "unlisted raw member",
    "symbolic link",
    "expansion bomb",
    "graph not a list",
    "checksum not a string",
    "encrypted member",
    "unknown compression method",
    "many small members",
    "names that differ only by case",
]


@pytest.mark.parametrize("attack", ATTACKS)
def test_verify_and_reanalyse_refuse_each_attack_in_one_line_and_write_nothing(
    attack: str, base_crate: Path, fresh: Path, tmp_path: Path
) -> None:
    kwargs, says = attacks(tmp_path)[attack]
    crate = craft(base_crate, tmp_path / "evil.crate.zip", **kwargs)
    verify = module_cli("iolab.archive.crate", fresh, "verify", str(crate))
    assert verify.returncode == 1, verify.stdout
    assert says in verify.stderr, verify.stderr
    assert "every" not in verify.stdout and "matches" not in verify.stdout
    re = module_cli("iolab.archive.reanalyse", fresh, str(crate))
    assert re.returncode == 1, re.stdout
    lines = re.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("reanalyse: ") and "Traceback" not in re.stderr, re.stderr
    assert says in lines[0] or "problem(s)" in lines[0], lines
    # Nothing unpacked, nothing written outside the checkout or into it.
    assert not outside_marker(tmp_path).exists()
    assert not (fresh / "jupytext.py").exists() and not (fresh / "data" / "raw").exists()
    assert not (fresh / "results").exists()


def test_the_real_crate_verifies_and_names_its_files(base_crate: Path) -> None:
    problems, files = untrusted.verify(base_crate)
    assert problems == [] and files > 10
    # A path the metadata percent-encodes (its @id config.v9%2B.yaml) names its member.
    with untrusted.Crate(base_crate) as crate:
        assert crate.has("profiles/default/config.v9+.yaml")
    # Every real member is well inside the expansion bound: the bound
    # catches bombs, not runs.
    with zipfile.ZipFile(base_crate) as z:
        worst = (
            max(i.file_size / max(i.compress_size, 1) for i in z.infolist() if i.file_size > 1 << 20)
            if any(i.file_size > 1 << 20 for i in z.infolist())
            else 1.0
        )
    assert worst < untrusted.MAX_RATIO / 4, worst


def test_verify_counts_every_problem_and_never_vouches_for_a_crate_it_refused(base_crate: Path, tmp_path: Path) -> None:
    crate = craft(
        base_crate,
        tmp_path / "two.crate.zip",
        add={"data/raw/local/syscall/0123456789ab/rep9.csv": b"1", "notes.txt": b"2"},
        list_added=False,
    )
    res = module_cli("iolab.archive.crate", tmp_path, "verify", str(crate))
    assert res.returncode == 1
    assert "data/raw/local/syscall/0123456789ab/rep9.csv: in the zip but not listed" in res.stderr
    assert "notes.txt: in the zip but not listed" in res.stderr
    assert "2 problem(s); do not use this crate" in res.stderr
    assert res.stdout == ""


def test_an_edited_raw_member_whose_checksum_was_not_updated_is_named(base_crate: Path, tmp_path: Path) -> None:
    with zipfile.ZipFile(base_crate) as z:
        victim = next(n for n in z.namelist() if n.startswith("data/raw/") and n.endswith(".csv"))
        data = z.read(victim)
    crate = craft(
        base_crate,
        tmp_path / "edited.crate.zip",
        edit_metadata=lambda m: next(e for e in m["@graph"] if e["@id"] == victim).update(contentSize=len(data) + 1),
    )
    res = module_cli("iolab.archive.crate", tmp_path, "verify", str(crate))
    assert res.returncode == 1 and f"{victim}: the zip says it expands to {len(data)} bytes" in res.stderr


def test_compare_refuses_a_crate_that_does_not_verify_and_escapes_what_it_prints(
    base_crate: Path, tmp_path: Path
) -> None:
    evil = craft(base_crate, tmp_path / "evil.crate.zip", links={"data/raw/x/y": "/etc/passwd"})
    res = module_cli("iolab.archive.compare", tmp_path, str(base_crate), str(evil))
    assert res.returncode == 1 and res.stderr.count("\n") == 1 and "a symbolic link" in res.stderr
    # Numbers whose values are malformed and a key with markup: shown escaped, not a traceback.
    with zipfile.ZipFile(base_crate) as z:
        numbers = json.loads(z.read("paper/generated/numbers.json"))
    numbers["evil|key\n<script>"] = {"value": 1.0, "ci95": ["x", None]}
    numbers["broken"] = "not an object"
    numbers["findings"] = {"value": [{"claim": "U1", "part": "a | b", "outcome": "**x**"}, 7]}
    odd = craft(
        base_crate, tmp_path / "odd.crate.zip", replace={"paper/generated/numbers.json": json.dumps(numbers).encode()}
    )
    res = module_cli("iolab.archive.compare", tmp_path, str(base_crate), str(odd))
    assert res.returncode == 0, res.stderr
    assert "<script>" not in res.stdout and "a | b" not in res.stdout and "a \\| b" in res.stdout


def test_a_crate_value_never_reaches_git_as_an_option(base_crate: Path, fresh: Path, tmp_path: Path) -> None:
    # The crate's root version is what publish once handed git as a range.
    target = tmp_path / "written-by-git"
    evil = craft(
        base_crate,
        tmp_path / "option.crate.zip",
        edit_metadata=lambda m: next(e for e in m["@graph"] if e["@id"] == "./").__setitem__(
            "version", f"--output={target}"
        ),
    )
    db = tmp_path / "store.sqlite"
    for module, args, prefix in (
        ("iolab.archive.store", ["--db", str(db), "add", str(evil)], "store: "),
        ("iolab.archive.reanalyse", [str(evil)], "reanalyse: "),
    ):
        res = module_cli(module, fresh, *args)
        assert res.returncode != 0, (module, res.stdout)
        assert "Traceback" not in res.stderr, res.stderr
        refusal = [line for line in res.stderr.splitlines() if "is not a git commit" in line]
        assert len(refusal) == 1 and refusal[0].startswith(prefix), (module, res.stderr)
    assert not list(tmp_path.glob("written-by-git*")), "git wrote a file a crate named"
    assert not (fresh / "data" / "raw").exists()
    # A sidecar's commit is checked the same way before it reaches git.
    from iolab.archive.contents import measured_with_todays_code

    why = measured_with_todays_code(REPO, "syscall", {f"--output={target}"})
    assert why is not None and "is not a git commit" in why
    assert not list(tmp_path.glob("written-by-git*"))


def test_the_store_refuses_a_bad_crate_and_the_site_holds_the_others(base_crate: Path, tmp_path: Path) -> None:
    bad = craft(base_crate, tmp_path / "locked.crate.zip", encrypted={"paper/generated/numbers.json"})
    db = str(tmp_path / "store.sqlite")
    res = module_cli("iolab.archive.store", tmp_path, "--db", db, "add", str(bad), str(base_crate))
    assert res.returncode == 1 and "Traceback" not in res.stderr, res.stderr
    assert "locked.crate.zip: refused:" in res.stderr and "an encrypted member" in res.stderr
    res = module_cli("iolab.archive.publish", tmp_path, "--db", db, "--out", str(tmp_path / "site"))
    assert res.returncode == 0, res.stderr
    assert len(list((tmp_path / "site" / "runs").glob("*.html"))) == 1


def test_a_size_mismatch_says_sizes_not_digests(base_crate: Path, tmp_path: Path) -> None:
    # The zip's own size matches the metadata's, the bytes are shorter.
    with zipfile.ZipFile(base_crate) as z:
        victim = next(n for n in z.namelist() if n.startswith("data/raw/") and n.endswith(".csv"))
        data = z.read(victim)
    crate = craft(base_crate, tmp_path / "short.crate.zip", replace={victim: data[:-1]})
    crate = craft(
        crate,
        tmp_path / "short2.crate.zip",
        edit_metadata=lambda m: next(e for e in m["@graph"] if e["@id"] == victim).update(contentSize=len(data)),
    )
    with untrusted.Crate(crate) as opened:
        # Bypass the zip-header check to reach the streamed one.
        opened.problems.clear()
        problems = opened.checksum_problems()
    assert any(f"expands to {len(data) - 1} bytes, the metadata records {len(data)}" in p for p in problems), problems


# What a crate's text may hold to change how the page around it reads: an
# escape sequence (clear the screen), a right-to-left override, an isolate.
HOSTILE = "\x1b[2J\u202eevil\u2066"


def crate_with_findings(base: Path, out: Path, edit: Callable[[list[dict]], list[dict]]) -> Path:
    """``base`` with its claims' findings (paper/generated/numbers.json) edited."""
    with zipfile.ZipFile(base) as z:
        numbers = json.loads(z.read("paper/generated/numbers.json"))
    numbers["findings"]["value"] = edit(numbers["findings"]["value"])
    return craft(base, out, replace={"paper/generated/numbers.json": json.dumps(numbers).encode()})


def site_text(site: Path) -> str:
    return "\n".join(p.read_text() for p in sorted(site.rglob("*.html")))


def test_the_site_shows_a_crates_control_and_bidi_characters_escaped(
    base_crate: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from iolab.archive import publish, store

    def hostile(findings: list[dict]) -> list[dict]:
        findings[0]["part"] = HOSTILE + findings[0]["part"]
        return findings

    crate = crate_with_findings(base_crate, tmp_path / "bidi.crate.zip", hostile)
    assert store.add(tmp_path / "store.sqlite", crate) == store.ADDED
    args = ["--db", str(tmp_path / "store.sqlite")]
    assert publish.main([*args, "--out", str(tmp_path / "site")]) == 0
    text = site_text(tmp_path / "site")
    assert "\\x1b[2J\\u202eevil\\u2066" in text
    assert not {"\x1b", "\u202e", "\u2066"} & set(text)
    # The negative control: escaped for HTML only, the characters reach the page.
    monkeypatch.setattr(publish, "display_safe", lambda s: s)
    monkeypatch.setattr(publish, "display_safe_tree", lambda v: v)
    assert publish.main([*args, "--out", str(tmp_path / "plain")]) == 0
    assert {"\x1b", "\u202e", "\u2066"} <= set(site_text(tmp_path / "plain"))


def test_made_up_claims_are_left_out_and_said_in_one_line(
    base_crate: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """20 000 made-up claims once took `verdicts` 69 s and 40 004 lines: a
    claim this checkout does not know (iolab.claims.CLAIM_TESTS)
    is left out where a crate is read (iolab.archive.compare.load), and so
    are parts past MAX_PARTS_PER_CLAIM of a known one; the run says so once."""
    from iolab.archive import compare, pooling
    from iolab.claims import CLAIM_TESTS

    made_up = 2_000  # the trial had 20 000; the control, which judges them all, stays quick

    def inflate(findings: list[dict]) -> list[dict]:
        real = [f for f in findings if f["claim"] in CLAIM_TESTS]
        extra = [{**real[0], "claim": f"Z{i}", "part": f"made up {i}"} for i in range(made_up)]
        many = [{**real[0], "part": f"{real[0]['part']} #{i}"} for i in range(compare.MAX_PARTS_PER_CLAIM + 5)]
        return [*real, *extra, *many]

    crate = crate_with_findings(base_crate, tmp_path / "many.crate.zip", inflate)
    run = compare.load(crate)
    kept = run.numbers["findings"]["value"]
    assert {f["claim"] for f in kept} <= set(CLAIM_TESTS)
    assert max(sum(f["claim"] == c for f in kept) for c in CLAIM_TESTS) <= compare.MAX_PARTS_PER_CLAIM
    assert run.left_out.startswith(f"left out {made_up} part(s) of {made_up} claim(s) this checkout does not know")
    assert run.left_out.endswith("part(s) beyond 200 per claim") and "\n" not in run.left_out
    lines = pooling.report(*_pooled(pooling, [crate]))
    assert len(lines) < 2 * compare.MAX_PARTS_PER_CLAIM + 4 * len(CLAIM_TESTS) + 20, len(lines)
    # The negative control: with every finding kept, every made-up claim gets its lines.
    monkeypatch.setattr(compare, "registered_findings", lambda numbers: (numbers, ""))
    assert len(pooling.report(*_pooled(pooling, [crate]))) > made_up


def _pooled(pooling: Any, crates: list[Path]) -> tuple[str, Any, Any, str]:
    evidence = pooling.gather(crates, None, say=lambda s: None)
    return "this kind", evidence, pooling.pool_evidence(evidence, "accumulating"), "accumulating"
