"""The cost-probe experiments (syscall, sendrecv, uring_batch, nop): the
cost-probe command line from a config section, and one repetition of it."""

from __future__ import annotations

from typing import Any

from .. import paths, readers
from ..registry import REGISTRY
from ..runners import RunError
from ..settings import ExperimentSettings
from . import Measured, Repetition


def _value(v: Any) -> str:
    return ",".join(str(x) for x in v) if isinstance(v, (list, tuple)) else str(v)


def probe_argv(
    experiment: str, settings: ExperimentSettings, seed: int, cpu: int | None, exe: str | None = None
) -> list[str]:
    """cost-probe's command line (``exe``: its path on the node; default:
    here). Each key of the experiment's section is the flag of its name,
    but its on/off switch."""
    argv = [exe or str(paths.NATIVE_BUILD / "cost-probe"), REGISTRY[experiment].probe_mode]
    for key, value in settings.model_dump(exclude={"enabled"}).items():
        argv += ["--" + key.replace("_", "-"), _value(value)]
    argv += ["--seed", str(seed)]
    if cpu is not None:
        argv += ["--cpu", str(cpu)]
    return argv


def run_repetition(rep: Repetition) -> Measured:
    """One cost-probe run into ``rep.raw``, pinned to the node's probe CPU."""
    probe = rep.node.cpus.get("probe")
    cpu = None if probe is None else int(probe)
    argv = probe_argv(rep.experiment, rep.settings, rep.seed, cpu, rep.runner.exe("cost-probe"))
    rep.runner.run(argv, rep.raw)
    # Parse before accepting: a truncated or malformed file is not a result.
    frame = readers.read_raw_csv(rep.raw)
    if frame.empty:
        raise RunError(f"{rep.experiment} on {rep.node.name}: the probe wrote no samples")
    return Measured(
        {"unavailable": readers.read_unavailable(rep.raw)},
        argv,
        f"{len(frame)} batches",
        {"probe_cpu": cpu, "observed_cpus": sorted(set(frame["cpu"].tolist()))},
    )
