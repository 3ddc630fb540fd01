"""The published site of a store of runs (./repro publish), in a real
browser: Debian's Chromium opens it from the file system and through
`python -m http.server` on 127.0.0.1, follows every link, finds every chart
drawn by the bundled Vega, and no request leaves the machine. The store
holds three crates: the shipped reference run, a smoke run, and that smoke
run archived again at a commit of its own.

The crawler's checks are tested on a sabotaged copy of the site: a page
that loads a script from a CDN, a broken link and a chart whose spec does
not parse must each be reported."""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urldefrag, urljoin

import pytest
from browser_support import HAVE_CHROMIUM, chromium, requested_urls
from conftest import crate_cli, module_cli, tool_env

pytestmark = pytest.mark.skipif(not HAVE_CHROMIUM, reason="Debian's chromium and chromium-driver are not installed")
LOCAL_SCHEMES = ("data:", "blob:", "about:", "chrome:", "chrome-extension:")


@pytest.fixture(scope="module")
def commit_crate(smoke_run: tuple[Path, subprocess.CompletedProcess[str]], tmp_path_factory: Any) -> Path:
    """The smoke run archived from a git checkout of its own: a crate of
    another commit, but the same measurements (its raw files), so the same run."""
    wd, res = smoke_run
    assert res.returncode == 0, "the shared smoke run failed; see test_smoke_run_end_to_end"
    dest = tmp_path_factory.mktemp("commit") / "iolab"
    shutil.copytree(wd, dest, symlinks=True)
    for args in (
        ["init", "-q"],
        ["add", "-A"],
        ["-c", "user.name=iolab tests", "-c", "user.email=tests@iolab.invalid", "commit", "-qm", "a later commit"],
    ):
        subprocess.run(["git", "-C", str(dest), *args], check=True, capture_output=True, timeout=120)
    built = crate_cli(dest, "build", "--out", str(dest / "archive"))
    assert built.returncode == 0, built.stderr
    (crate,) = (dest / "archive").glob("*.crate.zip")
    assert "unknown" not in crate.name
    return crate


@pytest.fixture(scope="module")
def site(
    smoke_run: tuple[Path, subprocess.CompletedProcess[str]],
    smoke_crate: Path,
    reference_crate: Path,
    commit_crate: Path,
    tmp_path_factory: Any,
) -> tuple[Path, subprocess.CompletedProcess[str], subprocess.CompletedProcess[str]]:
    """The site of the three crates: its folder, publish's run and the store's adding them."""
    where = tmp_path_factory.mktemp("site")
    # A cluster study of the smoke run's one node (iolab.archive.study), to
    # give the site its study page.
    studied = module_cli("iolab.archive.study", smoke_run[0], "--out", str(where / "smoke-study"))
    assert studied.returncode == 0, studied.stderr[-3000:]
    db = str(where / "store.sqlite")
    added = module_cli(
        "iolab.archive.store", where, "--db", db, "add", str(reference_crate), str(smoke_crate), str(commit_crate)
    )
    assert added.returncode == 0, added.stderr[-3000:]
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "iolab.archive.publish",
            "--db",
            db,
            "--out",
            str(where / "site"),
            "--study",
            str(where / "smoke-study"),
        ],
        env=tool_env(),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    return where / "site", res, added


@pytest.fixture(scope="module")
def served(site: tuple[Path, object, object]) -> Iterator[str]:
    """The site through python -m http.server on 127.0.0.1; its base URL."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", "--directory", str(site[0]), str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(base, timeout=2).close()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "http.server did not come up"
                time.sleep(0.1)
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture(scope="module")
def browser(tmp_path_factory: Any) -> Iterator[Any]:
    with chromium(tmp_path_factory.mktemp("chromium"), network_log=True) as driver:
        yield driver


def charts_drawn(driver: Any, timeout: float = 60) -> list[str]:
    """Wait until every chart on the page is drawn or failed; the problems."""
    deadline = time.monotonic() + timeout
    while True:
        state = driver.execute_script(
            "return Array.from(document.querySelectorAll('.chart')).map(e => "
            "e.dataset.error ? 'error: ' + e.dataset.error : "
            "e.querySelectorAll('svg .mark-symbol path').length > 0 ? 'drawn' : 'waiting')"
        )
        if "waiting" not in state or time.monotonic() > deadline:
            return [f"chart {i}: {s}" for i, s in enumerate(state) if s != "drawn"]
        time.sleep(0.2)


def crawl(driver: Any, start: str) -> tuple[list[str], int, int]:
    """Every page reachable from ``start`` by its links, opened in the
    browser: (problems, pages opened, charts drawn). A problem is a link
    that does not load, a chart not drawn, or a request outside the site."""
    origin = start.rsplit("/", 1)[0] + "/"
    requested_urls(driver)  # drop what came before
    queue, seen, problems, charts = [start], {start}, [], 0
    while queue:
        url = queue.pop(0)
        if not url.endswith(".html"):
            try:
                urllib.request.urlopen(url, timeout=10).close()
            except (urllib.error.URLError, OSError) as e:
                problems.append(f"{url}: {e}")
            continue
        driver.get(url)
        if driver.execute_script("return document.querySelector('main') === null"):
            problems.append(f"{url}: not a page of the site (no <main>): {driver.title!r}")
            continue
        drawn = charts_drawn(driver)
        problems += [f"{url}: {p}" for p in drawn]
        charts += driver.execute_script("return document.querySelectorAll('.chart').length") - len(drawn)
        links = driver.execute_script("return Array.from(document.querySelectorAll('a[href]')).map(a => a.href)")
        # The static images as the page was written (a drawn chart replaces
        # its image), for a reader without JavaScript: each must load.
        with urllib.request.urlopen(url, timeout=10) as f:
            images = re.findall(r'<img[^>]* src="([^"]+)"', f.read().decode())
        for href in [*links, *images]:
            target = urldefrag(urljoin(url, href))[0]
            if not target.startswith(origin):
                problems.append(f"{url}: links outside the site: {target}")
            elif target not in seen:
                seen.add(target)
                queue.append(target)
    outside = [u for u in requested_urls(driver) if not u.startswith(origin) and not u.startswith(LOCAL_SCHEMES)]
    problems += [f"a request left the site: {u}" for u in outside]
    return problems, len(seen), charts


def test_publish_writes_a_site_of_every_run_key_and_claim(
    site: tuple[Path, subprocess.CompletedProcess[str], subprocess.CompletedProcess[str]],
    smoke_crate: Path,
    commit_crate: Path,
) -> None:
    root, res, added = site
    assert re.search(r"wrote .*: (\d+) pages, (\d+) charts", res.stdout), res.stdout
    # The smoke run re-archived from another checkout holds the same raw
    # files: one run, held once, so its numbers count once in every timeline.
    assert f"store: {commit_crate.name}: the same run as {smoke_crate.name}, held once" in added.stderr, added.stderr
    runs = sorted((root / "runs").glob("*.html"))
    assert len(runs) == 2
    assert len(list((root / "diffs").glob("*.html"))) == 1  # every pair of runs
    # The reference run (another overlay, another kernel build) has a key of its own.
    keys = list((root / "keys").glob("*.html"))
    assert len(keys) == 2
    assert all("1 run(s) share this comparison key" in k.read_text() for k in keys)
    # The reference data was measured at commits whose code has changed:
    # drawn apart, and said so on its page.
    pages = [p.read_text() for p in runs]
    assert sum("measured with code its crate could not name" in p for p in pages) == 1
    # Each run page links its paper, copied from its crate.
    for page in runs:
        paper = re.search(r'href="([^"]+paper\.pdf)"', page.read_text())
        assert paper and (page.parent / paper.group(1)).read_bytes().startswith(b"%PDF")
    assert list((root / "claims").glob("*.html"))
    # The study's page, linked from the index: one node is no study.
    study = (root / "studies" / "smoke-study.html").read_text()
    assert "Cluster study over 1 node(s)" in study and "not independent occasions" in study
    assert 'href="studies/smoke-study.html"' in (root / "index.html").read_text()


def test_the_site_in_a_browser_over_http_links_all_resolve_and_charts_draw(served: str, browser: Any) -> None:
    problems, pages, charts = crawl(browser, served + "index.html")
    assert problems == []
    assert pages >= 12 and charts >= 20


def test_the_site_opened_from_the_file_system_draws_its_charts(site: tuple[Path, object, object], browser: Any) -> None:
    root = site[0]
    key = next((root / "keys").glob("*.html"))
    requested_urls(browser)
    browser.get(key.as_uri())
    assert charts_drawn(browser) == []
    assert all(u.startswith(("file:", *LOCAL_SCHEMES)) for u in requested_urls(browser))


def test_the_crawler_reports_a_request_off_the_machine_a_broken_link_and_an_undrawn_chart(
    site: tuple[Path, object, object], browser: Any, tmp_path: Path
) -> None:
    # The negative control of the three checks above.
    broken = tmp_path / "site"
    shutil.copytree(site[0], broken)
    index = broken / "index.html"
    index.write_text(
        index.read_text().replace(
            "</main>",
            '<script src="https://cdn.jsdelivr.net/npm/vega@5"></script><a href="runs/missing.html">gone</a>'
            '<img src="charts/missing.svg" alt="gone"></main>',
        )
    )
    key = next((broken / "keys").glob("*.html"))
    key.write_text(re.sub(r'(<script type="application/json" id="[^"]+">)\{', r"\1{oops", key.read_text(), count=1))
    problems, _, _ = crawl(browser, index.as_uri())
    assert any("a request left the site: https://cdn.jsdelivr.net" in p for p in problems), problems
    assert any("missing.html" in p for p in problems), problems
    assert any("charts/missing.svg" in p for p in problems), problems
    assert any("chart 0: error" in p for p in problems), problems
