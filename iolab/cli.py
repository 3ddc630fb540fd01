"""./repro's commands: one command-line interface. ./repro, a thin bash
bootstrap, makes the Python environment and hands its arguments here:

    python -m iolab.cli COMMAND [ARGS]...        (what ./repro COMMAND runs)

A command installs the system packages it needs (iolab.packages) and no
more. The ones that archive, compare and publish runs hand their arguments
to the module that owns them, whose own parser prints their usage, so no
option is declared twice. Every command's --help is in docs/commands.md
(python -m iolab.clidoc writes it), which ./repro prints without Python.

Also the argument types the package's commands and benchmarks share: a
comma-separated list on the command line ("0.5,1,2") as a typed list.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import click

from . import packages, paths

PROG = "./repro"


def names(text: str) -> list[str]:
    """``a,b,,c`` -> ["a", "b", "c"] (empty items dropped)."""
    return [x for x in text.split(",") if x]


def ints(text: str) -> list[int]:
    """``50,500`` -> [50, 500]."""
    return [int(x) for x in names(text)]


def floats(text: str) -> list[float]:
    """``0.5,1`` -> [0.5, 1.0]."""
    return [float(x) for x in names(text)]


# --- the groups of commands --------------------------------------------------

SECTIONS = {
    "run": "Run the pipeline here",
    "explore": "Explore",
    "runs": "Archive, compare and cite runs",
    "develop": "Set up and develop",
}


class Ordered(click.Group):
    """A group that lists its commands in the order they are declared."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)


class Commands(Ordered):
    """./repro's group: its commands listed in sections."""

    section_of: dict[str, str]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.section_of = {}

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        for key, title in SECTIONS.items():
            rows = [
                (name, cmd.get_short_help_str(limit=formatter.width - 14))
                for name, cmd in self.commands.items()
                if self.section_of.get(name) == key
            ]
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)


@click.group(cls=Commands, context_settings={"max_content_width": 100, "help_option_names": ["-h", "--help"]})
def cli() -> None:
    """iolab: measure this machine, fit the sources' models, re-test their claims and build the paper.

    Each command installs what it needs (Debian 12: apt as root, or through sudo) and no more;
    COMMAND --help prints its usage and installs and runs nothing. Every command's usage is in
    docs/commands.md.
    """


def command(section: str, name: str | None = None, group: click.Group = cli, **kwargs: Any) -> Any:
    """A command of ``group``, listed in ``section``."""

    def decorate(f: Any) -> click.Command:
        cmd = group.command(name, **kwargs)(f)
        if isinstance(group, Commands):
            group.section_of[cmd.name or f.__name__] = section
        return cmd

    return decorate


# Arguments handed on whole (to Snakemake, pytest, Jupyter): none is ours.
PASS_ON: dict[str, Any] = {"ignore_unknown_options": True, "allow_interspersed_args": False}


def install(wanted: Sequence[str], why: str) -> None:
    try:
        packages.install(wanted, why)
    except packages.InstallError as e:
        click.echo(f"repro: {e}", err=True)
        sys.exit(1)


def run_here(argv: Sequence[str], env: dict[str, str] | None = None) -> NoReturn:
    """Replace this process with ``argv``, run in the repository's root."""
    os.chdir(paths.REPO)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execvpe(argv[0], list(argv), env if env is not None else dict(os.environ))


def python(*args: str) -> list[str]:
    return [sys.executable, *args]


# --- running the pipeline ----------------------------------------------------


def configfiles(args: Sequence[str]) -> list[Path]:
    """The files Snakemake's --configfile (or --configfiles) names in ``args``."""
    out: list[Path] = []
    taking = False
    for a in args:
        if a.startswith(("--configfile=", "--configfiles=")):
            out.append(Path(a.split("=", 1)[1]))
            taking = False
        elif a in ("--configfile", "--configfiles"):
            taking = True
        elif taking and not a.startswith("-"):
            out.append(Path(a))
        else:
            taking = False
    return out


def run_packages(args: Sequence[str]) -> list[str]:
    """What a run with these Snakemake arguments needs installed: building
    and measuring, and what its inventory's nodes need (iolab.packages).
    A config that does not load stops here, with its one line."""
    import yaml

    from .config import ConfigError, load

    try:
        config = load(*(paths.resolve(f) for f in configfiles(args)))
    except (ConfigError, OSError, ValueError, yaml.YAMLError) as e:
        click.echo(f"iolab: {e}", err=True)
        sys.exit(1)
    return packages.for_run(config["nodes"])


@command("run", name="all", context_settings=PASS_ON)
@click.argument("snakemake_args", nargs=-1, type=click.UNPROCESSED)
def all_(snakemake_args: tuple[str, ...]) -> None:
    """Measure this machine, fit, judge the claims, build the paper.

    Runs `snakemake --cores all SNAKEMAKE_ARGS`, the same run as typing that in the environment,
    after installing what the config needs: building and measuring, and its nodes' runners. The
    paper is paper/paper.pdf. Pass --configfile config/overlays/NAME.yaml for another overlay
    (smoke: the whole chain in minutes; paper: the numbers to cite), or targets to build only
    those.
    """
    install(run_packages(snakemake_args), "./repro all")
    run_here(python("-m", "snakemake", "--cores", "all", *snakemake_args))


@command("run", context_settings=PASS_ON)
@click.argument("snakemake_args", nargs=-1, type=click.UNPROCESSED)
def study(snakemake_args: tuple[str, ...]) -> None:
    """Measure every node of an inventory; pool the claims over them.

    Runs `snakemake --cores all study SNAKEMAKE_ARGS`: every node of the inventory
    (--configfile NODES.yaml; SLURM with --profile profiles/slurm) is measured, each node one
    occasion, and the claims' verdicts are pooled over the nodes (results/study/). Nodes of one
    machine are shown, never counted.
    """
    install(run_packages(snakemake_args), "./repro study")
    run_here(python("-m", "snakemake", "--cores", "all", "study", *snakemake_args))


def planned_measurements(plan: str) -> list[int]:
    """The job counts of the measure_* rules in a dry run's job table."""
    rows = (line.split() for line in plan.splitlines())
    return [int(w[1]) for w in rows if len(w) == 2 and w[0].startswith("measure_") and w[1].isdigit()]


@command("run", context_settings={**PASS_ON, "allow_interspersed_args": True})
@click.option(
    "--accept-edited",
    "accepted",
    multiple=True,
    metavar="RAW",
    help="a raw file (data/raw/.../rep<N>.csv) changed on purpose: its provenance records who accepted "
    "it and when, and the build goes on",
)
@click.argument("snakemake_args", nargs=-1, type=click.UNPROCESSED)
def figures(accepted: tuple[str, ...], snakemake_args: tuple[str, ...]) -> None:
    """Re-derive tables, figures and paper from measured raw data.

    Measures nothing: a plan that holds a measurement (raw data of another config, or none yet)
    is refused before anything runs; pass the --configfile of the run that measured it. A raw
    file changed after it was measured stops the build unless accepted.
    """
    os.chdir(paths.REPO)
    for raw in accepted:
        if subprocess.run(python("-m", "iolab.integrity", "accept", raw), check=False).returncode != 0:
            sys.exit(1)
    listed = subprocess.run(python("-m", "snakemake", "--list-rules"), capture_output=True, text=True, check=False)
    tidy = [r for r in listed.stdout.split() if r.startswith("tidy_")]
    if not tidy:
        click.echo("repro: figures found no tidy_* rule to re-run", err=True)
        sys.exit(1)
    # Every tidy_* rule, and with them everything downstream; measurements
    # are upstream, so nothing is re-measured unless raw data is missing.
    forced = ["--cores", "all", "--forcerun", *tidy, *snakemake_args]
    plan = subprocess.run(
        python("-m", "snakemake", *forced, "--dry-run", "--quiet", "rules"), capture_output=True, text=True
    )
    said = plan.stdout + plan.stderr
    if plan.returncode != 0:
        last = [ln for ln in said.splitlines() if ln.strip()][-1:] or ["(no message)"]
        click.echo(f"repro: snakemake could not plan the analysis: {last[0]}", err=True)
        sys.exit(1)
    measuring = sum(planned_measurements(said))
    if measuring:
        click.echo(
            f"repro: figures only re-derives from raw data already measured, and with this config {measuring} "
            "repetition(s) have none yet: pass the --configfile of the run that measured them (e.g. "
            "--configfile config/overlays/paper.yaml), or measure with ./repro all",
            err=True,
        )
        sys.exit(1)
    run_here(python("-m", "snakemake", *forced))


# --- modules that own their commands -----------------------------------------


def for_users(doc: str) -> str:
    """A module's docstring as ./repro prints it: without the module's own
    command line (the usage line above says it), the pointers into the
    code for its maintainers, and reStructuredText marks."""
    paragraphs = [p for p in doc.split("\n\n") if not p.lstrip().startswith("python -m iolab")]
    text = "\n\n".join(paragraphs)
    text = re.sub(r"\s?\(iolab\.[\w.]+(?:; ([^)]*))?\)", lambda m: f" ({m.group(1)})" if m.group(1) else "", text)
    return re.sub(r"\*\*|``", "", text)


@contextmanager
def prog_named(old: str, new: str) -> Iterator[None]:
    """argparse parsers made meanwhile whose program is ``old`` (or one of
    its subcommands) call it ``new``: the owning module's usage then reads
    as the ./repro command that runs it."""
    made = argparse.ArgumentParser.__init__

    def init(self: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        made(self, *args, **kwargs)
        if self.prog == old or self.prog.startswith(old + " "):
            self.prog = new + self.prog[len(old) :]
            if self.description:
                self.description = for_users(self.description)

    # Patched for the call only: the owning module builds its parser inside main().
    argparse.ArgumentParser.__init__ = init  # type: ignore[method-assign]
    try:
        yield
    finally:
        # Put back.
        argparse.ArgumentParser.__init__ = made  # type: ignore[method-assign]


@dataclass(frozen=True)
class Owned:
    """A command whose arguments go to ``module``'s main(argv), after
    ``prefix`` (the module's own subcommand for it)."""

    module: str
    prefix: tuple[str, ...] = ()
    # The module's own subcommands, each with its usage in docs/commands.md.
    subcommands: tuple[str, ...] = ()

    def call(self, path: str, args: Sequence[str]) -> int:
        main = importlib.import_module(self.module).main
        with prog_named(" ".join(["python -m", self.module, *self.prefix]), f"{PROG} {path}"):
            try:
                return int(main([*self.prefix, *args]) or 0)
            except SystemExit as e:  # argparse: --help, or a usage error
                return e.code if isinstance(e.code, int) else 1


# Declared once: ./repro's path -> the module that owns it.
OWNED: dict[str, Owned] = {}
OWNED_ARGS: dict[str, Any] = {"ignore_unknown_options": True, "allow_extra_args": True, "help_option_names": []}


def owned(section: str, path: str, spec: Owned, summary: str, group: click.Group = cli) -> None:
    """Declare ``./repro PATH`` as ``spec``'s; ``summary`` is its line in the list."""
    OWNED[path] = spec
    name = path.split()[-1]

    @command(section, name=name, group=group, context_settings=OWNED_ARGS, add_help_option=False, help=summary)
    @click.argument("args", nargs=-1, type=click.UNPROCESSED)
    def run(args: tuple[str, ...]) -> None:
        sys.exit(spec.call(path, args))


owned("run", "preview", Owned("iolab.archive.preview"), "Build the figures and paper of the shipped reference run.")


# --- exploring ---------------------------------------------------------------


def venv_env(extra_path: str | None = None) -> dict[str, str]:
    """This environment as `source .venv/bin/activate` sets it."""
    bindir = str(Path(sys.executable).parent)
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join(p for p in (bindir, env.get("PATH", "")) if p)
    env["VIRTUAL_ENV"] = str(Path(sys.executable).parent.parent)
    return env


@command("explore", context_settings=PASS_ON)
@click.argument("jupyter_args", nargs=-1, type=click.UNPROCESSED)
def lab(jupyter_args: tuple[str, ...]) -> None:
    """JupyterLab on the notebooks (127.0.0.1, a fresh token).

    Prints its URL. The notebooks open on this checkout's latest pipeline tables (or the shipped reference data),
    and their .py files open as notebooks. The address and token are set here: a notebook
    server runs code.
    """
    for a in jupyter_args:
        if "token" in a or "password" in a or a.startswith("--ip") or ".ip=" in a:
            click.echo(f"repro: repro lab sets the address (127.0.0.1) and a fresh token itself; drop '{a}'", err=True)
            sys.exit(1)
    token = secrets.token_urlsafe(32)
    port = os.environ.get("IOLAB_LAB_PORT")
    if not port:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = str(s.getsockname()[1])
    # The URL, token included, goes to this terminal only; the server reads
    # it from its environment (JUPYTER_TOKEN), which only its owner can
    # read, never from its command line, which every local user can.
    click.echo(f"repro: JupyterLab on http://127.0.0.1:{port}/lab?token={token} (stop it with Ctrl-C)", err=True)
    env = venv_env()
    # The kernels import this checkout's iolab first, even from an
    # environment another checkout made.
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(paths.REPO), env.get("PYTHONPATH", "")) if p)
    env["JUPYTER_TOKEN"] = token
    # As root (this package's usual case: it creates network namespaces)
    # Jupyter wants to be told; loopback and the token still apply.
    root = ["--allow-root"] if os.geteuid() == 0 else []
    server = [
        "--no-browser",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--ServerApp.root_dir={paths.REPO}",
        "--ServerApp.open_browser=False",
    ]
    run_here(python("-m", "jupyter", "lab", *server, *root, *jupyter_args), env)


@command("explore")
def shell() -> None:
    """A shell with the environment active.

    As `source .venv/bin/activate` does.
    """
    user_shell = os.environ.get("SHELL") or "bash"
    run_here([user_shell, "-i"], venv_env())


# --- archiving, comparing and citing runs ------------------------------------

owned(
    "runs", "archive", Owned("iolab.archive.crate", ("build",)), "Pack the finished run as a crate to deposit and cite."
)
owned("runs", "verify", Owned("iolab.archive.crate", ("verify",)), "Check every file of a crate against its SHA-256.")
owned("runs", "reanalyse", Owned("iolab.archive.reanalyse"), "Rebuild tables, figures and paper from a crate, offline.")
owned("runs", "compare", Owned("iolab.archive.compare"), "Set archived runs side by side, number by number.")


@command("runs", cls=Ordered)
def cite() -> None:
    """Cite figures by their identity; deposit with .zenodo.json."""


owned("runs", "cite ids", Owned("iolab.archive.crate", ("figure-ids",)), "Each figure's identity, from a crate.", cite)
owned("runs", "cite zenodo", Owned("iolab.archive.crate", ("zenodo",)), "Write .zenodo.json from CITATION.cff.", cite)
owned(
    "runs",
    "store",
    Owned("iolab.archive.store", subcommands=("add", "list", "rebuild")),
    "The store of archived runs: add crates, list them, rebuild it.",
)
owned("runs", "publish", Owned("iolab.archive.publish"), "The stored runs over time, as a static site.")
owned("runs", "verdicts", Owned("iolab.archive.pooling"), "Each claim judged across the stored runs, each run once.")


@command("runs", cls=Ordered)
def occasions() -> None:
    """The spread between runs on other days: estimate, show, check."""


owned("runs", "occasions estimate", Owned("iolab.archive.spread", ("estimate",)), "Estimate it from crates.", occasions)
owned("runs", "occasions show", Owned("iolab.archive.spread", ("show",)), "Print the estimate in use.", occasions)
owned(
    "runs",
    "occasions calibrate",
    Owned("iolab.archive.calibration"),
    "Check its prediction intervals on held-out runs.",
    occasions,
)


# --- setting up and developing -----------------------------------------------


@command("develop")
@click.option("--tests", is_flag=True, help="also what the test suite needs (every group)")
@click.option(
    "--configfile",
    "overlays",
    multiple=True,
    type=click.Path(path_type=Path),
    help="also what this config's nodes need",
)
def setup(tests: bool, overlays: tuple[Path, ...]) -> None:
    """Install only: the Python environment and a run's packages.

    The Python environment is made before this runs; then the packages building and measuring
    need (and those of the config's nodes), so that `snakemake --cores all` runs in it.
    """
    wanted = packages.everything() if tests else run_packages([a for f in overlays for a in ("--configfile", str(f))])
    install(wanted, "./repro setup")
    click.echo("repro: ready. Run the workflow with: source .venv/bin/activate && snakemake --cores all", err=True)


@command("develop", context_settings=PASS_ON)
@click.argument("pytest_args", nargs=-1, type=click.UNPROCESSED)
def test(pytest_args: tuple[str, ...]) -> None:
    """The test suite, as CI runs it, after installing every group.

    --full adds the release tier: the stress matrix over every server preset and build. Other
    arguments go to pytest.
    """
    install(packages.everything(), "./repro test")
    run_here(python("-m", "pytest", *pytest_args))


@command("develop")
def lint() -> None:
    """Ruff's lint and format check, then mypy.

    The gates the test suite also runs. `ruff format .` and `ruff check --fix .` repair most
    findings; the settings are in pyproject.toml.
    """
    os.chdir(paths.REPO)
    steps = [python("-m", "ruff", "check", "."), python("-m", "ruff", "format", "--check", "."), python("-m", "mypy")]
    failed = [s for s in steps if subprocess.run(s, check=False).returncode != 0]
    sys.exit(1 if failed else 0)


@command("develop", context_settings=PASS_ON)
@click.argument("pytest_args", nargs=-1, type=click.UNPROCESSED)
def coverage(pytest_args: tuple[str, ...]) -> None:
    """The test suite with line coverage of iolab/ and the C code.

    Tables in results/coverage/. The instrumented builds stand in for native/build during the
    run; the usual build is moved aside and put back unchanged, timestamps included, so no
    measurement is re-run for it.
    """
    install(packages.everything(), "./repro coverage")
    os.chdir(paths.REPO)
    build, kept = Path("native/build"), Path("native/build.before-coverage")
    if kept.exists():
        click.echo(
            f"repro: {kept} exists: a coverage run was killed; put it back with: rm -rf {build} && mv {kept} {build}",
            err=True,
        )
        sys.exit(1)
    if build.exists():
        build.rename(kept)
    status = 0
    try:
        click.echo("repro: building the native programs with --coverage", err=True)
        jobs = f"-j{os.cpu_count() or 1}"
        for extra in ([], ["SAN=1"]):
            subprocess.run(
                ["make", "-s", jobs, "-C", "native", *extra, "EXTRA_CFLAGS=--coverage"],
                check=True,
                stdout=subprocess.DEVNULL,
            )
        shutil.rmtree("results/coverage", ignore_errors=True)
        Path("results/coverage").mkdir(parents=True)
        report = ["--cov", "--cov-report=term", "--cov-report=json:results/coverage/iolab.json"]
        status = subprocess.run(python("-m", "pytest", *report, *pytest_args), check=False).returncode
        click.echo("repro: line coverage of the C programs (optimised and sanitizer builds):", err=True)
        table = subprocess.run(
            python("tests/coverage_c.py", "native/build", "--json", "results/coverage/c.json"),
            capture_output=True,
            text=True,
            check=False,
        ).stdout
        sys.stdout.write(table)
        Path("results/coverage/c.txt").write_text(table)
        click.echo("repro: coverage tables in results/coverage/ (iolab.json, c.json, c.txt)", err=True)
    finally:
        shutil.rmtree(build, ignore_errors=True)
        if kept.exists():
            kept.rename(build)
    sys.exit(status)


def main() -> None:
    cli(prog_name=PROG)


if __name__ == "__main__":
    main()
