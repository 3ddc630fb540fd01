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


# The first Linux release with what each server flag turns on, from
# io_uring_setup(2), io_uring_enter(2), io_uring_register(2) and liburing's
# man pages (the servers' --help repeats the newer ones, and
# tests/test_artifact.py holds this table to the flags each server declares), per server. A preset
# needs the newest over its flags and its server's own base (SERVER_KERNEL).
URING_FLAG_KERNEL: dict[str, tuple[str, str]] = {
    "--sqpoll": ("5.11", "SQPOLL without root or registered files"),
    "--sq-thread-idle": ("5.1", "the SQPOLL thread's idle time"),
    "--sq-aff": ("5.1", "IORING_SETUP_SQ_AFF"),
    "--attach-wq": ("5.6", "IORING_SETUP_ATTACH_WQ"),
    "--iowq-aff": ("5.14", "IORING_REGISTER_IOWQ_AFF"),
    "--cq-size": ("5.5", "IORING_SETUP_CQSIZE"),
    "--clamp": ("5.6", "IORING_SETUP_CLAMP"),
    "--r-disabled": ("5.10", "IORING_SETUP_R_DISABLED"),
    "--coop-taskrun": ("5.19", "IORING_SETUP_COOP_TASKRUN"),
    "--taskrun-flag": ("5.19", "IORING_SETUP_TASKRUN_FLAG"),
    "--single-issuer": ("6.0", "IORING_SETUP_SINGLE_ISSUER"),
    "--defer-taskrun": ("6.1", "IORING_SETUP_DEFER_TASKRUN"),
    "--register-ring-fd": ("5.18", "a registered ring descriptor"),
    "--async": ("5.6", "IOSQE_ASYNC"),
    "--buf-select": ("5.7", "provided buffers (IORING_OP_PROVIDE_BUFFERS)"),
    "--buf-ring": ("5.19", "ring-mapped provided buffers"),
    "--fixed-files": ("5.19", "a sparse registered file table"),
    "--link-timeout": ("5.5", "IORING_OP_LINK_TIMEOUT"),
    "--hardlink": ("5.5", "IOSQE_IO_HARDLINK"),
    "--drain": ("5.2", "IOSQE_IO_DRAIN"),
    "--multishot-accept": ("5.19", "multishot accept"),
    "--multishot-recv": ("6.0", "multishot receive"),
    "--send-zc": ("6.2", "IORING_OP_SEND_ZC with usage reports"),
    "--zc-fixed": ("6.0", "zero-copy sends from registered buffers"),
    "--gather-send": ("5.3", "IORING_OP_SENDMSG"),
    "--poll-first": ("5.13", "multishot poll"),
    "--rings": ("5.18", "IORING_OP_MSG_RING between rings"),
    "--recv-bundle": ("6.10", "receive bundles"),
    "--send-bundle": ("6.12", "send bundles on incremental buffer rings"),
    "--buf-inc": ("6.12", "incremental buffer rings"),
    "--min-wait": ("6.12", "batched waits (min_wait_usec)"),
    "--napi": ("6.9", "NAPI busy polling"),
    "--reg-wait": ("6.13", "registered wait regions"),
}
FLAG_KERNEL: dict[str, dict[str, tuple[str, str]]] = {
    "uring": URING_FLAG_KERNEL,
    "epoll": {"--uring-wait": ("6.15", "IORING_OP_EPOLL_WAIT")},
    # The Go reactor's rings share nothing through the kernel.
    "go-uring": {
        "--sqpoll": URING_FLAG_KERNEL["--sqpoll"],
        "--sq-thread-idle": URING_FLAG_KERNEL["--sq-thread-idle"],
        "--link-timeout": URING_FLAG_KERNEL["--link-timeout"],
    },
    "go-net": {},
}
# Flags that size, count or route what a server already does, per server:
# no kernel feature of their own (each preset's flag is in FLAG_KERNEL or
# here; tests/test_artifact.py checks every declared flag).
PLAIN_FLAGS: dict[str, set[str]] = {
    "uring": {
        "--help",
        "--port",
        "--bind",
        "--entries",
        "--buf-size",
        "--buf-count",
        "--hold-share",
        "--wait-nr",
        "--granule",
    },
    "epoll": {"--help", "--port", "--bind", "--threads", "--max-events"},
    "go-net": {"--port", "--bind", "--buf-size", "--blocking-file", "--gomaxprocs"},
    "go-uring": {
        "--port",
        "--bind",
        "--rings",
        "--granule",
        "--worker-pools",
        "--entries",
        "--buf-size",
        "--gomaxprocs",
    },
}
# What each server needs before any flag: echo-uring refuses a kernel
# without IORING_FEAT_FAST_POLL (5.7) and waits with a timeout through
# IORING_ENTER_EXT_ARG (5.11); the Go reactor accepts, receives and sends
# with IORING_OP_ACCEPT, RECV and SEND (5.6); epoll and Go's net package
# need no io_uring.
SERVER_KERNEL: dict[str, tuple[str, str] | None] = {
    "epoll": None,
    "uring": ("5.11", "a wait with a timeout (IORING_ENTER_EXT_ARG)"),
    "go-net": None,
    "go-uring": ("5.6", "IORING_OP_SEND and IORING_OP_RECV"),
}


def _version(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split("."))


def kernel_needed(name: str, spec: Sequence[str] | Mapping[str, Any]) -> tuple[str, str] | None:
    """The oldest Linux a preset runs on and the feature that sets it (the
    newest of its server's base and its flags'); None for a preset without
    io_uring. A --rings of 1 needs no second ring, so no MSG_RING."""
    server, flags = preset_server(name, spec)
    base = SERVER_KERNEL.get(server)
    needs = [base] if base is not None else []
    table = FLAG_KERNEL.get(server, {})
    for i, flag in enumerate(flags):
        if flag == "--rings" and i + 1 < len(flags) and str(flags[i + 1]) == "1":
            continue
        if flag in table:
            needs.append(table[flag])
    return max(needs, key=lambda n: _version(n[0])) if needs else None
