"""The cost-probe experiments (syscall, sendrecv, uring_batch, nop): the
cost-probe command line from a config section, and one repetition of it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .. import paths, tables
from ..runners import RunError
from . import Measured, Repetition

# experiment name -> cost-probe mode
PROBE_MODES = {"syscall": "syscall", "sendrecv": "sendrecv", "uring_batch": "uring-batch", "nop": "nop"}

# config key -> cost-probe flag, per experiment (lists become comma-separated)
_FLAGS: dict[str, dict[str, str]] = {
    "syscall": {"batches": "--batches", "warmup_batches": "--warmup-batches",
                "batch_us": "--batch-us", "variants": "--variants"},
    "sendrecv": {"batches": "--batches", "warmup_batches": "--warmup-batches",
                 "transports": "--transports", "ops": "--ops", "patterns": "--patterns",
                 "ack_modes": "--ack-modes", "bytes": "--bytes", "connections": "--connections",
                 "calls_per_batch": "--calls-per-batch"},
    "uring_batch": {"batches": "--batches", "warmup_batches": "--warmup-batches", "ops": "--ops",
                    "n": "--n", "bytes": "--bytes", "presets": "--presets",
                    "max_not_inline": "--max-not-inline"},
    "nop": {"batches": "--batches", "warmup_batches": "--warmup-batches", "n": "--n",
            "presets": "--presets"},
}


def _value(v: Any) -> str:
    return ",".join(str(x) for x in v) if isinstance(v, list) else str(v)


def probe_argv(experiment: str, settings: Mapping[str, Any], seed: int,
               cpu: int | None, exe: str | None = None) -> list[str]:
    """cost-probe's command line (``exe``: its path on the node; default: here)."""
    argv = [exe or str(paths.NATIVE_BUILD / "cost-probe"), PROBE_MODES[experiment]]
    for key, flag in _FLAGS[experiment].items():
        if key in settings:
            argv += [flag, _value(settings[key])]
    argv += ["--seed", str(seed)]
    if cpu is not None:
        argv += ["--cpu", str(cpu)]
    return argv


def run_repetition(rep: Repetition) -> Measured:
    """One cost-probe run into ``rep.raw``, pinned to the node's probe CPU."""
    cpu = rep.node.cpus.get("probe")
    argv = probe_argv(rep.experiment, rep.settings, rep.seed, cpu, rep.runner.exe("cost-probe"))
    rep.runner.run(argv, rep.raw)
    # Parse before accepting: a truncated or malformed file is not a result.
    frame = tables.read_raw_csv(rep.raw)
    if frame.empty:
        raise RunError(f"{rep.experiment} on {rep.node.name}: the probe wrote no samples")
    return Measured({"unavailable": tables.read_unavailable(rep.raw)}, argv, f"{len(frame)} batches",
                    {"probe_cpu": cpu, "observed_cpus": sorted(set(frame["cpu"].tolist()))})
