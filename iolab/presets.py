"""Echo presets: which server a preset of ``experiments.echo.presets`` runs,
with which flags, the flags each server declares, and the placeholders a
preset may use for CPUs chosen per cell. The config checks, the typed
settings and the echo experiment all read presets through this module.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from . import paths
from .native import program_sources

# An echo preset's server: echo-<server>. A preset is a list of echo-uring
# flags (the preset named epoll: echo-epoll's), or {server, flags}.
# A preset's server -> the program that serves: every echo-<server> of native/programs.mk.
SERVER_PROGRAMS = {p.removeprefix("echo-"): p for p in program_sources() if p.startswith("echo-")}
# Server flags that turn on what Linux 6.9+ added to io_uring's networking
# (or, for --gather-send, stand in for it), and the feature each turns on:
# a preset with one is "modern" in the study's open question. All are
# echo-uring's but --uring-wait, echo-epoll's (the epoll-wait bridge).
MODERN_FEATURES = {
    "--recv-bundle": "receive bundles",
    "--buf-inc": "incremental buffer rings",
    "--gather-send": "gathered sends",
    "--send-bundle": "send bundles",
    "--min-wait": "batched waits",
    "--napi": "NAPI busy polling",
    "--reg-wait": "registered wait regions",
    "--uring-wait": "the epoll-wait bridge",
}


def preset_server(name: str, spec: Sequence[str] | Mapping[str, Any]) -> tuple[str, tuple[str, ...]]:
    """A preset's server (a SERVER_PROGRAMS key) and its flags."""
    if isinstance(spec, Mapping):
        return str(spec["server"]), tuple(spec.get("flags") or ())
    return ("epoll" if name == "epoll" else "uring"), tuple(spec)


def modern_features(flags: Sequence[str]) -> list[str]:
    """The modern features (MODERN_FEATURES) a preset's flags turn on."""
    return [name for flag, name in MODERN_FEATURES.items() if flag in flags]


def server_flags() -> dict[str, set[str]]:
    """program -> the long options its sources (native/programs.mk's list)
    declare: the C servers' getopt tables or flag tables, and the Go
    servers' flag definitions (each server's --help documents the same
    ones)."""
    declared = (
        r'\{ "([a-z-]+)", (?:required|no)_argument',  # a getopt table
        r'FLAG_[A-Z]+\("([a-z-]+)"',  # echo-uring's table (uring_options.c)
        r'flag\.[A-Za-z]+\((?:&[A-Za-z.]+, )?"([a-z-]+)"',  # Go's flag package
    )
    sources = program_sources()
    out = {}
    for program in SERVER_PROGRAMS.values():
        text = "\n".join((paths.REPO / s).read_text() for s in sources[program] if s.endswith((".c", ".go")))
        out[program] = {f"--{name}" for pattern in declared for name in re.findall(pattern, text)}
    return out


# Preset flags may name CPUs by their place in the cell's layout, resolved
# per cell (iolab.experiments.echo.cell.resolve_flags): the first, or every, online CPU that
# is in neither the server's nor the load generator's set. U4's helpers (the
# SQPOLL thread, io-wq workers) run there instead of on the server's CPU.
SPARE_CPU, SPARE_CPUS = "{spare_cpu}", "{spare_cpus}"
