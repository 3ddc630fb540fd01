"""Shared fixtures: a private copy of the workflow to run snakemake in, so
tests never touch the developer's data/raw or results/."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

# Ctrl-C stops the suite, leaving nothing running (tests/stop_on_interrupt.py).
pytest_plugins = ("stop_on_interrupt",)

REPO = Path(__file__).resolve().parent.parent


def load_benchmark(name: str) -> ModuleType:
    """benchmarks/<name>.py as a module (the benchmarks are scripts, not a
    package), registered under its name: a dataclass looks its module up."""
    spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


# Generated or environment-specific paths that a copy must not carry over.
IGNORED = {".venv", ".git", ".snakemake", "results", ".pytest_cache", "__pycache__", "report.html"}


def tool_env(extra_path: str | None = None) -> dict[str, str]:
    """Environment with this interpreter's bin dir first on PATH (the rules
    call python, papermill and jupytext by name)."""
    env = dict(os.environ)
    bindir = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join(p for p in (extra_path, bindir, env.get("PATH", "")) if p)
    env.pop("PYTHONPATH", None)
    return env


def default_sigint() -> None:
    """A child's preexec_fn: SIGINT's default, as in a terminal. A suite
    started in the background (`cmd &` in a script) inherits SIGINT ignored,
    and a process it starts would never see Ctrl-C."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def copy_workflow(dest: Path) -> Path:
    def ignore(directory: str, names: list[str]) -> set[str]:
        rel = Path(directory).relative_to(REPO)
        skip = {n for n in names if n in IGNORED}
        if rel == Path("."):
            # The checkout's own crates and store of runs (./repro archive).
            skip.add("archive")
        if rel == Path("data"):
            skip.add("raw")
        if rel == Path("native"):
            # build.before-coverage: where an outer `./repro coverage` keeps
            # the usual build while it runs (a copy must not look killed).
            skip |= {"build", "build.before-coverage"}
        if rel == Path("paper"):
            skip |= {"generated", "paper.pdf"}
        if rel == Path("paper/figures"):
            skip |= {n for n in names if n != ".gitkeep"}
        return skip

    shutil.copytree(REPO, dest, ignore=ignore, symlinks=True)
    return dest


def snakemake(
    workdir: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 900
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "snakemake", *args],
        cwd=workdir,
        env=env or tool_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--full",
        action="store_true",
        help="also run the release tier (tests marked `full`): the long stress "
        "matrix over every server preset and build",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The default tier leaves out tests marked ``full``; ``--full`` keeps them."""
    if config.getoption("--full"):
        return
    kept = [i for i in items if i.get_closest_marker("full") is None]
    if len(kept) != len(items):
        config.hook.pytest_deselected(items=[i for i in items if i.get_closest_marker("full")])
        items[:] = kept


@pytest.fixture
def workflow(tmp_path: Path) -> Path:
    """A fresh copy of the workflow (sources, config, reference data)."""
    return copy_workflow(tmp_path / "iolab")


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """One real smoke-overlay run end to end, shared by the tests that inspect it."""
    wd = copy_workflow(tmp_path_factory.mktemp("smoke") / "iolab")
    res = snakemake(wd, "--cores", "all", "--configfile", "config/overlays/smoke.yaml")
    return wd, res


def module_cli(module: str, wd: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """python -m ``module`` in ``wd``, with this environment's tools."""
    return subprocess.run(
        [sys.executable, "-m", module, *args], cwd=wd, env=tool_env(), capture_output=True, text=True, timeout=timeout
    )


def crate_cli(wd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """python -m iolab.archive.crate in ``wd``."""
    return module_cli("iolab.archive.crate", wd, *args)


@pytest.fixture(scope="session")
def smoke_crate(
    smoke_run: tuple[Path, subprocess.CompletedProcess[str]], tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """The shared smoke run, archived as a crate (./repro archive)."""
    wd, _ = smoke_run
    out = tmp_path_factory.mktemp("crate")
    res = crate_cli(wd, "build", "--out", str(out), "--overlay", "smoke")
    assert res.returncode == 0, res.stderr
    (crate,) = out.glob("iolab-*.crate.zip")
    assert res.stdout.startswith(f"wrote {crate}") or str(crate.name) in res.stdout
    # ./repro archive indexes its own crate, once per run: another crate of
    # this run (a test archived it first) is held already.
    assert re.search(r"(added it to|held once, unchanged: not added again to) the store of runs", res.stdout)
    return crate


@pytest.fixture(scope="session")
def reference_crate(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shipped reference data (data/reference), analysed as a run of its
    own in a fresh copy and archived: <copy>/archive/<crate>."""
    fresh = copy_workflow(tmp_path_factory.mktemp("reference") / "iolab")
    res = module_cli("iolab.archive.reanalyse", fresh, "--raw-root", "data/reference", timeout=1200)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "numbers, built from raw files alone" in res.stdout
    built = crate_cli(fresh, "build", "--out", str(fresh / "archive"))
    assert built.returncode == 0, built.stderr
    (crate,) = (fresh / "archive").glob("*.crate.zip")
    return crate


@pytest.fixture
def smoke_copy(smoke_run: tuple[Path, subprocess.CompletedProcess[str]], tmp_path: Path) -> Path:
    """A private copy of the finished smoke run (timestamps and snakemake's
    metadata kept), for tests that re-run, edit or report: they never touch
    the shared run or each other's logs."""
    wd, res = smoke_run
    assert res.returncode == 0, "the shared smoke run failed; see test_smoke_run_end_to_end"
    dest = tmp_path / "iolab"
    shutil.copytree(wd, dest, symlinks=True)
    return dest


@pytest.fixture(scope="session")
def native_build() -> Path:
    """The optimised and the sanitizer builds of the native programs."""
    for extra in ([], ["SAN=1"]):
        res = subprocess.run(["make", "-C", str(REPO / "native"), *extra], capture_output=True, text=True, timeout=600)
        assert res.returncode == 0, res.stdout + res.stderr
    return REPO / "native" / "build"


@pytest.fixture(scope="session")
def mpi_build() -> Path:
    """The optimised and the sanitizer builds of the MPI probes only."""
    for extra in ([], ["SAN=1"]):
        res = subprocess.run(
            ["make", "-C", str(REPO / "native"), "mpi", *extra], capture_output=True, text=True, timeout=600
        )
        assert res.returncode == 0, res.stdout + res.stderr
    return REPO / "native" / "build"


def write_sshd_files(d: Path, settings: str) -> Path:
    """Host and user keys, authorized_keys and an sshd_config (``settings``
    plus key-only root login) in ``d`` for a test's own sshd; the config's path."""
    for name in ("host_key", "user_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / name)], check=True)
    (d / "authorized_keys").write_text((d / "user_key.pub").read_text())
    (d / "sshd_config").write_text(
        f"{settings}HostKey {d / 'host_key'}\nAuthorizedKeysFile {d / 'authorized_keys'}\n"
        "PermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
        "UsePAM no\nStrictModes no\n"
    )
    Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege-separation directory
    return d / "sshd_config"


def others_can_enter(path: Path) -> bool:
    """Whether a user other than the owner may pass through every folder
    above ``path`` (a test acting as uid 65534 runs this checkout's Python
    environment; a clone under /root, mode 0700, is closed to it)."""
    import stat

    return all(p.stat().st_mode & stat.S_IXOTH for p in [path, *path.parents])
