"""The configuration, typed: the whole validated config (``RunConfig``), the
experiments' sections (``experiments.<name>``) and the adaptive-precision
section (``precision``), with every default taken from config/schema.yaml
(iolab.schema); the node inventory's entries are iolab.inventory's.

The workflow passes a section to ``python -m iolab.measure`` as JSON, with
the schema's defaults filled in, sometimes with a key the workflow adds
(``WORKFLOW_KEYS``: an adaptive-precision round's echo cells, the latency
presets' echo flags). Each experiment's run code reads it through
``<Experiment>Settings.of``, which also accepts a hand-written section
(tests, ``python -m iolab.measure``) and fills in what it leaves out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, NamedTuple, get_args

from pydantic import Field, PlainValidator, create_model, field_validator

from .inventory import NodeEntry
from .presets import preset_server
from .schema import Section, from_schema, subschema


def _number(value: Any) -> int | float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("a number is needed")
    return value


# The schema's "number": an int stays an int, so the commands and the records
# show a value as it was configured.
Number = Annotated[int | float, PlainValidator(_number)]


def _d(*path: str) -> Any:
    return from_schema("experiments", *path)


class ExperimentSettings(Section):
    """An experiment's section; each subclass is one experiment's, and the
    ``experiments`` model below is built from them (iolab.registry names
    each experiment's)."""

    EXPERIMENT: ClassVar[str] = ""
    # Whether every config has the section (the cost probes always run).
    ALWAYS: ClassVar[bool] = False

    @classmethod
    def from_workflow(cls, section: Mapping[str, Any], experiments: Mapping[str, Any]) -> dict[str, Any]:
        """The section as the workflow hands it to the measurement:
        ``section`` as configured, plus the WORKFLOW_KEYS it derives from the
        rest of ``experiments`` (the config's, as validated)."""
        return dict(section)

    # Keys the workflow adds to the config section (rules/common.smk).
    WORKFLOW_KEYS: ClassVar[frozenset[str]] = frozenset()
    # Keys the config's loading reads and removes (iolab.config), so no
    # measurement sees them.
    LOAD_KEYS: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def where(cls, value: Mapping[str, Any]) -> str:
        return f"experiments.{cls.EXPERIMENT}"


# -- echo and latency ---------------------------------------------------------


class Preset(NamedTuple):
    """An echo preset: its server (a presets.SERVER_PROGRAMS key) and flags."""

    server: str
    flags: tuple[str, ...]


def _presets(specs: Any) -> Any:
    """The config's presets (flag lists, or {server, flags}) as Presets."""
    if not isinstance(specs, Mapping):
        return specs
    out = {}
    for name, spec in specs.items():
        if isinstance(spec, Mapping) and "server" not in spec:
            raise ValueError(f"preset {name!r} is a mapping without its server")
        out[name] = spec if isinstance(spec, Preset) else Preset(*preset_server(name, spec))
    return out


class EchoSetup(Section):
    client: Literal["auto", "event-loop", "event-loop-uring", "thread-per-connection"]
    layout: Literal["pinned", "shared"]
    only: tuple[str, ...] | None = None  # these presets only (None: every one)
    # These cells only (None: the sweep's connections and bytes).
    connections: tuple[int, ...] | None = None
    bytes: tuple[int, ...] | None = None
    pipeline: int | None = None  # requests in flight per connection (None: the sweep's)
    duration: Number | None = None  # measured seconds per cell (None: the sweep's)
    warmup: Number | None = None  # seconds per cell before measuring (None: the sweep's)

    @classmethod
    def client_models(cls) -> tuple[str, ...]:
        """The load generator's models a command line may name ("auto" picks
        one of them per node, so it is not one)."""
        return tuple(m for m in get_args(cls.model_fields["client"].annotation) if m != "auto")

    @classmethod
    def layouts(cls) -> tuple[str, ...]:
        """The CPU layouts: server and client pinned apart, or sharing the CPUs."""
        return get_args(cls.model_fields["layout"].annotation)


class EchoSettings(ExperimentSettings):
    EXPERIMENT = "echo"
    WORKFLOW_KEYS = frozenset({"cells"})
    LOAD_KEYS = frozenset({"preset_groups"})  # expanded in only and latency.presets
    enabled: bool = _d("echo", "enabled")
    duration: Number = _d("echo", "duration")
    warmup: Number = _d("echo", "warmup")
    connections: tuple[int, ...] = _d("echo", "connections")
    bytes: tuple[int, ...] = _d("echo", "bytes")
    pipeline: int = _d("echo", "pipeline")
    loadgen_threads: int = _d("echo", "loadgen_threads")
    setups: tuple[EchoSetup, ...] = _d("echo", "setups")
    port: int = _d("echo", "port")
    presets: dict[str, Preset]
    only: tuple[str, ...] | None = _d("echo", "only")
    # An adaptive-precision round measures only these [preset, connections, bytes].
    cells: tuple[tuple[str, int, int], ...] | None = None

    _presets = field_validator("presets", mode="before")(_presets)


class LatencySettings(ExperimentSettings):
    EXPERIMENT = "latency"
    WORKFLOW_KEYS = frozenset({"preset_specs"})
    enabled: bool = _d("latency", "enabled")
    duration: Number = _d("latency", "duration")
    warmup: Number = _d("latency", "warmup")
    connections: int = _d("latency", "connections")
    bytes: int = _d("latency", "bytes")
    loads: tuple[Number, ...] = _d("latency", "loads")
    fixed_rate_loads: tuple[Number, ...] = _d("latency", "fixed_rate_loads")
    presets: tuple[str, ...] = _d("latency", "presets")
    port: int = _d("latency", "port")
    # The presets' echo flags (experiments.echo.presets), so new flags measure
    # into a new run key.
    preset_specs: dict[str, Preset] = {}  # noqa: RUF012 (a pydantic field: each model gets its own)

    _preset_specs = field_validator("preset_specs", mode="before")(_presets)

    @classmethod
    def from_workflow(cls, section: Mapping[str, Any], experiments: Mapping[str, Any]) -> dict[str, Any]:
        specs = experiments["echo"]["presets"]
        return {**section, "preset_specs": {p: specs[p] for p in section["presets"]}}


# -- MPI ------------------------------------------------------------------------


class MpiAlgorithms(Section):
    bcast: str | None = None
    allreduce: str | None = None
    alltoall: str | None = None
    barrier: str | None = None


class MpiNetns(Section):
    hosts: int = _d("mpi", "netns", "hosts")
    subnet: str = _d("mpi", "netns", "subnet")
    tbf_rate_mbit: Number = _d("mpi", "netns", "tbf_rate_mbit")
    tbf_burst_bytes: int = _d("mpi", "netns", "tbf_burst_bytes")
    tbf_sizes: tuple[int, ...] = _d("mpi", "netns", "tbf_sizes")


class MpiReference(Section):
    enabled: bool = _d("mpi", "reference", "enabled")
    sizes: tuple[int, ...] = _d("mpi", "reference", "sizes")
    iterations: int = _d("mpi", "reference", "iterations")
    series: int = _d("mpi", "reference", "series")
    warmup: int = _d("mpi", "reference", "warmup")


class MpiSettings(ExperimentSettings):
    EXPERIMENT = "mpi"
    enabled: bool = _d("mpi", "enabled")
    mpirun: str = _d("mpi", "mpirun")
    mpicc: str = _d("mpi", "mpicc")
    # "nodes" is not configured here, as in the schema: a node with
    # mpi.peers adds it (experiments.mpi.node_transports).
    transports: tuple[Literal["shm", "tcp", "netns", "netns_tbf"], ...] = _d("mpi", "transports")
    ranks: tuple[int, ...] = _d("mpi", "ranks")
    benchmarks: tuple[Literal["pingpong", "bcast", "allreduce", "alltoall", "barrier"], ...] = _d("mpi", "benchmarks")
    min_bytes: int = _d("mpi", "min_bytes")
    max_bytes: int = _d("mpi", "max_bytes")
    sizes: tuple[int, ...] | None = _d("mpi", "sizes")
    warmup: int = _d("mpi", "warmup")
    iterations: int = _d("mpi", "iterations")
    large_bytes: int = _d("mpi", "large_bytes")
    large_iterations: int = _d("mpi", "large_iterations")
    series: int = _d("mpi", "series")
    sync: Literal["barrier", "window"] = _d("mpi", "sync")
    methods: tuple[Literal["probe", "osu"], ...] = _d("mpi", "methods")
    osu_iterations: int | None = _d("mpi", "osu_iterations")
    osu_series: int | None = _d("mpi", "osu_series")
    selections: tuple[Literal["pinned", "default"], ...] = _d("mpi", "selections")
    window_us: int = _d("mpi", "window_us")
    tcp_interface: str = _d("mpi", "tcp_interface")
    algorithms: MpiAlgorithms | None = _d("mpi", "algorithms")
    extra_mca: dict[str, str | int | float] = _d("mpi", "extra_mca")
    netns: MpiNetns = _d("mpi", "netns")
    reference: MpiReference = _d("mpi", "reference")
    timeout: Number = _d("mpi", "timeout")

    def pinned_algorithms(self) -> dict[str, str]:
        """collective -> the algorithm configured for it (those configured)."""
        return {k: v for k, v in (self.algorithms.model_dump() if self.algorithms else {}).items() if v}


# -- the rest -------------------------------------------------------------------


class TraceSettings(ExperimentSettings):
    EXPERIMENT = "trace"
    enabled: bool = _d("trace", "enabled")
    seconds: int = _d("trace", "seconds")


class IbSettings(ExperimentSettings):
    EXPERIMENT = "ib"
    enabled: bool = _d("ib", "enabled")
    iterations: int = _d("ib", "iterations")
    device: str | None = _d("ib", "device")
    gid_index: int | None = _d("ib", "gid_index")
    timeout: int = _d("ib", "timeout")


class PrecisionSettings(Section):
    """Adaptive precision (iolab.planning.precision)."""

    enabled: bool = from_schema("precision", "enabled")
    budget_minutes: Number = from_schema("precision", "budget_minutes")
    reps_per_round: int = from_schema("precision", "reps_per_round")
    max_rounds: int = from_schema("precision", "max_rounds")
    target_rel_halfwidth: Number | None = from_schema("precision", "target_rel_halfwidth")

    @classmethod
    def where(cls, value: Mapping[str, Any]) -> str:
        return "precision"


# -- sections declared by the schema alone ------------------------------------


def _schema_type(prop: Mapping[str, Any]) -> Any:
    """The field type of a schema property of a flat section."""
    if prop.get("type") == "array":
        # A type made at run time from the schema: a checker sees an
        # expression where it expects a type, and cannot check it anyway.
        return tuple[_schema_type(prop["items"]), ...]  # type: ignore[misc]
    if "enum" in prop:
        return Literal[tuple(prop["enum"])]
    return {"integer": int, "number": Number, "boolean": bool, "string": str}[prop["type"]]


def _section_from_schema(name: str) -> type[ExperimentSettings]:
    """The settings model of a flat experiment section (scalars and lists,
    like the cost probes'), built from its schema alone: a new experiment of
    that shape needs no class here."""
    section = subschema("experiments", name)
    fields = {
        key: (_schema_type(prop), Field(default=prop.get("default"))) for key, prop in section["properties"].items()
    }
    # create_model's overloads cannot take fields given as **kwargs from data.
    model: type[ExperimentSettings] = create_model(  # type: ignore[call-overload]
        "".join(part.title() for part in name.split("_")) + "Settings", __base__=ExperimentSettings, **fields
    )
    model.EXPERIMENT = name
    model.ALWAYS = name in subschema("experiments").get("required", ())
    return model


# Held here: __subclasses__() holds its classes weakly, and a class made at
# run time with nothing else pointing at it is gone at the next garbage
# collection (it happened to the first of these once the cost probes' were
# made here too).
SCHEMA_SECTIONS: dict[str, type[ExperimentSettings]] = {}
for _name in subschema("experiments")["properties"]:
    if _name not in {cls.EXPERIMENT for cls in ExperimentSettings.__subclasses__()}:
        SCHEMA_SECTIONS[_name] = _section_from_schema(_name)


def settings_model(experiment: str) -> type[ExperimentSettings]:
    """The settings model of ``experiment``'s section."""
    return next(cls for cls in ExperimentSettings.__subclasses__() if cls.EXPERIMENT == experiment)


class _ExperimentsBase(Section):
    def configured(self) -> dict[str, ExperimentSettings]:
        """experiment -> its section, for those the config has."""
        return {name: section for name in type(self).model_fields if (section := getattr(self, name)) is not None}

    def switched_on(self) -> dict[str, ExperimentSettings]:
        """``configured``, less those whose section says ``enabled: false``
        (a section without the switch, like the cost probes', is always on)."""
        return {name: section for name, section in self.configured().items() if getattr(section, "enabled", True)}

    if TYPE_CHECKING:
        # The sections are fields made at import from the schema (below),
        # which a type checker cannot see: to it, each is Any.
        def __getattr__(self, name: str) -> Any: ...


# ``experiments``: one field per experiment's section model, required for
# those every config has; declared by the section classes above (fields as
# **kwargs from data, which create_model's overloads cannot take).
Experiments: type[_ExperimentsBase] = create_model(  # type: ignore[call-overload]
    "Experiments",
    __base__=_ExperimentsBase,
    **{cls.EXPERIMENT: (cls, ...) if cls.ALWAYS else (cls | None, None) for cls in ExperimentSettings.__subclasses__()},
)
if TYPE_CHECKING:
    ExperimentsModel = _ExperimentsBase
else:
    ExperimentsModel = Experiments


class PaperSettings(Section):
    title: str = from_schema("paper", "title")


class RunConfig(Section):
    """The whole config, as the schema validated it (rules/common.smk through
    iolab.config.validate_config): what the workflow and the checks read."""

    overlay: str = from_schema("overlay")
    seed: int
    repeats: int
    experiment_repeats: dict[str, int] = from_schema("experiment_repeats")
    nodes: tuple[NodeEntry, ...]
    experiments: ExperimentsModel
    precision: PrecisionSettings = from_schema("precision")
    paper: PaperSettings = from_schema("paper")

    @classmethod
    def where(cls, value: Mapping[str, Any]) -> str:
        return ""  # the error's key path starts at the top of the config

    def repeats_of(self, experiment: str) -> int:
        """Round 0's repetitions of ``experiment``."""
        return max(self.repeats, self.experiment_repeats.get(experiment, self.repeats))
