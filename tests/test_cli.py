"""./repro: a thin bash bootstrap before one Python command-line interface
(iolab.cli). Every --help prints that command's own usage and installs and
runs nothing; each command installs only the system packages it needs."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import REPO, tool_env

from iolab import clidoc, packages
from iolab.capabilities import RUNNER_CAPABILITIES
from iolab.config import load

# Tools that record being called, then fail: ./repro must call none of them
# for --help. dpkg-query prints nothing, as if no package were installed.
RECORDED = ("apt-get", "sudo", "dpkg-query", "python3", "snakemake", "pytest", "jupyter")


def recording_env(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """An environment whose apt-get, sudo, dpkg-query (and Python's tools)
    record each call in the returned file, and whose venv is still to make."""
    bindir, calls = tmp_path / "bin", tmp_path / "calls"
    bindir.mkdir()
    for name in RECORDED:
        tool = bindir / name
        # apt-get's update succeeds, so that what it would install is recorded too.
        ok = '[ "$1" = update ] && exit 0\n' if name == "apt-get" else ""
        tool.write_text(f'#!/bin/sh\necho "{name} $*" >>{calls}\n{ok}exit 1\n')
        tool.chmod(0o755)
    env = {**tool_env(), "IOLAB_VENV": str(tmp_path / "venv")}
    env.pop("IOLAB_SKIP_APT", None)
    env["PATH"] = os.pathsep.join([str(bindir), env["PATH"]])
    return env, calls


def repro(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(REPO / "repro"), *args], env=env, capture_output=True, text=True, timeout=60)


def documented(words: tuple[str, ...]) -> str:
    """A command's usage as docs/commands.md holds it."""
    with clidoc.fixed_width():
        return clidoc.usage(words)


def test_every_help_prints_its_own_usage_and_installs_and_runs_nothing(tmp_path: Path) -> None:
    env, calls = recording_env(tmp_path)
    paths = list(clidoc.command_paths())
    assert len(paths) > 20
    for words in paths:
        res = repro(env, *words, "--help")
        assert res.returncode == 0, (words, res.stderr)
        assert res.stdout == documented(words), words
        # Its own usage: the first line names the command.
        assert " ".join(["./repro", *words]) in res.stdout.splitlines()[0], (words, res.stdout[:200])
    # -h too, and wherever it comes among a command's arguments.
    assert repro(env, "all", "--configfile", "config/overlays/smoke.yaml", "-h").stdout == documented(("all",))
    assert repro(env, "store", "add", "x.crate.zip", "--help").stdout == documented(("store", "add"))
    assert not calls.exists(), calls.read_text()
    assert not (tmp_path / "venv").exists()
    # Negative control: the same command without --help goes on to install
    # (the recorded dpkg-query says nothing is installed; apt-get fails).
    res = repro(env, "verify", "x.crate.zip")
    assert res.returncode != 0 and calls.exists()
    assert "apt-get" in calls.read_text(), calls.read_text()


def test_an_unknown_command_says_so_and_installs_nothing(tmp_path: Path) -> None:
    env, calls = recording_env(tmp_path)
    res = repro(env, "occasion", "x.crate.zip")
    assert res.returncode != 0
    assert res.stderr.strip().splitlines()[-1] == "repro: unknown command 'occasion'"
    assert not calls.exists()


def test_a_user_without_root_or_sudo_is_told_what_to_run_as_root(tmp_path: Path) -> None:
    # Only the tools the bootstrap needs: no sudo; `id` says a user.
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for name in ("bash", "awk", "grep", "dirname", "cat", "env"):
        found = subprocess.run(["sh", "-c", f"command -v {name}"], capture_output=True, text=True).stdout.strip()
        (bindir / name).symlink_to(found)
    for name, script in (("id", "echo 1000"), ("dpkg-query", "exit 1"), ("apt-get", "exit 1")):
        (bindir / name).write_text(f"#!/bin/sh\n{script}\n")
        (bindir / name).chmod(0o755)
    env = {"PATH": str(bindir), "HOME": str(tmp_path), "IOLAB_VENV": str(tmp_path / "venv")}
    res = repro(env, "verify", "x.crate.zip")
    assert res.returncode == 1, res.stderr
    assert res.stderr.strip().splitlines() == [
        "repro: the Python environment needs python3 python3-venv: as root, run: apt-get install -y "
        "--no-install-recommends python3 python3-venv; then run this command again"
    ]
    # The Python side says the same of its own groups.
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(packages, "missing", lambda wanted: list(wanted))
        mp.setattr(os, "geteuid", lambda: 1000)
        mp.setattr(packages.shutil, "which", lambda name: None if name == "sudo" else f"/usr/bin/{name}")
        mp.delenv("IOLAB_SKIP_APT", raising=False)
        with pytest.raises(packages.InstallError) as info:
            packages.install(["bpftrace"], "./repro all")
    assert str(info.value) == (
        "./repro all needs bpftrace: as root, run: apt-get install -y --no-install-recommends bpftrace; "
        "then run this command again"
    )


def attempted(env: dict[str, str], calls: Path, *args: str) -> set[str]:
    """The packages `python -m iolab.cli ARGS` asks apt-get to install (the
    recording apt-get fails, so nothing runs after)."""
    calls.unlink(missing_ok=True)
    subprocess.run([sys.executable, "-m", "iolab.cli", *args], cwd=REPO, env=env, capture_output=True, timeout=120)
    said = calls.read_text().splitlines() if calls.exists() else []
    return {w for ln in said if ln.startswith("apt-get install") for w in ln.split() if not w.startswith("-")} - {
        "apt-get",
        "install",
    }


def test_each_command_installs_what_it_needs_and_no_more(tmp_path: Path) -> None:
    env, calls = recording_env(tmp_path)
    measure = set(packages._wanted(packages.MEASURE.packages))
    # Building and measuring for the default config: no node runner, no browser.
    assert attempted(env, calls, "all") == measure
    assert attempted(env, calls, "all", "--configfile", "config/nodes.example.yaml") == measure | set(
        packages.for_nodes(load(REPO / "config" / "nodes.example.yaml")["nodes"])
    )
    assert attempted(env, calls, "test", "--collect-only") == set(packages._wanted(packages.everything()))
    # The Python environment alone: nothing from apt.
    db = str(tmp_path / "store.sqlite")
    for args in (
        ["lab", "--version"],
        ["verify", "x.crate.zip"],
        ["store", "--db", db, "list"],
        ["verdicts", "--db", db],
    ):
        assert attempted(env, calls, *args) == set(), args
    assert not calls.exists()


def test_node_runners_are_installed_only_for_a_config_that_has_them() -> None:
    assert set(packages.RUNNER_PACKAGES) == set(RUNNER_CAPABILITIES)
    assert packages.for_nodes(load()["nodes"]) == []
    example = load(REPO / "config" / "nodes.example.yaml")["nodes"]
    assert "openssh-client" in packages.for_nodes(example)
    vm = [{"name": "g", "runner": "vm"}]
    assert packages.for_nodes(vm) == ["qemu-system-x86", "linux-image-amd64", "busybox-static"]
    # Every package a node can need is in the node runners' group.
    assert {p for ps in packages.RUNNER_PACKAGES.values() for p in ps} - set(packages.NODES.packages) == {
        "slurm-client"  # part of slurm-wlm
    }


def test_the_bootstrap_installs_what_packages_says_it_does() -> None:
    text = (REPO / "repro").read_text()
    line = next(ln for ln in text.splitlines() if ln.startswith("bootstrap_packages=("))
    assert tuple(line.split("(", 1)[1].rstrip(")").split()) == packages.BOOTSTRAP


def test_the_commands_document_is_what_the_interface_says() -> None:
    # docs/commands.md is generated (python -m iolab.clidoc); ./repro prints
    # its blocks for --help. A command or option changed without it fails here.
    assert clidoc.DOC.read_text() == clidoc.render(), "run: python -m iolab.clidoc"


def test_a_command_owned_by_a_module_takes_its_options_from_it() -> None:
    # ./repro verdicts hands its arguments to iolab.archive.pooling.main:
    # its usage is the module's, under the command's name.
    usage = clidoc.usage(("verdicts",))
    assert usage.startswith("usage: ./repro verdicts") and "--planned" in usage
    res = subprocess.run(
        [sys.executable, "-m", "iolab.cli", "verify"], cwd=REPO, env=tool_env(), capture_output=True, text=True
    )
    assert res.returncode == 2 and "usage: ./repro verify" in res.stderr, res.stderr
    # One verb per slot: occasions takes a subcommand, never a crate.
    res = subprocess.run(
        [sys.executable, "-m", "iolab.cli", "occasions", "a.crate.zip"],
        cwd=REPO,
        env=tool_env(),
        capture_output=True,
        text=True,
    )
    assert res.returncode == 2 and "No such command 'a.crate.zip'" in res.stderr, res.stderr
    # Crates come into the store one way: store add (publish has no --add).
    assert "--add" not in clidoc.usage(("publish",))
    assert "crates" in clidoc.usage(("store", "add"))


def test_the_users_documents_name_commands_not_modules() -> None:
    # Every user-facing feature is a ./repro command: the README and the
    # pages it sends people to never ask for `python -m iolab...`.
    for doc in (REPO / "README.md", REPO / "docs" / "archive.md", REPO / "docs" / "configure.md"):
        text = doc.read_text()
        assert "python -m iolab" not in text, doc.name
    catalog = yaml.safe_load((REPO / ".snakemake-workflow-catalog.yml").read_text())
    assert "python -m iolab" not in catalog["usage"]["mandatory-flags"]["desc"]


# Each command's --help as the interface itself prints it, in one process.
PRINT_EVERY_HELP = """
import json, sys
from iolab.cli import PROG, cli
for words in json.loads(sys.argv[1]):
    try:
        cli.main([*words, "--help"], prog_name=PROG)
    except SystemExit:
        pass
    print("\\f", flush=True)
"""


def test_the_interface_prints_what_the_document_holds() -> None:
    # ./repro prints the document's block; `python -m iolab.cli ... --help`
    # prints the interface's own help: the two are one text.
    paths = list(clidoc.command_paths())
    res = subprocess.run(
        [sys.executable, "-c", PRINT_EVERY_HELP, json.dumps(paths)],
        env={**tool_env(), "COLUMNS": str(clidoc.WIDTH)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    printed = res.stdout.split("\f\n")[:-1]
    assert len(printed) == len(paths), res.stderr[-2000:]
    for words, text in zip(paths, printed, strict=True):
        assert text == documented(words), words


def test_help_reads_without_the_codes_pointers() -> None:
    # Every command's help as docs/commands.md (and ./repro ... --help)
    # prints it: no module command line, no module paths, no markup.
    from iolab import cli

    doc = (REPO / "docs" / "commands.md").read_text()
    body = doc.split("\n", 3)[3]
    assert "python -m iolab" not in body and "(iolab." not in body and "**" not in body
    assert not re.search(r"(?<!`)``(?!`)", body)
    sample = (
        "Verdicts about **this kind**\n(iolab.claims.kind_verdicts).\n\n    python -m iolab.archive.pooling X\n\nDone."
    )
    assert cli.for_users(sample) == "Verdicts about this kind.\n\nDone."
    # Negative control: a module's docstring as it stands keeps all three.
    from iolab.archive import compare

    assert "python -m iolab" in compare.__doc__ and "(iolab." in compare.__doc__
