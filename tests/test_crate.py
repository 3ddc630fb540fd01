"""The run archive: a Provenance Run Crate of a real smoke run that the
RO-Crate validator accepts, whose checksums catch an edited raw file, and
from which a fresh copy of the workflow rebuilds the paper without
measuring, number for number.

The validator resolves the RO-Crate 1.1 JSON-LD context over HTTP; these
machines have no network, so its HTTP cache is seeded with the context's
published text (tests/data/ro-crate-1.1-context.jsonld: ResearchObject/ro-crate,
docs/_specification/1.1/context.jsonld at 4b4f939, CC0) and the validator
runs with --offline.
"""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import REPO, copy_workflow, crate_cli, module_cli, tool_env
from crate_support import craft, raw_copy

from iolab.codehash import measuring_digest
from iolab.estimation import intervals as stats
from iolab.readers import sha256

CONTEXT_URL = "https://w3id.org/ro/crate/1.1/context"


def seed_validator_cache(cache_home: Path) -> None:
    """The validator's persistent HTTP cache, holding the 1.1 context."""
    import requests
    import urllib3
    from requests_cache import CachedSession

    body = (REPO / "tests" / "data" / "ro-crate-1.1-context.jsonld").read_bytes()
    assert json.loads(body)["@id"] == CONTEXT_URL
    path = cache_home / "rocrate-validator" / "http_cache"
    path.parent.mkdir(parents=True)
    session = CachedSession(cache_name=str(path), backend="sqlite", expire_after=-1)
    response = requests.Response()
    response.status_code, response._content, response.url, response.encoding = 200, body, CONTEXT_URL, "utf-8"
    response.headers["Content-Type"] = "application/ld+json"
    response.request = requests.Request("GET", CONTEXT_URL).prepare()
    response.raw = urllib3.HTTPResponse(
        body=io.BytesIO(body),
        headers=dict(response.headers),
        status=200,
        preload_content=False,
        request_url=CONTEXT_URL,
    )
    session.cache.save_response(response)


def test_the_crate_is_a_valid_provenance_run_crate(smoke_crate: Path, tmp_path: Path) -> None:
    unpacked = tmp_path / "crate"
    with zipfile.ZipFile(smoke_crate) as z:
        z.extractall(unpacked)
    seed_validator_cache(tmp_path / "cache")
    report = tmp_path / "report.json"
    res = subprocess.run(
        [
            str(Path(sys.executable).parent / "rocrate-validator"),
            "-y",
            "validate",
            "--offline",
            "-p",
            "provenance-run-crate-0.5",
            "-f",
            "json",
            "-o",
            str(report),
            str(unpacked),
        ],
        env={**tool_env(), "XDG_CACHE_HOME": str(tmp_path / "cache")},
        capture_output=True,
        text=True,
        timeout=600,
    )
    result = json.loads(report.read_text())
    assert [i["message"] for i in result["issues"]] == [], res.stdout[-2000:]
    assert result["passed"] is True
    # The validator checked every profile the crate claims, through the inheritance chain.
    assert {"ro-crate-1.1", "workflow-ro-crate-1.0", "workflow-run-crate-0.5", "provenance-run-crate-0.5"} <= set(
        result["statistics"]["profiles"]
    )
    assert result["statistics"]["total_passed_checks"] == result["statistics"]["total_checks"] > 50


def test_the_crate_holds_every_raw_file_with_its_checksum_and_the_run_as_actions(
    smoke_crate: Path, smoke_run: tuple[Path, object]
) -> None:
    wd, _ = smoke_run
    with zipfile.ZipFile(smoke_crate) as z:
        graph = {e["@id"]: e for e in json.loads(z.read("ro-crate-metadata.json"))["@graph"]}
        sources = [json.loads(p.read_text()) for p in (wd / "results" / "tables").glob("*.sources.json")]
        raw = [entry for s in sources for entry in s["raw"]]
        assert raw
        for entry in raw:
            assert graph[entry["raw"]]["sha256"] == entry["sha256"]
            assert entry["provenance"] in z.namelist()
        verdicts = json.loads(z.read("archive/verdicts.json"))
        environment = json.loads(z.read("archive/environment.json"))
        code = json.loads(z.read("archive/code.json"))
    assert verdicts and {"claim", "part", "estimate", "rule", "margin", "outcome"} <= set(verdicts[0])
    # The code of every experiment measured, as this checkout digests it
    # today (the smoke run measured in this copy, which has no git).
    assert code["measured"] == {e: measuring_digest(e) for e in {entry["raw"].split("/")[3] for entry in raw}}
    assert code["unrecorded"] == {}
    assert environment["nodes"]["local"]["kernel"] and environment["apt"]["liburing-dev"]
    measured = [e for e in graph.values() if e.get("@type") == "CreateAction" and e["name"].startswith("measure_")]
    assert len(measured) == len(raw)
    assert all(e["startTime"] <= e["endTime"] for e in measured)
    organize = next(e for e in graph.values() if e.get("@type") == "OrganizeAction")
    assert len(organize["object"]) == sum(1 for e in graph.values() if e.get("@type") == "ControlAction")
    assert graph["./"]["mainEntity"] == {"@id": "Snakefile"}
    # The between-run spread the analysis read goes with the run.
    assert graph["data/occasions.json"]["sha256"] == sha256(REPO / "data" / "occasions.json")
    assert {"@id": "data/occasions.json"} in graph["#run"]["object"]


def test_verify_names_a_raw_file_whose_bytes_changed(smoke_crate: Path, tmp_path: Path) -> None:
    assert crate_cli(REPO, "verify", str(smoke_crate)).returncode == 0
    tampered = tmp_path / "tampered.crate.zip"
    with zipfile.ZipFile(smoke_crate) as src, zipfile.ZipFile(tampered, "w") as dst:
        victim = next(n for n in src.namelist() if n.startswith("data/raw/") and n.endswith("rep1.csv"))
        for item in src.infolist():
            data = src.read(item.filename)
            dst.writestr(item, data.replace(b",", b";", 1) if item.filename == victim else data)
    res = crate_cli(REPO, "verify", str(tampered))
    assert res.returncode == 1
    assert f"{victim}: SHA-256" in res.stderr and "1 problem(s); do not use this crate" in res.stderr


def test_a_checkout_that_measured_nothing_gets_one_line(workflow: Path, tmp_path: Path) -> None:
    res = crate_cli(workflow, "build", "--out", str(tmp_path))
    assert res.returncode == 1
    assert res.stderr.strip().splitlines() == [
        f"crate: nothing measured yet under {workflow}: run `./repro all` (or `snakemake --cores all`) first, "
        "then archive"
    ]
    assert not list(tmp_path.glob("*.zip"))


def evil_parameters(crate: Path, out: Path, marker: Path, elsewhere: Path) -> Path:
    """The crate with every executed notebook's recorded papermill
    parameters poisoned: a parameter name that papermill would write as
    code, and outputs and tables pointing outside the checkout."""
    replace = {}
    with zipfile.ZipFile(crate) as z:
        for name in z.namelist():
            if name.startswith("results/notebooks/") and name.endswith(".ipynb"):
                nb = json.loads(z.read(name))
                params = nb["metadata"]["papermill"]["parameters"]
                params[f"x = 1\nimport pathlib; pathlib.Path({str(marker)!r}).write_text('ran')\ny"] = 1
                params.update(
                    figure_dir=str(elsewhere / "figures"),
                    numbers_out=str(elsewhere / "numbers.json"),
                    manifest_out=str(elsewhere / "manifest.json"),
                )
                params.update({k: "/etc/passwd" for k in params if k.endswith("_table")})
                replace[name] = json.dumps(nb).encode()
    assert replace
    return craft(crate, out, replace=replace)


def test_a_fresh_copy_rebuilds_the_paper_from_the_crate_number_for_number(smoke_crate: Path, tmp_path: Path) -> None:
    # The crate's notebooks recorded poisoned parameters: re-analysis builds
    # its own, so none of it runs and nothing is written outside the checkout.
    marker, elsewhere = tmp_path / "pwned", tmp_path / "elsewhere"
    smoke_crate = evil_parameters(smoke_crate, tmp_path / "poisoned.crate.zip", marker, elsewhere)
    fresh = copy_workflow(tmp_path / "fresh")
    # A clone of its own commit, which is not the one the crate recorded.
    for git in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"]):
        subprocess.run(["git", *git], cwd=fresh, check=True, capture_output=True)
    res = module_cli("iolab.archive.reanalyse", fresh, str(smoke_crate), timeout=1200)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "numbers, identical to the crate's" in res.stdout
    assert (fresh / "paper" / "paper.pdf").stat().st_size > 10_000
    rebuilt = json.loads((fresh / "paper" / "generated" / "numbers.json").read_text())
    note = rebuilt.pop("reanalysis_note")["text"]
    with zipfile.ZipFile(smoke_crate) as z:
        assert json.loads(z.read("paper/generated/numbers.json")) == rebuilt
    # The paper's first page says whose code re-analysed which run.
    assert note.startswith("Re-analysed from an archived run measured at an unrecorded commit, with the code of")
    first_page = subprocess.run(
        ["pdftotext", "-l", "1", str(fresh / "paper" / "paper.pdf"), "-"], capture_output=True, text=True, check=True
    ).stdout
    assert "Re-analysed from an archived run" in " ".join(first_page.split())
    assert not marker.exists() and not elsewhere.exists()
    # Nothing was measured: the only raw files are the crate's.
    assert not list((fresh / "native").glob("build/cost-probe"))
    # A second run in the same checkout would mix two runs: refused, nothing lost.
    again = module_cli("iolab.archive.reanalyse", fresh, str(smoke_crate))
    assert again.returncode == 1 and "re-analyse in a fresh clone" in again.stderr


def test_zenodo_metadata_is_derived_from_the_citation_file() -> None:
    res = crate_cli(REPO, "zenodo", "--check")
    assert res.returncode == 0, res.stderr
    cff = yaml.safe_load((REPO / "CITATION.cff").read_text())
    zenodo = json.loads((REPO / ".zenodo.json").read_text())
    assert zenodo["title"] == cff["title"] and zenodo["license"] == cff["license"].lower()
    assert [c["name"] for c in zenodo["creators"]] == [a["name"] for a in cff["authors"]]


def test_each_figure_identity_in_the_paper_is_recomputed_from_the_crate(
    smoke_crate: Path, smoke_run: tuple[Path, object]
) -> None:
    wd, _ = smoke_run
    res = crate_cli(REPO, "figure-ids", str(smoke_crate))
    assert res.returncode == 0, res.stdout + res.stderr
    manifest = json.loads((wd / "paper" / "figures" / "manifest.json").read_text())
    lines = res.stdout.strip().splitlines()
    assert len(lines) == len(manifest["figures"]) and all(line.endswith("matches the paper") for line in lines)
    text = subprocess.run(
        ["pdftotext", str(wd / "paper" / "paper.pdf"), "-"], capture_output=True, text=True, check=True
    ).stdout
    for name, fig in manifest["figures"].items():
        assert f"identity {fig['id']}" in text, name


def test_compare_marks_only_differences_the_intervals_support() -> None:
    from iolab.archive import compare

    def run(name: str, value: float, low: float, high: float) -> compare.Run:
        return compare.Run(
            name,
            {
                "w_send_ns": {"value": value, "ci95": [low, high]},
                "s_getppid_ns": {"value": 100.0, "ci95": [90.0, 110.0]},
            },
            {"nodes": {}},
        )

    rows = {r["key"]: r for r in compare.quantities([run("a", 3000, 2900, 3100), run("b", 3300, 3150, 3400)])}
    assert rows["w_send_ns"]["differs"] and not rows["s_getppid_ns"]["differs"]
    # Overlapping intervals, or one without bounds, support no difference.
    assert not compare.disjoint([1.0, 2.0], [2.0, 3.0]) and not compare.disjoint([1.0, 2.0], None)
    assert not compare.disjoint([1.0, float("inf")], [5.0, 6.0])
    # The figures' row labels drop what every key of a question shares.
    assert compare.short_labels(
        [{"key": "echo_epoll_c50_server_ns_per_request"}, {"key": "echo_go_net_c50_server_ns_per_request"}]
    ) == ["epoll", "go_net"]


def test_compare_two_real_crates_side_by_side(smoke_crate: Path, tmp_path: Path) -> None:
    # The same run archived twice compares equal in every number; the
    # machines table names the node's CPU and kernel.
    copy = tmp_path / "again.crate.zip"
    copy.write_bytes(smoke_crate.read_bytes())
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "iolab.archive.compare",
            str(smoke_crate),
            str(copy),
            "--figures",
            str(tmp_path / "fig"),
        ],
        cwd=REPO,
        env=tool_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stderr
    assert "## Machines" in res.stdout and "| local |" in res.stdout
    assert re.search(r"\n(\d+) numbers in every crate; 0 differ", res.stdout)
    assert "Flips (reproduced in one run, not reproduced in another): 0" in res.stdout
    assert (tmp_path / "fig" / "compare_cost_model_terms.svg").exists()
    bad = subprocess.run(
        [sys.executable, "-m", "iolab.archive.compare", str(smoke_crate), str(REPO / "README.md")],
        cwd=REPO,
        env=tool_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert bad.returncode == 1 and "README.md: not a readable zip" in bad.stderr


@pytest.mark.full
def test_the_shipped_reference_run_becomes_a_run_that_archives_and_compares(reference_crate: Path) -> None:
    fresh = reference_crate.parent.parent
    # Its numbers are the ones the notebooks give by hand on the same data.
    record = json.loads((REPO / "tests" / "data" / "reference_numbers.json").read_text())
    numbers = json.loads((fresh / "paper" / "generated" / "numbers.json").read_text())
    assert numbers["w_send_ns"]["value"] == pytest.approx(record["cost_model"]["w_send_ns"]["value"], rel=1e-9)
    assert crate_cli(fresh, "verify", str(reference_crate)).returncode == 0


def test_compare_sets_each_number_against_the_first_as_a_ratio() -> None:
    from iolab.archive import compare

    def run(name: str, reps: dict[str, list[float]]) -> compare.Run:
        numbers = {}
        for key, values in reps.items():
            low, high = stats.median_ci(values)
            numbers[key] = {"value": float(np.median(values)), "ci95": [low, high], "reps": values}
        return compare.Run(name, numbers, {"nodes": {}})

    base = [100.0, 103.0, 97.0, 101.0, 99.0, 104.0]
    a = run("a", {"shifted_ns": base, "same_ns": base, "noisy_ns": base})
    b = run(
        "b",
        {
            "shifted_ns": [v * 1.06 for v in base],  # intervals overlap, the ratio's excludes 1
            "same_ns": [v * 1.001 for v in base],
            "noisy_ns": [60.0, 170.0, 95.0, 140.0, 80.0, 120.0],
        },
    )
    rows = {r["key"]: r for r in compare.quantities([a, b])}
    assert rows["shifted_ns"]["says"] == ["differs"] and not rows["shifted_ns"]["differs"]
    assert rows["same_ns"]["says"] == ["equivalent"]
    assert rows["noisy_ns"]["says"] == [""]
    assert rows["shifted_ns"]["ratios"][0].value == pytest.approx(1.06)
    text = compare.report([a, b])
    assert "1 differ (the interval excludes 1), 1 are equivalent within ±10 %" in text
    # A crate without repetitions gets no ratio, rather than a made-up one.
    bare = compare.Run("c", {"same_ns": {"value": 100.0, "ci95": [97.0, 103.0]}}, {"nodes": {}})
    assert compare.quantities([bare, b])[0]["ratios"] == [None]


def test_compare_names_the_fields_of_the_comparison_key_that_differ() -> None:
    from iolab.archive import compare

    def run(name: str, kernel: str, echo: str) -> compare.Run:
        facts = {"cpu_model": "AMD EPYC", "cpus": 2, "kind": "vm", "kernel": kernel, "toolchain": {"liburing": "2.3"}}
        return compare.Run(name, {}, {"nodes": {"local": facts}}, {"echo": echo, "syscall": "s1"})

    same = [run("a", "6.18", "e1"), run("b", "6.18", "e1")]
    assert compare.key_differences(same) == []
    assert "These runs share one comparison key" in compare.report(same)
    other = [run("a", "6.18", "e1"), run("b", "6.12", "e2")]
    assert compare.key_differences(other) == ["node local: kernel", "settings: echo"]
    text = compare.report(other)
    assert "differ in 2 field(s) of the comparison key" in text and "| node local: kernel | 6.18 | 6.12 |" in text


def test_compare_marks_what_was_measured_or_analysed_with_other_code(tmp_path: Path) -> None:
    from iolab.archive import compare

    wd = copy_workflow(tmp_path / "wd")
    today = {e: measuring_digest(e, wd) for e in ("syscall", "echo")}
    run = compare.Run("a", {}, {"nodes": {}}, {}, {"measured": today, "analysed": "not-today"})
    assert compare.stale(run, wd) == ["analysed"]
    # An edit to the probes' code marks the cost probes, not the echo servers.
    probe = wd / "native" / "probes" / "syscall_mode.c"
    probe.write_text(probe.read_text() + "/* edited */\n")
    assert compare.stale(run, wd) == ["measured: syscall", "analysed"]
    assert compare.stale(compare.Run("b", {}, {"nodes": {}}), wd) == ["unknown"]
    text = "\n".join(compare.code_section([run], wd))
    assert "measured with other code than this checkout's: syscall" in text


def test_the_store_indexes_each_crate_once_and_refuses_a_changed_one(smoke_crate: Path, tmp_path: Path) -> None:
    from iolab.archive import store
    from iolab.archive.untrusted import CrateError

    db = tmp_path / "store.sqlite"
    assert store.add(db, smoke_crate) == store.ADDED
    assert store.add(db, smoke_crate) == "already held, unchanged"  # the same crate again: nothing changes
    # The same run zipped again (other bytes, the same raw files): one run.
    rezipped = tmp_path / "rezipped.crate.zip"
    with (
        zipfile.ZipFile(smoke_crate) as src,
        zipfile.ZipFile(rezipped, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as dst,
    ):
        for info in reversed(src.infolist()):
            dst.writestr(info.filename, src.read(info))
    assert sha256(rezipped) != sha256(smoke_crate)
    said = store.add(db, rezipped)
    assert said == f"the same run as {smoke_crate.name}, held once, unchanged", said
    # A copy whose raw files were all edited (checksums recomputed) is still
    # that run: its launch, first start and findings give it away.
    copy = craft(smoke_crate, tmp_path / "copy.crate.zip", replace=raw_copy(smoke_crate, "c"))
    assert store.add(db, copy) == f"the same run as {smoke_crate.name}, held once, unchanged"
    (held,) = store.runs(db)
    with zipfile.ZipFile(smoke_crate) as z:
        root = next(e for e in json.loads(z.read("ro-crate-metadata.json"))["@graph"] if e["@id"] == "./")
    # The smoke run is a copy without .git: its crate says "unknown", and so does the store.
    assert held.git_commit == root["version"] and held.numbers > 100 and held.verdicts > 0
    # A crate whose member no longer matches its recorded SHA-256 is refused; the store keeps what it had.
    changed = tmp_path / "changed.crate.zip"
    with zipfile.ZipFile(smoke_crate) as src, zipfile.ZipFile(changed, "w") as dst:
        for info in src.infolist():
            data = src.read(info)
            dst.writestr(info, data + b" " if info.filename == "paper/generated/numbers.json" else data)
    with pytest.raises(CrateError):
        store.add(db, changed)
    assert [r.crate_sha256 for r in store.runs(db)] == [held.crate_sha256]
    # The store is rebuilt from the crates alone, to the same contents.
    res = subprocess.run(
        [sys.executable, "-m", "iolab.archive.store", "--db", str(db), "rebuild", str(smoke_crate), str(changed)],
        cwd=REPO,
        env=tool_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 1 and "changed.crate.zip: refused:" in res.stderr, res.stderr
    assert store.runs(db) == [held]


def test_a_crate_names_the_measuring_code_only_where_git_shows_it_unchanged(tmp_path: Path) -> None:
    # Raw files measured at another commit (re-analysed, as the shipped
    # reference data is) carry today's digest only if their experiment's
    # measuring sources did not change since; else the crate says why not.
    from iolab.archive.contents import measured_with_todays_code

    wd = copy_workflow(tmp_path / "wd")

    def git(*args: str) -> str:
        who = ["-c", "user.name=iolab tests", "-c", "user.email=tests@iolab.invalid"]
        res = subprocess.run(["git", "-C", str(wd), *who, *args], capture_output=True, text=True, check=True)
        return res.stdout.strip()

    git("init", "-q")
    git("add", "-A")
    git("commit", "-qm", "measured here")
    measured_at = git("rev-parse", "HEAD")
    (wd / "README.md").write_text((wd / "README.md").read_text() + "\nedited\n")
    git("commit", "-qam", "docs only")
    assert measured_with_todays_code(wd, "syscall", {measured_at}) is None
    probe = wd / "native" / "probes" / "syscall_mode.c"
    probe.write_text(probe.read_text() + "/* edited */\n")
    git("commit", "-qam", "the probe changed")
    assert "changed since" in str(measured_with_todays_code(wd, "syscall", {measured_at}))
    assert measured_with_todays_code(wd, "echo", {measured_at}) is None  # the echo servers did not change
    assert "is not in this checkout" in str(measured_with_todays_code(wd, "echo", {"0" * 40}))
    assert "record no commit" in str(measured_with_todays_code(wd, "echo", {None}))


def test_an_old_store_asks_to_be_rebuilt_and_environments_diff_field_by_field(tmp_path: Path) -> None:
    import sqlite3

    from iolab.archive import compare, store

    db = tmp_path / "store.sqlite"
    with sqlite3.connect(db) as conn:  # the first store's runs table, without the columns added since
        conn.execute("CREATE TABLE runs (crate_sha256 TEXT PRIMARY KEY, file TEXT)")
    with pytest.raises(store.StoreError, match=r"rebuild it from the crates, ./repro store rebuild"):
        store.records(db)
    res = subprocess.run(
        [sys.executable, "-m", "iolab.archive.store", "--db", str(db), "list"],
        cwd=REPO,
        env=tool_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 1 and res.stderr.count("\n") == 1 and "older iolab" in res.stderr

    def run(kernel: str, liburing: str | None) -> compare.Run:
        tool = {"liburing": liburing} if liburing else {}
        return compare.Run("r", {}, {"python": "3.11.2", "nodes": {"local": {"kernel": kernel, "toolchain": tool}}})

    assert compare.environment_diff(run("6.18", "2.3"), run("6.18", "2.3")) == []
    # Settings diff by option, not by digest.
    a = compare.Run("a", {}, {}, setting_values={"echo": {"duration_s": 1, "sizes": [128]}})
    b = compare.Run("b", {}, {}, setting_values={"echo": {"duration_s": 2, "sizes": [128]}, "nop": {"n": 4}})
    assert compare.settings_diff(a, b) == [("echo / duration_s", "1", "2"), ("nop / n", "(none)", "4")]
    assert compare.environment_diff(run("6.12", "2.3"), run("6.18", None)) == [
        ("nodes / local / kernel", "6.12", "6.18"),
        ("nodes / local / toolchain / liburing", "2.3", "(none)"),
    ]
