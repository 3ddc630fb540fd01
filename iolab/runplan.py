"""What one run of the workflow measures, where, under which keys and in
which order: the logic behind ``rules/common.smk``, typed and testable
without Snakemake. ``common.smk`` builds a ``RunPlan`` from the validated
config and binds the names the rule files use; nothing here knows about
Snakemake's objects (the precision rounds get their plans through a
callable).
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from .capabilities import Capability, capabilities_of
from .codehash import measuring_sources, update_with_sources
from .config import ConfigError
from .native import MPI_PROGRAMS
from .privilege import experiment_left_out, transports_left_out
from .registry import (
    COST_MODEL_EXPERIMENTS,
    NOTEBOOKS,
    REGISTRY,
    can_host,
    claim_experiments,
    figures_drawn,
    has_setting,
    notebooks_run,
    peer_names,
)
from .runners import skip_reason
from .settings import RunConfig

# Where round ``round``'s checkpoint writes its plan (rules/precision.smk).
PRECISION_PLAN = "results/precision/round{round}.json"

# A precision round's plan: {"stop": bool, "next": {experiment: {"reps": [...], "cells": [...]}}}.
PlanOf = Callable[[int], Mapping[str, Any]]


def rep_priority(seed: int, experiment: str, node: str, rep: int | str) -> int:
    """Scheduling priority of a measurement: every experiment's repetition 1
    on every node first, then repetition 2, and so on, in a seeded random
    order within each round. A slow quarter of an hour on the host then hits
    every configuration alike, and the repetitions spread over the run."""
    rep = int(rep)
    shuffle = zlib.crc32(f"{seed}/{rep}/{node}/{experiment}".encode()) % 1000
    return (10_000 - rep) * 1000 + shuffle


def rep_seed(seed: int, experiment: str, node: str, rep: int | str) -> int:
    """A repetition's seed derived from the config seed, stable across runs."""
    return (seed + zlib.crc32(f"{experiment}/{node}/{rep}".encode())) % 2**31


def run_seed(seed: int, experiment: str, node: str) -> int:
    """The seed every repetition of an experiment on a node shares (echo:
    each setup's preset order, reversed in ABBA over repetitions)."""
    return (seed + zlib.crc32(f"{experiment}/{node}".encode())) % 2**31


@dataclass
class RunPlan:
    """The run the config asks for on this machine: its nodes (those that
    cannot run here skipped, with why), the experiments that run, the parts
    left out for want of privilege, and each measurement's key and files."""

    run: RunConfig
    config: Mapping[str, Any]  # the validated config's own dicts: run keys digest them
    basedir: Path
    # The workflow's cores, asked only when a measurement's threads are (a
    # report or a dry run without --cores has none).
    cores: Callable[[], int]
    node_by_name: dict[str, dict[str, Any]] = field(init=False)
    skipped: dict[str, str] = field(init=False)
    experiments_on: list[str] = field(init=False)
    left_out: dict[str, dict[str, str]] = field(init=False)

    def __post_init__(self) -> None:
        self.node_by_name = {n["name"]: n for n in self.config["nodes"]}
        self.skipped = {n.name: r for n in self.run.nodes if (r := skip_reason(n))}
        self.experiments_on = [
            name for name in self.run.experiments.switched_on() if any(self.node_runs(n, name) for n in self.active)
        ]
        self.left_out = {
            n: parts
            for n in self.active
            if Capability.THIS_MACHINE in capabilities_of(self.node_by_name[n]["runner"])
            and (parts := self._left_out_here(n))
        }

    @property
    def nodes(self) -> list[str]:
        return [n.name for n in self.run.nodes]

    @property
    def active(self) -> list[str]:
        """The nodes that are not skipped."""
        return [n for n in self.nodes if n not in self.skipped]

    def reps(self, experiment: str) -> list[int]:
        """Round 0's repetitions of ``experiment``: ``repeats``, or more where
        ``experiment_repeats`` asks (the paper overlay, for reachable verdicts)."""
        return list(range(1, self.run.repeats_of(experiment) + 1))

    def node_runs(self, node: str, experiment: str) -> bool:
        """Whether ``experiment`` runs on ``node``: its `experiments` list, and
        whether its runner has what the experiment needs (iolab/registry.py)."""
        entry = self.node_by_name[node]
        chosen = entry.get("experiments")
        if chosen is not None and experiment not in chosen:
            return False
        return can_host(capabilities_of(entry["runner"]), experiment) and has_setting(entry, experiment)

    def _left_out_here(self, node: str) -> dict[str, str]:
        """What cannot run on ``node`` as this user (iolab.privilege): part
        ("trace", "mpi netns") -> why. MPI over only transports that are all
        left out is a config error."""
        parts = {}
        for experiment in self.experiments_on:
            if self.node_runs(node, experiment) and (why := experiment_left_out(experiment)):
                parts[experiment] = why
        if "mpi" in self.experiments_on and self.node_runs(node, "mpi"):
            mpi = self.node_by_name[node].get("mpi") or {}
            transports = mpi.get("transports") or self.run.experiments.mpi.transports
            left = transports_left_out(transports)
            if left and set(left) >= set(transports):
                raise ConfigError(
                    f"iolab: node {node} runs MPI only over {', '.join(transports)}, and "
                    f"{next(iter(left.values()))}; add shm or tcp to its transports"
                )
            parts |= {f"mpi {t}": why for t, why in left.items()}
        return parts

    def measures(self, node: str, experiment: str) -> bool:
        """Whether ``node`` measures ``experiment`` in this run: it runs there,
        is not skipped and is not left out."""
        return (
            self.node_runs(node, experiment)
            and node not in self.skipped
            and experiment not in self.left_out.get(node, {})
        )

    def left_out_flags(self, experiment: str) -> str:
        """iolab.tables' --left-out flags: the nodes ``experiment`` was left out of, with why."""
        return " ".join(
            shlex.quote(f"--left-out={n}={parts[experiment]}")
            for n, parts in sorted(self.left_out.items())
            if experiment in parts
        )

    # --- keys and files ------------------------------------------------------

    def peer_entries(self, experiment: str, node: str) -> list[dict[str, Any]]:
        """The other nodes a measurement runs on besides ``node`` (MPI peers,
        the perftest server)."""
        return [self.node_by_name[p] for p in peer_names(self.node_by_name[node], experiment)]

    def experiment_settings(self, experiment: str) -> dict[str, Any]:
        """An experiment's config section as its measurement gets it, with
        what its settings model derives from the rest of the config."""
        experiments = self.config["experiments"]
        return REGISTRY[experiment].settings.from_workflow(experiments[experiment], experiments)

    def run_key(self, experiment: str, node: str) -> str:
        """The directory a measurement fills: the settings, the node's and its
        peers' entries, the parts left out, and the code that measures."""
        h = hashlib.sha256()
        peers = self.peer_entries(experiment, node)
        h.update(
            json.dumps([self.experiment_settings(experiment), self.node_by_name[node], *peers], sort_keys=True).encode()
        )
        # Measured without its left-out parts: not the directory a run with them fills.
        parts = sorted(p for p in self.left_out.get(node, {}) if p.startswith(f"{experiment} "))
        if parts:
            h.update(json.dumps(parts).encode())
        update_with_sources(h, measuring_sources(experiment), self.basedir)
        return h.hexdigest()[:12]

    def raw_files(self, experiment: str) -> list[str]:
        return [
            f"data/raw/{node}/{experiment}/{self.run_key(experiment, node)}/rep{rep}.csv"
            for node in self.nodes
            if self.measures(node, experiment)
            for rep in self.reps(experiment)
        ]

    def other_nodes_flag(self, experiment: str, node: str) -> str:
        """The other nodes a measurement involves: its load generator's node,
        or the nodes it spans (MPI peers, the perftest server)."""
        setting = REGISTRY[experiment].client_setting
        if setting:
            client = self.node_by_name[node].get(setting)
            if not client or client == node:
                return ""
            return f"--client-node {shlex.quote(json.dumps(self.node_by_name[client], sort_keys=True))}"
        peers = self.peer_entries(experiment, node)
        return f"--peer-nodes {shlex.quote(json.dumps(peers, sort_keys=True))}" if peers else ""

    def dependency_groups(self, experiment: str, node: str) -> str:
        """What `python -m iolab.deps check` checks before a measurement."""
        programs = set(REGISTRY[experiment].programs)
        if not programs:
            here = Capability.THIS_MACHINE in capabilities_of(self.node_by_name[node]["runner"])
            return "ib" if here else "ssh"
        return "build mpi" if programs & set(MPI_PROGRAMS) else "build"

    def measurement_threads(self, node: str) -> int:
        """A measurement claims the whole node: every core of a local run, or
        its slurm.cpus_per_task when it is a SLURM job."""
        cpus = (self.node_by_name[node].get("slurm") or {}).get("cpus_per_task")
        return int(cpus or self.cores())

    def slurm_resource(self, node: str, key: str) -> Any:
        return (self.node_by_name[node].get("slurm") or {}).get(key, "")

    def node_status(self) -> dict[str, dict[str, Any]]:
        """results/nodes.json: which nodes ran, which were skipped and why,
        and what was left out of each."""
        return {
            n: {
                "runner": self.node_by_name[n]["runner"],
                "kind": self.node_by_name[n].get("kind", "auto"),
                "status": "skipped" if n in self.skipped else "measured",
                "reason": self.skipped.get(n, ""),
                "experiments": [
                    e for e in self.experiments_on if self.node_runs(n, e) and e not in self.left_out.get(n, {})
                ],
                "left_out": self.left_out.get(n, {}),
                "mpi_peers": (self.node_by_name[n].get("mpi") or {}).get("peers", []),
                "mpi_peer_of": [m for m in self.nodes if n in (self.node_by_name[m].get("mpi") or {}).get("peers", [])],
            }
            for n in self.nodes
        }

    # --- notebooks -------------------------------------------------------------

    @property
    def notebooks_on(self) -> list[str]:
        return list(notebooks_run(set(self.experiments_on), self.run, len(self.active)))

    def notebook_figures(self, notebook: str) -> list[str]:
        return list(figures_drawn(notebook, set(self.experiments_on), self.run, len(self.active)))

    def notebook_tables(self, notebook: str) -> list[str]:
        """The tables a notebook reads that this run measures."""
        return [f"results/tables/{e}.parquet" for e in NOTEBOOKS[notebook].tables if e in self.experiments_on]

    def notebook_table_params(self, notebook: str) -> str:
        """papermill -p flags: each table, or "" for an experiment that is disabled."""
        tables = {
            e: f"results/tables/{e}.parquet" if e in self.experiments_on else "" for e in NOTEBOOKS[notebook].tables
        }
        return " ".join(f"-p {e}_table {shlex.quote(path)}" for e, path in tables.items())


@dataclass
class Rounds:
    """Adaptive precision's rounds (rules/precision.smk): round 0 is the
    configured repetitions; each round's plan adds repetitions of only what
    feeds an unsettled verdict, on the claims' node. ``plan_of(k)`` reads
    round k's plan (in the workflow, through its checkpoint)."""

    plan: RunPlan
    plan_of: PlanOf

    @property
    def enabled(self) -> bool:
        return bool(self.plan.run.precision.enabled)

    @cached_property
    def claim_experiments(self) -> list[str]:
        return list(claim_experiments())

    @cached_property
    def claim_node(self) -> str:
        """The node claims are judged on (iolab.claims.evaluate: the
        first in name order that runs the cost-model experiments)."""
        return sorted(n for n in self.plan.active if all(self.plan.node_runs(n, e) for e in COST_MODEL_EXPERIMENTS))[0]

    def extra_reps(self, experiment: str, rounds: int) -> list[int]:
        """Repetitions of ``experiment`` that rounds 1..``rounds`` add."""
        reps: list[int] = []
        for j in range(rounds):
            reps += self.plan_of(j)["next"].get(experiment, {}).get("reps", [])
        return reps

    def raw_files_through(self, experiment: str, rounds: int) -> list[str]:
        """The configured repetitions, plus what rounds 1..``rounds`` added on the claims' node."""
        node = self.claim_node
        key = self.plan.run_key(experiment, node)
        extra = [f"data/raw/{node}/{experiment}/{key}/rep{r}.csv" for r in self.extra_reps(experiment, rounds)]
        return self.plan.raw_files(experiment) + extra

    def final_round(self) -> int:
        """The first round whose plan says stop."""
        k = 0
        while not self.plan_of(k)["stop"]:
            k += 1
        return k

    def table_inputs(self, experiment: str, exists: Callable[[str], bool] = os.path.exists) -> list[str]:
        """The raw files a tidy table is built from: with adaptive precision, every round's."""
        if (
            not self.enabled
            or experiment not in self.claim_experiments
            or not self.plan.measures(self.claim_node, experiment)
        ):
            return self.plan.raw_files(experiment)
        first = PRECISION_PLAN.format(round=0)
        if not exists(first):
            # Round 0's plan as a plain input until it exists: asked through
            # the checkpoint, Snakemake keeps a table that exists (from a run
            # without precision) and neither plans nor measures anything.
            return [*self.plan.raw_files(experiment), first]
        return self.raw_files_through(experiment, self.final_round())

    def rep_round(self, experiment: str, rep: int | str) -> tuple[int, Mapping[str, Any] | None]:
        """The round that added repetition ``rep`` (0: planned in advance),
        and that round's plan for ``experiment`` (None for round 0)."""
        rep = int(rep)
        if not self.enabled or rep <= self.plan.run.repeats_of(experiment):
            return 0, None
        j = 0
        while True:
            planned = self.plan_of(j)["next"].get(experiment, {})
            if rep in planned.get("reps", []):
                return j + 1, planned
            j += 1

    def rep_settings(self, experiment: str, rep: int | str) -> dict[str, Any]:
        """An experiment's settings for one repetition: an extra round's echo
        repetition measures only the cells its plan lists."""
        settings = self.plan.experiment_settings(experiment)
        _, planned = self.rep_round(experiment, rep)
        return {**settings, "cells": planned["cells"]} if planned and "cells" in planned else settings

    def notebook_plans(self, judges_claims: bool) -> list[str]:
        """The precision plans the claims notebook's verdicts depend on
        (every round's, with adaptive precision); none otherwise."""
        if not judges_claims or not self.enabled or not set(COST_MODEL_EXPERIMENTS) <= set(self.plan.experiments_on):
            return []
        return [PRECISION_PLAN.format(round=k) for k in range(self.final_round() + 1)]


def tool_path(interpreter: str, path: str) -> str:
    """PATH with the running interpreter's folder first: jobs call python,
    papermill and jupytext by name, and they must be the ones beside the
    interpreter running Snakemake (the venv's, even when it was started
    as .venv/bin/snakemake without activating it)."""
    first = os.path.dirname(interpreter)
    if path.split(os.pathsep)[0] == first:
        return path
    return os.pathsep.join(p for p in (first, path) if p)


def say_skipped(plan: RunPlan, say: Callable[[str], None]) -> None:
    """One line per node skipped and per part left out."""
    for name, reason in plan.skipped.items():
        say(f"iolab: skipping node {name}: {reason}")
    for node, parts in plan.left_out.items():
        for part, why in parts.items():
            say(f"iolab: leaving out {part} on {node}: {why}")
