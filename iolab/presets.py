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

# An echo preset's server: echo-<server>. A preset is a list of echo-uring
# flags (the preset named epoll: echo-epoll's), or {server, flags}.
SERVER_PROGRAMS = {"epoll": "echo-epoll", "uring": "echo-uring", "go-net": "echo-go-net", "go-uring": "echo-go-uring"}
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
    """program -> the long options its source declares: the C servers'
    getopt tables and the Go servers' flag definitions (each server's
    --help documents the same ones)."""
    out = {}
    for program, source in (("echo-uring", "echo/echo_uring.c"), ("echo-epoll", "echo/echo_epoll.c")):
        text = (paths.REPO / "native" / source).read_text()
        out[program] = {f"--{name}" for name in re.findall(r'\{ "([a-z-]+)", (?:required|no)_argument', text)}
    for program in ("echo-go-net", "echo-go-uring"):
        text = (paths.REPO / "native" / "go" / "cmd" / program / "main.go").read_text()
        out[program] = {f"--{name}" for name in re.findall(r'flag\.[A-Za-z]+\((?:&[A-Za-z.]+, )?"([a-z-]+)"', text)}
    return out


# Preset flags may name CPUs by their place in the cell's layout, resolved
# per cell (iolab.experiments.echo.cell.resolve_flags): the first, or every, online CPU that
# is in neither the server's nor the load generator's set. U4's helpers (the
# SQPOLL thread, io-wq workers) run there instead of on the server's CPU.
SPARE_CPU, SPARE_CPUS = "{spare_cpu}", "{spare_cpus}"
