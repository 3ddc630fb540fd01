"""The two registries everything else derives its lists from.

``EXPERIMENTS`` (also ``REGISTRY``): one entry per experiment, built from
its manifest (config/experiments/<name>.yaml, iolab.manifests): what it runs
and what decides what it measures, what one repetition writes and in which
format, its settings model, the tidy table built from it, what it needs from
a node, the other nodes it spans, and whether the claims read it. The
workflow (rules/common.smk), the measurement entry point (iolab.measure),
the readers, the tables and the precision planner read it.

``NOTEBOOKS``: one entry per notebook, the tables it reads and the figures
of each experiment it draws (both from the manifests' ``notebooks`` and
``figures``), its own figures that combine experiments (each with its
caption, iolab.paths.caption) and the report category they go under. The
workflow, the paper and the tests read it.

The code of each experiment is held by reference on each side, checked
against this registry at import: its run_repetition in
iolab.experiments.RUNS, its tidy step in iolab.rooms.ROOMS (each side
imports the base, never the other, so the base holds no references to
either). DESIGN.md's "Adding an experiment" lists what adding one touches.

This module is in the base of the package: light (the workflow imports it
at every start), and imported by both the run side and the read side.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .capabilities import Capability
from .manifests import ManifestError, manifests
from .paths import EXPERIMENT_MANIFESTS, room_packages
from .presets import modern_features
from .settings import ExperimentSettings, settings_model


@dataclass(frozen=True)
class Experiment:
    name: str
    # Its config section, typed (iolab.settings), with the schema's defaults.
    settings: type[ExperimentSettings]
    # The raw file's format and version: its header has the line
    # "# iolab-raw: <raw_format>" (iolab.formats), which its reader checks;
    # bump the version with a reader kept for the old one.
    raw_format: str
    # Native programs it runs (built on the node); see native/programs.mk.
    programs: tuple[str, ...] = ()
    # Python modules whose code decides what it measures, its run module
    # first (iolab.experiments.RUNS holds that module's run_repetition):
    # digested into the run key with the programs' sources, so new code
    # measures into a new directory.
    code: tuple[str, ...] = ()
    # cost-probe's subcommand, for the cost probes.
    probe_mode: str = ""
    # Files one repetition writes besides rep<N>.csv and its sidecar, and
    # those of them its tidy table reads.
    extra_outputs: tuple[str, ...] = ()
    table_reads: tuple[str, ...] = ()
    # What the runner of a node must be able to do for it to run there.
    capabilities: frozenset[Capability] = frozenset()
    # The inventory setting naming the other nodes it spans ("mpi.peers",
    # "ib.peer": a list or one name), or "" for none.
    peers: str = ""
    # Whether a node must set ``peers`` for it to run there (perftest needs
    # its server end; MPI runs on one node without peers).
    needs_peers: bool = False
    # The inventory setting naming the node its load generator runs on
    # ("echo_client"), or "" when the client runs beside the server.
    client_setting: str = ""
    # Programs built only where the node has their toolchain (the Go
    # servers): the experiment builds them itself and records why one could
    # not be built; its sources are digested into the run key all the same.
    optional_programs: tuple[str, ...] = ()
    # Whether the claims read its table (and adaptive precision may add
    # repetitions of it).
    claims: bool = False

    @property
    def run_module(self) -> str:
        """The dotted name of the module that measures it (its first ``code``)."""
        return self.code[0].removesuffix(".py").removesuffix("/__init__").replace("/", ".")


# A manifest's registry keys that are no Experiment field: the experiments
# whose code decides what this one measures too, and the cost model's mark.
DERIVED_KEYS = frozenset({"code_of", "cost_model"})


def registry_keys() -> frozenset[str]:
    """The keys a manifest's ``registry`` may have: Experiment's fields (its
    name and settings come from the file and its ``settings``) and DERIVED_KEYS."""
    return frozenset(f.name for f in dataclasses.fields(Experiment)) - {"name", "settings"} | DERIVED_KEYS


def check_registry_keys(directory: Path = EXPERIMENT_MANIFESTS) -> None:
    """Refuse, in one line naming its file, a manifest whose ``registry`` has
    a key the registry does not know (a typo would otherwise be a TypeError)."""
    allowed = registry_keys()
    for name, manifest in manifests(directory).items():
        unknown = set(manifest["registry"] or {}) - allowed
        if unknown:
            raise ManifestError(
                f"{directory / (name + '.yaml')}: registry: unknown key(s) {', '.join(sorted(unknown))} "
                f"(allowed: {', '.join(sorted(allowed))})"
            )


def _experiment(name: str, manifest: Mapping[str, Any], code_of: Mapping[str, tuple[str, ...]]) -> Experiment:
    """An experiment's entry from its manifest's ``registry`` (iolab.manifests)."""
    fields = dict(manifest["registry"])
    fields.pop("cost_model", None)
    # ``code_of``: experiments whose code decides what this one measures too
    # (trace and latency run echo's cells), after its own.
    shared = tuple(path for other in fields.pop("code_of", ()) for path in code_of[other])
    tuples = ("programs", "optional_programs", "code", "extra_outputs", "table_reads")
    for key in tuples:
        if key in fields:
            fields[key] = tuple(fields[key] or ())
    fields["code"] = (*fields.get("code", ()), *shared)
    fields["capabilities"] = frozenset(Capability(c) for c in fields.get("capabilities", ()))
    return Experiment(name, settings_model(name), **fields)


def _experiments() -> dict[str, Experiment]:
    check_registry_keys()
    own_code = {name: tuple(m["registry"].get("code", ())) for name, m in manifests().items()}
    return {name: _experiment(name, m, own_code) for name, m in manifests().items()}


EXPERIMENTS: dict[str, Experiment] = _experiments()
# The cost probes the cost model (s, w, t(n)) is fitted from (their
# manifests say ``cost_model: true``): a node that ran them can judge the
# claims, and a run without them has no model.
COST_MODEL_EXPERIMENTS = tuple(name for name, m in manifests().items() if m["registry"].get("cost_model"))
REGISTRY = EXPERIMENTS


def extra_output_paths(experiment: str, raw: Path) -> list[Path]:
    """The files one repetition of ``experiment`` writes beside its raw file
    ``rep<N>.csv`` (and its sidecar): ``rep<N>.<extra>`` for each declared extra."""
    return [raw.with_name(f"{raw.stem}.{extra}") for extra in EXPERIMENTS[experiment].extra_outputs]


def can_host(capabilities: frozenset[Capability], experiment: str) -> bool:
    """Whether a runner with ``capabilities`` can run ``experiment``."""
    return EXPERIMENTS[experiment].capabilities <= capabilities


def peer_names(entry: Mapping[str, Any], experiment: str) -> list[str]:
    """The names of the other nodes ``experiment`` spans from the node of
    inventory ``entry`` (its ``peers`` setting: a list or one name)."""
    dotted = EXPERIMENTS[experiment].peers
    if not dotted:
        return []
    value: object = entry
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    if not value:
        return []
    return [str(v) for v in value] if isinstance(value, (list, tuple)) else [str(value)]


def has_setting(entry: Mapping[str, Any], experiment: str) -> bool:
    """Whether a node's inventory entry sets what ``experiment`` needs there."""
    return not EXPERIMENTS[experiment].needs_peers or bool(peer_names(entry, experiment))


# -- notebooks ---------------------------------------------------------------

# What a figure or notebook may depend on besides the experiments that ran:
# the run's typed config (iolab.settings.RunConfig) and the nodes measured.
Condition = Callable[[Any, int], bool]


def _always(run: Any, nodes: int) -> bool:
    return True


@dataclass(frozen=True)
class Figure:
    name: str
    # Drawn only when this experiment runs ("": always).
    experiment: str = ""
    # And only when this holds of the run (e.g. both MPI timing methods ran).
    when: Condition = _always


@dataclass(frozen=True)
class Notebook:
    name: str
    # The experiments whose tables it reads (its `<experiment>_table` parameters).
    tables: tuple[str, ...]
    # The figures it writes, under stable names (users cite them); each has
    # its caption (iolab.paths.caption: in its experiment's room, else
    # report/captions/ for the notebook's own).
    figures: tuple[Figure, ...]
    # The Snakemake report's category for its figures.
    category: str
    # It runs when every one of these experiments runs...
    experiments: tuple[str, ...] = ()
    # ... and this holds (e.g. more than one node was measured).
    when: Condition = _always
    # Whether it judges the claims: it then reads adaptive precision's plans
    # (its verdicts keep a share of their error budget for the later rounds).
    judges_claims: bool = False


def _both_mpi_methods(run: Any, nodes: int) -> bool:
    return bool(run.experiments.mpi) and {"probe", "osu"} <= set(run.experiments.mpi.methods)


def _modern_presets(run: Any, nodes: int) -> bool:
    echo = run.experiments.echo
    if not echo:
        return False
    chosen = echo.only or list(echo.presets)
    return any(modern_features(echo.presets[name].flags) for name in chosen)


def _two_clients(run: Any, nodes: int) -> bool:
    """The echo experiment drives the default ring and epoll under more than
    one client setup (the sources' beside ours)."""
    echo = run.experiments.echo
    if not echo:
        return False
    chosen = echo.only or list(echo.presets)
    runs_both = [s for s in echo.setups if {"default", "epoll"} <= set(s.only or chosen)]
    return len({(s.client, s.layout) for s in runs_both}) > 1


def _several_nodes(run: Any, nodes: int) -> bool:
    return nodes > 1


# The clients of our setup as a config names them ("auto": the io_uring
# loop where the kernel allows it, else the epoll one).
OUR_CLIENTS = ("auto", "event-loop-uring", "event-loop")


def _headline_cells(run: Any, nodes: int) -> bool:
    """Some setup drives the default ring and epoll, on the node the claims
    are judged on (the first in name order that runs the cost-model
    experiments): the cells of the paper's first figure."""
    from .capabilities import capabilities_of

    echo = run.experiments.echo
    if not echo:
        return False
    chosen = echo.only or list(echo.presets)
    # Our setup (iolab.rooms.echo.summaries.OUR_SETUP): an event-loop client,
    # pinned CPUs, one request in flight.
    ours = [
        s
        for s in echo.setups
        if s.client in OUR_CLIENTS and s.layout == "pinned" and (s.pipeline or echo.pipeline) == 1
    ]
    if not any({"default", "epoll"} <= set(s.only or chosen) for s in ours):
        return False

    def runs(node: Any, experiment: str) -> bool:
        listed = node.experiments is None or experiment in node.experiments
        return listed and can_host(capabilities_of(node.runner), experiment)

    hosts = sorted((n for n in run.nodes if all(runs(n, e) for e in COST_MODEL_EXPERIMENTS)), key=lambda n: n.name)
    return bool(hosts) and runs(hosts[0], "echo")


# The conditions a manifest's figure may name (``when``).
CONDITIONS: dict[str, Condition] = {
    "both_mpi_methods": _both_mpi_methods,
    "headline_cells": _headline_cells,
    "modern_presets": _modern_presets,
    "two_clients": _two_clients,
}


def _notebook(name: str, category: str, own_figures: tuple[Figure, ...] = (), **kwargs: Any) -> Notebook:
    """A notebook's entry: its tables and its experiments' figures from the
    manifests (``notebooks``, ``figures``), then the figures of its own that
    combine experiments."""
    tables = tuple(e for e, m in manifests().items() if name in (m.get("notebooks") or ()))
    figures = []
    for experiment, manifest in manifests().items():
        for figure in manifest.get("figures") or ():
            if figure["notebook"] != name:
                continue
            when = figure.get("when")
            if when is not None and when not in CONDITIONS:
                raise ManifestError(
                    f"config/experiments/{experiment}.yaml: figure {figure['name']}: when: {when!r} is none of "
                    f"{', '.join(sorted(CONDITIONS))} (iolab.registry.CONDITIONS)"
                )
            figures.append(Figure(figure["name"], experiment, CONDITIONS[when] if when else _always))
    return Notebook(name, tables, (*figures, *own_figures), category, **kwargs)


NOTEBOOKS: dict[str, Notebook] = {
    n.name: n
    for n in (
        _notebook("cost_model", "Cost model", (Figure("cost_model_per_request"),)),
        _notebook("claims", "Claims re-tested", (Figure("claims_forest"),), judges_claims=True),
        _notebook("echo", "Echo servers", experiments=("echo",)),
        _notebook("collectives", "MPI collectives", experiments=("mpi",)),
        # nodes_mpi_ratio and nodes_echo_ratio exist only when two node kinds
        # were measured, which only the measurements tell: the manifest lists
        # them then.
        _notebook("nodes", "Nodes compared", (Figure("nodes_costs"),), when=_several_nodes),
    )
}


def check_notebooks_named() -> None:
    """Every notebook a manifest names (``notebooks``, a figure's
    ``notebook``) is declared here; a ManifestError names those that are not."""
    named = {n for m in manifests().values() for n in (m.get("notebooks") or ())}
    named |= {f["notebook"] for m in manifests().values() for f in m.get("figures") or ()}
    if named - set(NOTEBOOKS):
        raise ManifestError(
            f"the manifests name notebook(s) {', '.join(sorted(named - set(NOTEBOOKS)))}, which "
            f"iolab.registry.NOTEBOOKS does not declare ({', '.join(NOTEBOOKS)})"
        )


check_notebooks_named()


def notebooks_run(experiments: set[str], run: Any, nodes: int) -> list[str]:
    """The notebooks a run executes, in registry order."""
    return [n.name for n in NOTEBOOKS.values() if set(n.experiments) <= experiments and n.when(run, nodes)]


def figures_drawn(notebook: str, experiments: set[str], run: Any, nodes: int) -> list[str]:
    """The figures ``notebook`` draws in a run of ``experiments``."""
    return [
        f.name
        for f in NOTEBOOKS[notebook].figures
        if (not f.experiment or f.experiment in experiments) and f.when(run, nodes)
    ]


def claim_experiments() -> list[str]:
    """The experiments the claims read."""
    return [name for name, e in EXPERIMENTS.items() if e.claims]


def room_of(experiment: str) -> str:
    """The room (iolab/rooms/<room>/) whose tidy step reads ``experiment``:
    the one named after it, else the cost probes' for a cost-probe mode (the
    mode then needs no room of its own). "" for neither (iolab.rooms fails)."""
    if f"iolab.rooms.{experiment}" in room_packages():
        return experiment
    return "cost_probes" if EXPERIMENTS[experiment].probe_mode else ""


def figure_room(figure: str) -> str:
    """The room of the experiment whose manifest declares ``figure``; "" for
    a notebook's own figure over several experiments (or one that only the
    measurements list, such as nodes_mpi_ratio)."""
    for notebook in NOTEBOOKS.values():
        for f in notebook.figures:
            if f.name == figure and f.experiment:
                return room_of(f.experiment)
    return ""
