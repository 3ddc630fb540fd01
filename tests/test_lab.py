"""Exploring in Jupyter, in a real browser: `./repro lab` starts JupyterLab on
loopback with a token; Debian's Chromium, driven headless through Selenium
and Debian's chromedriver, opens every notebook, runs all its cells and
finds no error and an image in every figure cell; a paired .py file opens
as a notebook through jupytext; the Snakemake HTML report shows every
figure. The test starts the server itself and stops it, leaving nothing
running."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser_support import HAVE_CHROMIUM, chromium
from conftest import copy_workflow, default_sigint, snakemake, tool_env
from stop_on_interrupt import descendants

from iolab import paths
from iolab.registry import NOTEBOOKS as REGISTERED_NOTEBOOKS

pytestmark = pytest.mark.skipif(not HAVE_CHROMIUM, reason="Debian's chromium and chromium-driver are not installed")
NOTEBOOKS = list(REGISTERED_NOTEBOOKS)
WAIT = 240  # seconds a notebook may take to run all its cells in the browser


def repro_env(workflow: Path) -> dict[str, str]:
    """./repro in a workflow copy, reusing this environment (tests/test_interrupt.py)."""
    from test_interrupt import repro_env as env

    return env(workflow)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """`./repro lab` in a copy of the workflow; yields its URL and token."""
    wd = copy_workflow(tmp_path_factory.mktemp("lab") / "iolab")
    env = repro_env(wd)
    started = time.monotonic()
    # Its log goes to a file: JupyterLab logs every kernel and request, and a
    # pipe nobody drains would fill up and block the server. SIGINT's default
    # restored, as in a terminal: a suite started in the background inherits
    # it ignored, and the server then never saw the Ctrl-C below.
    log = wd.parent / "lab.log"
    with log.open("w") as sink:
        proc = subprocess.Popen(
            ["./repro", "lab"],
            cwd=wd,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
            preexec_fn=default_sigint,
        )
    deadline = time.monotonic() + 120
    while not (
        m := re.search(r"^repro: JupyterLab on (http://127\.0\.0\.1:(\d+)/lab\?token=(\S+))", log.read_text(), re.M)
    ):
        assert proc.poll() is None and time.monotonic() < deadline, f"./repro lab printed no URL: {log.read_text()}"
        time.sleep(0.1)
    url, port, token = m.group(1), int(m.group(2)), m.group(3)
    base = f"http://127.0.0.1:{port}"
    while True:
        try:
            with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=5) as r:
                if r.status == 200:
                    break
        except OSError:
            pass
        assert proc.poll() is None and time.monotonic() < deadline, "JupyterLab did not come up"
        time.sleep(0.2)
    info = {
        "dir": wd,
        "base": base,
        "token": token,
        "url": url,
        "proc": proc,
        "ready_seconds": time.monotonic() - started,
    }
    try:
        yield info
    finally:
        os.killpg(proc.pid, signal.SIGINT)  # jupyter asks to confirm a single Ctrl-C
        time.sleep(0.5)
        os.killpg(proc.pid, signal.SIGINT)
        stopped = True
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            stopped = False
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        left = subprocess.run(["pgrep", "-s", str(proc.pid)], capture_output=True, text=True).stdout.split()
        assert left == [], f"processes left running: {left}"
        assert stopped, f"JupyterLab did not stop within 30 s of Ctrl-C twice: {log.read_text()[-2000:]}"


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    with chromium(tmp_path_factory.mktemp("chromium")) as driver:
        yield driver


def wait_for(driver, condition, timeout: float = WAIT, what: str = ""):
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    # JupyterLab re-renders lists while they settle: a stale element means "look again".
    return WebDriverWait(
        driver, timeout, poll_frequency=0.5, ignored_exceptions=(StaleElementReferenceException,)
    ).until(condition, message=what)


def run_all(driver, lab: dict, path: str) -> dict:
    """Open ``path`` (a notebook), run all cells; returns what the page showed."""
    driver.get(f"{lab['base']}/lab/tree/{path}?token={lab['token']}&reset")
    return run_open_notebook(driver, path)


def run_open_notebook(driver, path: str) -> dict:
    """Run all cells of the notebook the page shows; what each code cell showed."""
    from selenium.webdriver.common.by import By

    panel = wait_for(
        driver,
        lambda d: d.find_elements(By.CSS_SELECTOR, ".jp-NotebookPanel:not(.lm-mod-hidden)"),
        120,
        f"{path} did not open as a notebook",
    )[0]
    # The kernel must be idle before running.
    wait_for(
        driver,
        lambda d: "(ipykernel) | Idle" in d.find_element(By.ID, "jp-main-statusbar").text,
        120,
        "kernel did not start",
    )
    menu = next(m for m in driver.find_elements(By.CSS_SELECTOR, ".lm-MenuBar-itemLabel") if m.text == "Run")
    menu.click()
    wait_for(
        driver,
        lambda d: d.find_elements(By.CSS_SELECTOR, "li.lm-Menu-item[data-command='runmenu:run-all']"),
        10,
        "no Run All Cells item",
    )[0].click()

    def done(d) -> bool:
        prompts = [p.text.strip() for p in panel.find_elements(By.CSS_SELECTOR, ".jp-CodeCell .jp-InputPrompt")]
        return bool(prompts) and all(re.fullmatch(r"\[\d+\]:", p) for p in prompts)

    wait_for(driver, done, WAIT, f"{path}: cells did not all run")
    cells = panel.find_elements(By.CSS_SELECTOR, ".jp-CodeCell")
    shown = []
    for cell in cells:
        source = cell.find_element(By.CSS_SELECTOR, ".jp-InputArea-editor").text
        errors = [
            o.text
            for o in cell.find_elements(By.CSS_SELECTOR, ".jp-OutputArea-output")
            if "Traceback" in o.text or re.search(r"^\w+Error\b", o.text, re.M)
        ]
        images = cell.find_elements(By.CSS_SELECTOR, ".jp-OutputArea-output img")
        # A figure cell: one that shows a figure unconditionally (a figure
        # drawn only when the data has two node kinds is inside an `if`).
        shown.append(
            {"figure": re.search(r"^plt\.show\(\)", source, re.M) is not None, "errors": errors, "images": len(images)}
        )
    return {"cells": shown}


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_every_notebook_runs_in_the_browser(lab: dict, browser: object, notebook: str) -> None:
    result = run_all(browser, lab, f"notebooks/{notebook}.ipynb")
    assert all(not c["errors"] for c in result["cells"]), [c["errors"] for c in result["cells"] if c["errors"]]
    figures = [c for c in result["cells"] if c["figure"]]
    assert figures and all(c["images"] >= 1 for c in figures), result


def test_a_paired_py_file_opens_as_a_notebook_through_jupytext(lab: dict, browser: object) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    driver = browser
    driver.get(f"{lab['base']}/lab/tree/notebooks?token={lab['token']}&reset")
    item = wait_for(
        driver,
        lambda d: [
            i for i in d.find_elements(By.CSS_SELECTOR, ".jp-DirListing-item") if i.text.strip().startswith("claims.py")
        ],
        60,
        "no claims.py listed",
    )[0]
    ActionChains(driver).context_click(item).perform()
    open_with = wait_for(
        driver,
        lambda d: [m for m in d.find_elements(By.CSS_SELECTOR, "li.lm-Menu-item") if m.text.strip() == "Open With"],
        10,
        "no Open With",
    )[0]
    ActionChains(driver).move_to_element(open_with).perform()
    wait_for(
        driver,
        lambda d: [m for m in d.find_elements(By.CSS_SELECTOR, "li.lm-Menu-item") if "Jupytext Notebook" in m.text],
        10,
        "jupytext offers no notebook view",
    )[0].click()
    result = run_open_notebook(driver, "notebooks/claims.py")
    assert all(not c["errors"] for c in result["cells"])
    assert any(c["figure"] and c["images"] for c in result["cells"])


def test_the_html_report_shows_every_figure(browser: object, smoke_copy: Path) -> None:
    from selenium.webdriver.common.by import By

    wd = smoke_copy
    res = snakemake(wd, "--report", "report.html", "--configfile", "config/overlays/smoke.yaml")
    assert res.returncode == 0, res.stderr[-3000:]
    figures = json.loads((wd / "paper" / "figures" / "manifest.json").read_text())["figures"]
    browser.get((wd / "report.html").as_uri())
    text = wait_for(browser, lambda d: d.find_element(By.TAG_NAME, "body").text, 60, "report did not render")
    for category in ("Cost model", "Claims re-tested", "Echo servers", "MPI collectives"):
        assert category in text, category
    page = browser.page_source
    missing = [name for name in figures if f"{name}.png" not in page]
    assert missing == []
    # Each figure carries its caption (iolab.paths.caption).
    first = paths.caption("syscall_cost").read_text().split(". ")[0]
    assert first in page, first


# Run as another local user: every process's command line (which /proc shows
# to all), the server's environment (which it must not), and the API without
# the token. Debian's python3: the environment's lies under /root.
AS_NOBODY = r"""
import json, os, sys, urllib.error, urllib.request
token, base, *pids = sys.stdin.read().split()  # never in this process's own argv
seen = []
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            if token.encode() in f.read():
                seen.append(pid)
    except OSError:
        pass
environ = []
for pid in pids:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            environ.append((pid, token.encode() in f.read()))
    except OSError:
        pass
try:
    status = urllib.request.urlopen(f"{base}/api/status", timeout=10).status
except urllib.error.HTTPError as e:
    status = e.code
print(json.dumps({"uid": os.getuid(), "cmdline": seen, "environ": environ, "status": status}))
"""


def cmdline(pid: str) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def test_no_other_local_user_reads_the_token(lab: dict) -> None:
    # A kernel too: its process inherits the server's environment.
    req = urllib.request.Request(f"{lab['base']}/api/kernels?token={lab['token']}", data=b"{}", method="POST")
    with urllib.request.urlopen(req, timeout=60) as r:
        kernel = json.loads(r.read())["id"]
    try:
        deadline = time.monotonic() + 60
        # The server and everything under it (a kernel starts a session of its own).
        while True:
            pids = [str(p) for p in [lab["proc"].pid, *descendants(lab["proc"].pid)]]
            if any(b"ipykernel" in cmdline(p) for p in pids):
                break
            assert time.monotonic() < deadline, f"the kernel did not start: {pids}"
            time.sleep(0.2)
        res = subprocess.run(
            ["/usr/bin/python3", "-c", AS_NOBODY],
            input=" ".join([lab["token"], lab["base"], *pids]),
            user="nobody",
            group="nogroup",
            extra_groups=[],
            capture_output=True,
            text=True,
            timeout=60,
            cwd="/",
        )
        assert res.returncode == 0, res.stderr
        seen = json.loads(res.stdout)
        assert seen["uid"] != 0
        # No process shows the token in its command line; the server's and the
        # kernel's environments are not readable; the API refuses without it.
        assert seen["cmdline"] == [], f"the token is in the command line of {seen['cmdline']}"
        assert seen["environ"] == [], seen["environ"]
        assert seen["status"] == 403, seen
    finally:
        req = urllib.request.Request(f"{lab['base']}/api/kernels/{kernel}?token={lab['token']}", method="DELETE")
        urllib.request.urlopen(req, timeout=30).close()


def test_lab_refuses_to_drop_its_token_or_leave_loopback(tmp_path: Path) -> None:
    wd = copy_workflow(tmp_path / "iolab")
    for bad in ("--IdentityProvider.token=", "--ip=0.0.0.0"):
        res = subprocess.run(
            ["./repro", "lab", bad], cwd=wd, env=repro_env(wd), capture_output=True, text=True, timeout=60
        )
        assert res.returncode != 0
        assert (
            res.stderr.strip()
            .splitlines()[-1]
            .startswith("repro: repro lab sets the address (127.0.0.1) and a fresh token itself")
        )
    assert shutil.which("jupyter", path=tool_env()["PATH"]) is not None
