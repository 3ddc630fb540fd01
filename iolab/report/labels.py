"""What figures and the site call things: readable names for the config's
and the tables' keys (echo presets, probe variants, echo metrics), which
stay the keys in the data and the numbers. A key without a name of its own
(a preset a config adds) shows as its words."""

from __future__ import annotations

# The presets of config/config.yaml and its overlays, short enough for a
# tick label. Flags are echo-uring's (--help); the Go servers are native/go.
PRESETS = {
    "epoll": "epoll",
    "default": "default ring",
    "sqpoll": "SQPOLL",
    "sqpoll_sq_aff": "SQPOLL, SQ_AFF CPU 0",
    "sqpoll_sq_aff_spare": "SQPOLL, SQ_AFF spare CPU",
    "rings_granule": "2 rings, ATTACH_WQ",
    "rings_granule_own_wq": "2 rings, own io-wq",
    "async": "IOSQE_ASYNC",
    "async_iowq_spare": "ASYNC, io-wq on spare CPUs",
    "buf_select": "buffer select",
    "buf_ring": "buffer ring",
    "fixed_files": "fixed files",
    "link_timeout": "linked timeouts",
    "multishot": "multishot accept, recv",
    "single_issuer_defer_taskrun": "single issuer, DEFER_TASKRUN",
    "defer_taskrun_multishot": "DEFER_TASKRUN, multishot",
    "recv_bundle": "recv bundles",
    "bundle_gather": "recv bundles, gathered send",
    "send_bundle": "send bundles",
    "buf_inc": "incremental buffers",
    "bundle_buf_inc": "bundles, incremental buffers",
    "napi": "NAPI busy polling",
    "epoll_uring_wait": "epoll, waits on io_uring",
    "coop_taskrun": "COOP_TASKRUN",
    "poll_first": "poll first (OpenAnolis)",
    "go_net": "Go net",
    "go_uring": "Go reactor",
    "go_uring_sqpoll": "Go reactor, SQPOLL",
    "go_uring_rings1": "Go reactor, 1 ring",
    "go_uring_rings2": "Go reactor, 2 rings",
    "go_uring_rings4": "Go reactor, 4 rings",
    "go_uring_rings8": "Go reactor, 8 rings",
    "go_uring_granule1": "Go reactor, granule 1",
}

# The cost probes' variants (config: each experiment's `variants`).
VARIANTS = {
    "getppid": "getppid()",
    "enosys": "unimplemented call",
    "send": "SEND",
    "send_zc": "SEND_ZC",
    "send_zc_fixed": "SEND_ZC, registered buffer",
    "ready": "one event ready",
    "empty": "no event",
}

# The echo table's metrics.
METRICS = {
    "rps": "requests/s",
    "server_ns_per_request": "server CPU per request",
    "client_ns_per_request": "load generator CPU per request",
    "p50_us": "median latency",
    "p99_us": "p99 latency",
    "sqes_per_enter": "SQEs per enter",
    "events_per_wait": "events per wait",
}


def words(key: str) -> str:
    return key.replace("_", " ")


def preset(name: str) -> str:
    """An echo preset's name in a figure."""
    return PRESETS.get(name, words(name))


def variant(name: str) -> str:
    """A cost probe's variant in a figure."""
    return VARIANTS.get(name, words(name))


def metric(name: str) -> str:
    """An echo metric in a figure."""
    return METRICS.get(name, words(name))
