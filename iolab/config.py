"""Loading and checking the configuration, with one-line error messages.

``validate_config`` applies the schema (config/schema.yaml with the
experiments' manifests, iolab.schema; it also fills in the defaults), turns
its verbose errors into one line that names the offending key, and adds the
checks a schema cannot express; it returns the config typed
(iolab.settings.RunConfig). rules/common.smk calls it on the merged config
and reads the typed config; ``load`` merges config files the way snakemake's ``--configfile``
does, for tools and tests that check a config without starting a workflow.
"""

from __future__ import annotations

import copy
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from . import yamlfile
from .capabilities import Capability, capabilities_of, runs_experiments
from .inventory import NodeEntry, cpu_list
from .presets import SERVER_PROGRAMS, SPARE_CPU, SPARE_CPUS, server_flags
from .registry import REGISTRY
from .schema import config_schema
from .settings import EchoSettings, MpiSettings, RunConfig

REPO = Path(__file__).resolve().parent.parent
# What the Snakefile loads before any --configfile overlay.
BASE_FILES = (REPO / "config" / "config.yaml", REPO / "config" / "nodes.yaml")


class ConfigError(ValueError):
    """A configuration problem, with a one-line message for the user."""


def merge(base: dict[str, Any], overlay: Mapping[str, Any]) -> dict[str, Any]:
    """``overlay`` on top of ``base`` as snakemake merges config files:
    mappings merge key by key, anything else (lists included) is replaced."""
    out = copy.deepcopy(base)
    for key, value in overlay.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def validate_config(config: dict[str, Any]) -> RunConfig:
    """Schema first (filling in its defaults), then the semantic checks;
    raises ConfigError with one line naming the key. Returns the config, typed."""
    # JSON Schema's minimum and maximum let NaN through (it compares false
    # both ways), and YAML spells it .nan: refuse a non-finite number first.
    bad = _non_finite(config)
    if bad is not None:
        raise ConfigError(f"config error at {key_path(bad[0])}: {bad[1]!r} is not a finite number")
    err = find_validation_error(_schema_error(config))
    if err is not None:
        raise ConfigError(describe_validation_error(err))
    expand_preset_groups(config)
    return check_semantics(config)


def _schema_error(config: dict[str, Any]) -> BaseException | None:
    """Validate ``config`` in place against the whole schema (schema.yaml
    with the manifests' sections: iolab.schema.config_schema), filling in
    the schema's defaults as snakemake's validate() does; the error, if any.
    Not snakemake's validate(): it reads one schema file, and the manifests
    are one file each."""
    from jsonschema import Draft202012Validator, validators
    from jsonschema.exceptions import ValidationError as SchemaError

    validate_properties = Draft202012Validator.VALIDATORS["properties"]

    def set_defaults(validator: Any, properties: Any, instance: Any, schema: Any) -> Any:
        # Taken from jsonschema's FAQ, as snakemake does: a key's default is
        # set before its value is checked.
        if isinstance(instance, dict):
            for name, sub in properties.items():
                if "default" in sub:
                    instance.setdefault(name, copy.deepcopy(sub["default"]))
        yield from validate_properties(validator, properties, instance, schema)

    filling = validators.extend(Draft202012Validator, {"properties": set_defaults})
    try:
        filling(config_schema()).validate(config)
    except SchemaError as e:
        return e
    return None


def expand_preset_groups(config: dict[str, Any]) -> None:
    """Replace each preset group's name by its presets, in place, in every
    list of preset names (experiments.echo.only, a setup's only,
    experiments.latency.presets), and drop the groups: what is measured, and
    the key a measurement is stored under, see the presets themselves."""
    experiments = config.get("experiments") or {}
    echo = experiments.get("echo")
    if not isinstance(echo, dict):
        return
    groups: dict[str, list[str]] = {}
    presets = echo.get("presets") or {}
    for name, members in (echo.pop("preset_groups", None) or {}).items():
        where = f"config error at experiments.echo.preset_groups.{name}"
        if name in presets:
            raise ConfigError(f"{where}: {name!r} is also a preset; give the group a name of its own")
        for member in members:
            if member not in presets and member not in groups:
                raise ConfigError(f"{where}: {member!r} is neither a preset nor a group declared above this one")
        groups[name] = _expanded(members, groups)
    if not groups:
        return
    if echo.get("only"):
        echo["only"] = _expanded(echo["only"], groups)
    for setup in echo.get("setups") or []:
        if isinstance(setup, dict) and setup.get("only"):
            setup["only"] = _expanded(setup["only"], groups)
    latency = experiments.get("latency")
    if isinstance(latency, dict) and latency.get("presets"):
        latency["presets"] = _expanded(latency["presets"], groups)


def _expanded(names: Iterable[str], groups: Mapping[str, list[str]]) -> list[str]:
    """Names with each group's in its place; a preset named twice counts once."""
    out: list[str] = []
    for name in names:
        for preset in groups.get(name, [name]):
            if preset not in out:
                out.append(preset)
    return out


def _non_finite(value: Any, where: tuple[Any, ...] = ()) -> tuple[tuple[Any, ...], float] | None:
    """The first NaN or infinity in a config, with its key path."""
    if isinstance(value, float) and not math.isfinite(value):
        return where, value
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for k, v in items:
        found = _non_finite(v, (*where, k))
        if found is not None:
            return found
    return None


def read_file(path: Path) -> dict[str, Any]:
    """One config or inventory file's data (iolab.yamlfile: no anchors or
    aliases, text only, YAML 1.2 numbers); ConfigError with one line."""
    try:
        data = yamlfile.load(path)
    except yamlfile.YamlError as e:
        raise ConfigError(f"config error in {e}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config error in {path}: a config file is a mapping of keys, not a {type(data).__name__}")
    return data


def read_as_snakemake(
    workflow_files: Sequence[str | Path],
    given: Sequence[str | Path],
    overrides: Mapping[str, Any],
    replace_workflow_config: bool = False,
) -> dict[str, Any]:
    """The config as iolab reads its files (``read_file``), the same files in
    the same order as Snakemake merged them: the Snakefile's
    (``workflow_files``, unless ``--replace-workflow-config``), those given
    with --configfile (``given``), then --config's ``overrides``."""
    given_paths = [Path(p) for p in given]
    seen = {g.absolute() for g in given_paths}
    ours = [] if replace_workflow_config else [Path(p) for p in workflow_files if Path(p).absolute() not in seen]
    merged: dict[str, Any] = {}
    for path in [*ours, *given_paths]:
        merged = merge(merged, read_file(path))
    return merge(merged, copy.deepcopy(dict(overrides)))


def load(*overlays: Path, base: Iterable[Path] = BASE_FILES) -> dict[str, Any]:
    """The config a run with ``--configfile *overlays`` would see, validated."""
    config: dict[str, Any] = {}
    for path in (*base, *overlays):
        config = merge(config, read_file(Path(path)))
    validate_config(config)
    return config


def key_path(parts: Iterable[Any]) -> str:
    """``["nodes", 0, "cpus"]`` -> ``nodes[0].cpus``."""
    out = ""
    for p in parts:
        if isinstance(p, int):
            out += f"[{p}]"
        else:
            out += ("." if out else "") + str(p)
    return out or "(top level)"


def describe_validation_error(err: Any) -> str:
    """One line for a jsonschema ValidationError: where, and what is wrong."""
    where = key_path(err.absolute_path)
    validator = getattr(err, "validator", "")
    if validator == "additionalProperties":
        # jsonschema says "Additional properties are not allowed ('x' was unexpected)"
        allowed = sorted(err.schema.get("properties", {}))
        return f"config error at {where}: {err.message}; allowed keys: {', '.join(allowed)}"
    if validator == "enum":
        return f"config error at {where}: {err.instance!r} is not one of {err.validator_value}"
    if validator == "type":
        return f"config error at {where}: {err.instance!r} should be of type {err.validator_value}"
    if validator == "pattern" and err.schema.get("description"):
        # The pattern itself says little to a user; its description's first
        # sentence says what fits.
        what = " ".join(err.schema["description"].split()).split(". ")[0].rstrip(".")
        return f"config error at {where}: {err.instance!r} is not allowed here: {what}"
    return f"config error at {where}: {err.message}"


def find_validation_error(exc: BaseException | None) -> Any | None:
    """The jsonschema ValidationError in ``exc`` or among its causes, if any."""
    from jsonschema.exceptions import ValidationError as SchemaError

    seen: set[int] = set()
    stack: list[Any] = [exc]
    while stack:
        e = stack.pop()
        if id(e) in seen or e is None:
            continue
        seen.add(id(e))
        if isinstance(e, SchemaError):
            # Report the deepest, most specific cause.
            # (in a oneOf, the branch of the instance's own type).
            best = e
            while best.context:
                fitting = [c for c in best.context if c.validator != "type"] or best.context
                best = min(fitting, key=lambda c: len(c.absolute_schema_path))
            return best if best is not e and best.absolute_path else e
        if isinstance(e, BaseException):
            stack.extend(a for a in e.args if isinstance(a, BaseException))
            stack.extend([e.__cause__, e.__context__])
    return None


# Levels the cost model needs, whatever else a sweep adds.
MODEL_LEVELS = [
    ("syscall", "variants", "getppid", "the syscall s is taken from"),
    ("sendrecv", "transports", "tcp", "the transport of the echo model"),
    ("sendrecv", "ops", "send", "one of the two operations of an echo request"),
    ("sendrecv", "ops", "recv", "one of the two operations of an echo request"),
    ("sendrecv", "patterns", "single", "the pattern w is estimated from"),
    ("sendrecv", "ack_modes", "pingpong", "the ACK regime of an echo server"),
    ("sendrecv", "bytes", 16, "the article's message size"),
    ("uring_batch", "ops", "send", "one of the two operations of an echo request"),
    ("uring_batch", "ops", "recv", "one of the two operations of an echo request"),
    ("uring_batch", "presets", "default", "the ring the cost model is fitted to"),
    ("uring_batch", "n", 1, "the batch size of the article's t"),
    ("uring_batch", "bytes", 16, "the article's message size"),
]


def _check_presets(echo: EchoSettings) -> None:
    """A flag the server does not have is a config error before anything is
    measured, never a configuration recorded as "unavailable"."""
    flags = server_flags()
    for name, preset in echo.presets.items():
        program = SERVER_PROGRAMS[preset.server]
        where = f"config error at experiments.echo.presets.{name}"
        for token in preset.flags:
            if token.startswith("--") and token not in flags[program]:
                raise ConfigError(
                    f"{where}: {token!r} is not a flag of {program} (native/build/{program} --help lists them)"
                )
            if "{" in token and token not in (SPARE_CPU, SPARE_CPUS):
                raise ConfigError(f"{where}: {token!r}: the only placeholders are {SPARE_CPU} and {SPARE_CPUS}")


def typed(config: Mapping[str, Any] | RunConfig) -> RunConfig:
    """The validated config as the typed model; ConfigError if it does not fit."""
    try:
        return RunConfig.of(config)
    except ValueError as e:
        raise ConfigError(f"config error at {e}") from None


def check_semantics(config: Mapping[str, Any] | RunConfig, cpu_count: int | None = None) -> RunConfig:
    """Checks the schema cannot express, on a config the schema validated
    (so its defaults are filled in). Raises ConfigError on the first one;
    returns the config, typed."""
    run = typed(config)
    names = [n.name for n in run.nodes]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ConfigError(f"config error at nodes: node name {dupes[0]!r} is used more than once")
    ncpu = cpu_count if cpu_count is not None else os.cpu_count() or 1
    _check_nodes(run)
    unknown = sorted(set(run.experiment_repeats) - set(REGISTRY))
    if unknown:
        raise ConfigError(
            f"config error at experiment_repeats.{unknown[0]}: not an experiment (known: {', '.join(sorted(REGISTRY))})"
        )
    for i, node in enumerate(run.nodes):
        if Capability.CPUS_HERE not in capabilities_of(node.runner):
            continue
        for role, cpu in sorted(node.cpus.model_dump().items()):
            highest = max(cpu_list(cpu)) if cpu is not None else -1
            if highest >= ncpu:
                raise ConfigError(
                    f"config error at nodes[{i}].cpus.{role}: CPU {highest} does not exist on this "
                    f"machine (it has {ncpu} CPUs, numbered 0..{ncpu - 1})"
                )
    experiments = run.experiments
    for section, key, level, why in MODEL_LEVELS:
        if level not in getattr(getattr(experiments, section), key):
            raise ConfigError(f"config error at experiments.{section}.{key}: must include {level!r}, {why}")
    echo, latency = experiments.echo, experiments.latency
    if echo:
        _check_echo(echo)
    if latency:
        known = echo.presets if echo else {}
        unknown = sorted(set(latency.presets) - set(known))
        if unknown:
            raise ConfigError(
                f"config error at experiments.latency.presets: {unknown[0]!r} is not an "
                f"experiments.echo.presets name (known: {', '.join(sorted(known))})"
            )
    if experiments.mpi:
        _check_mpi(experiments.mpi)
    sc = experiments.syscall
    if sc.warmup_batches > sc.batches * 10:
        raise ConfigError(
            "config error at experiments.syscall.warmup_batches: more than 10x the measured "
            "batches; lower it or raise experiments.syscall.batches"
        )
    return run


def _check_echo(echo: EchoSettings) -> None:
    _check_presets(echo)
    for i, setup in enumerate(echo.setups):
        if setup.client == "thread-per-connection" and (setup.pipeline or echo.pipeline) != 1:
            raise ConfigError(
                f"config error at experiments.echo.setups[{i}]: the thread-per-connection client is "
                "closed-loop ping-pong; set its pipeline (or the sweep's) to 1 or drop that setup"
            )
    known = ", ".join(sorted(echo.presets))
    for i, setup in enumerate(echo.setups):
        unknown = sorted(set(setup.only or ()) - set(echo.presets))
        if unknown:
            raise ConfigError(
                f"config error at experiments.echo.setups[{i}].only: {unknown[0]!r} is not a preset (known: {known})"
            )
    unknown = sorted(set(echo.only or ()) - set(echo.presets))
    if unknown:
        raise ConfigError(f"config error at experiments.echo.only: {unknown[0]!r} is not a preset (known: {known})")


def _check_mpi(mpi: MpiSettings) -> None:
    if not mpi.enabled:
        return
    where = "config error at experiments.mpi"
    if mpi.min_bytes > mpi.max_bytes:
        raise ConfigError(f"{where}.min_bytes: {mpi.min_bytes} is above max_bytes ({mpi.max_bytes})")
    if "probe" not in mpi.methods:
        raise ConfigError(
            f"{where}.methods: the models, figures and claims use mpi-probe's own timing; "
            "keep probe in methods (osu runs beside it, for the comparison)"
        )
    if "pingpong" in mpi.benchmarks and 2 not in mpi.ranks:
        raise ConfigError(
            f"{where}.ranks: ping-pong runs in the 2-rank launch; add 2 to ranks or drop pingpong from benchmarks"
        )
    if mpi.sync == "window" and not mpi.window_us and not mpi.warmup:
        raise ConfigError(f"{where}.sync: window synchronisation needs window_us > 0 or warmup > 0 to size the window")
    if "netns_tbf" in mpi.transports and 2 not in mpi.ranks:
        raise ConfigError(f"{where}.transports: netns_tbf runs a 2-rank ping-pong; add 2 to ranks")
    if len(mpi.selections) > 1 and not mpi.pinned_algorithms():
        raise ConfigError(
            f"{where}.selections: pinned and default would run the same algorithms; "
            "pin some in experiments.mpi.algorithms or list one selection"
        )


def _check_nodes(run: RunConfig) -> None:
    nodes = run.nodes
    names = [n.name for n in nodes]
    known_experiments = set(run.experiments.configured())
    for i, node in enumerate(nodes):
        where = f"config error at nodes[{i}]"
        if Capability.LOGIN in capabilities_of(node.runner) and not node.host:
            raise ConfigError(f"{where}.host: node {node.name!r} uses the {node.runner} runner and needs a host")
        client = node.echo_client
        if client is not None and client not in names:
            raise ConfigError(
                f"{where}.echo_client: {client!r} is not a node in the inventory (nodes: {', '.join(names)})"
            )
        if client is not None and client != node.name and not node.reach:
            raise ConfigError(f"{where}.address: the echo client {client!r} needs this node's address")
        unknown = sorted(set(node.experiments or []) - known_experiments)
        if unknown:
            raise ConfigError(
                f"{where}.experiments: {unknown[0]!r} is not an experiment "
                f"(known: {', '.join(sorted(known_experiments))})"
            )
        _check_mpi_peers(nodes, node, where)
        _check_ib_peer(nodes, node, where)
        if not runs_experiments(node.runner):
            raise ConfigError(
                f"{where}.runner: {node.runner} is an MPI transport of a local node "
                "(experiments.mpi.transports), not a node of its own"
            )


def _peer_entry(nodes: Sequence[NodeEntry], node: NodeEntry, peer: str, key: str) -> NodeEntry:
    """The inventory entry ``key`` (e.g. "nodes[0].ib.peer") names: another node."""
    by_name = {n.name: n for n in nodes}
    entry = by_name.get(peer)
    if entry is None:
        raise ConfigError(f"{key}: {peer!r} is not a node in the inventory (nodes: {', '.join(by_name)})")
    if peer == node.name:
        raise ConfigError(f"{key}: a node is not its own peer")
    return entry


def _check_ib_peer(nodes: Sequence[NodeEntry], node: NodeEntry, where: str) -> None:
    """The ib experiment's server end: an ssh node of the inventory with an address."""
    peer = node.ib.peer
    if peer is None:
        return
    entry = _peer_entry(nodes, node, peer, f"{where}.ib.peer")
    if Capability.PEER not in capabilities_of(entry.runner) or Capability.DRIVES_PEERS not in capabilities_of(
        node.runner
    ):
        raise ConfigError(f"{where}.ib.peer: perftest runs between a local or ssh node and an ssh peer")
    if not entry.reach:
        raise ConfigError(f"{where}.ib.peer: the client reaches {peer!r} by its address; set its address")


def _check_mpi_peers(nodes: Sequence[NodeEntry], node: NodeEntry, where: str) -> None:
    """A node's MPI settings: peers that exist and can be reached, transports it can run."""
    peers = node.mpi.peers
    transports = node.mpi.transports or ()
    if peers and Capability.DRIVES_PEERS not in capabilities_of(node.runner):
        raise ConfigError(
            f"{where}.mpi.peers: mpirun across nodes starts on a local or ssh node, not a {node.runner} node"
        )
    if peers and not node.reach:
        raise ConfigError(
            f"{where}.address: node {node.name!r} has MPI peers, which reach it by its address; set address"
        )
    for peer in peers:
        entry = _peer_entry(nodes, node, peer, f"{where}.mpi.peers")
        if Capability.PEER not in capabilities_of(entry.runner):
            raise ConfigError(f"{where}.mpi.peers: {peer!r} is a {entry.runner} node; MPI peers are ssh nodes")
    if "nodes" in transports and not peers:
        raise ConfigError(f"{where}.mpi.transports: nodes runs across this node's mpi.peers; set them")
    netns = sorted({"netns", "netns_tbf"} & set(transports))
    if netns and Capability.THIS_MACHINE not in capabilities_of(node.runner):
        raise ConfigError(
            f"{where}.mpi.transports: {netns[0]} needs the network namespaces of "
            "the machine the run starts on; an ssh node cannot run it"
        )
