"""Bad configuration stops the run with one line naming the key.

Each bad value is checked in-process against the schema and the semantic
checks (iolab.config, what rules/common.smk calls); one real snakemake run
proves the wiring: the workflow stops with that one line.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import REPO, snakemake

from iolab import config as iolab_config
from iolab.inventory import NodeEntry, node_schema
from iolab.registry import REGISTRY
from iolab.schema import subschema
from iolab.settings import Experiments, ExperimentSettings, PrecisionSettings, RunConfig

# (overlay, text the one-line error must contain)
BAD_CONFIGS = [
    ({"repeats": 0}, "config error at repeats: 0 is less than the minimum of 1"),
    ({"sede": 1}, "config error at (top level): Additional properties are not allowed ('sede'"),
    (
        {"experiments": {"syscall": {"batches": "many"}}},
        "config error at experiments.syscall.batches: 'many' should be of type integer",
    ),
    ({"nodes": [{"name": "local", "runner": "teleport"}]}, "config error at nodes[0].runner: 'teleport' is not one of"),
    (
        {"nodes": [{"name": "local", "runner": "local", "kind": "hypervisor"}]},
        "config error at nodes[0].kind: 'hypervisor' is not one of",
    ),
    (
        {"nodes": [{"name": "a", "runner": "local"}, {"name": "a", "runner": "local"}]},
        "config error at nodes: node name 'a' is used more than once",
    ),
    (
        {"nodes": [{"name": "local", "runner": "local", "cpus": {"probe": 4096}}]},
        "config error at nodes[0].cpus.probe: CPU 4096 does not exist on this machine",
    ),
    (
        {"nodes": [{"name": "local", "runner": "local", "cpus": {"server": "0-4095"}}]},
        "config error at nodes[0].cpus.server: CPU 4095 does not exist on this machine",
    ),
    (
        {"nodes": [{"name": "local", "runner": "local", "cpus": {"server": "0-"}}]},
        "config error at nodes[0].cpus.server: '0-' is not allowed here: CPU, or CPU list",
    ),
    (
        {"experiments": {"syscall": {"variants": ["getppid", "fork"]}}},
        "config error at experiments.syscall.variants[1]: 'fork' is not one of",
    ),
    (
        {"nodes": [{"name": "../etc", "runner": "local"}]},
        "config error at nodes[0].name: '../etc' is not allowed here: Node name (letters",
    ),
    (
        {"experiments": {"uring_batch": {"presets": ["sqpoll"]}}},
        "config error at experiments.uring_batch.presets: must include 'default'",
    ),
    ({"experiments": {"uring_batch": {"n": [2, 4]}}}, "config error at experiments.uring_batch.n: must include 1"),
    (
        {"experiments": {"sendrecv": {"ack_modes": ["sometimes"]}}},
        "config error at experiments.sendrecv.ack_modes[0]: 'sometimes' is not one of",
    ),
    (
        {"experiments": {"echo": {"only": ["epoll", "turbo"]}}},
        "config error at experiments.echo.only: 'turbo' is not a preset",
    ),
    (
        {"experiments": {"echo": {"preset_groups": {"fast": ["epoll", "turbo"]}}}},
        "config error at experiments.echo.preset_groups.fast: 'turbo' is neither a preset nor a group declared above",
    ),
    (
        {"experiments": {"echo": {"preset_groups": {"sqpoll": ["epoll", "default"]}}}},
        "config error at experiments.echo.preset_groups.sqpoll: 'sqpoll' is also a preset",
    ),
    (
        {"experiments": {"echo": {"presets": {"fast": ["--sqpoll", "--nope"]}}}},
        "config error at experiments.echo.presets.fast: '--nope' is not a flag of echo-uring",
    ),
    (
        {"experiments": {"echo": {"presets": {"aff": ["--sqpoll", "--sq-aff", "{spare}"]}}}},
        "config error at experiments.echo.presets.aff: '{spare}': the only placeholders are {spare_cpu} and "
        "{spare_cpus}",
    ),
    (
        {"experiments": {"echo": {"presets": {"epoll": ["--sqpoll"]}}}},
        "config error at experiments.echo.presets.epoll: '--sqpoll' is not a flag of echo-epoll",
    ),
    (
        {"experiments": {"echo": {"presets": {"g": {"server": "go-uring", "flags": ["--rings", "2", "--nope"]}}}}},
        "config error at experiments.echo.presets.g: '--nope' is not a flag of echo-go-uring",
    ),
    (
        {"experiments": {"echo": {"presets": {"g": {"server": "go-fast"}}}}},
        "config error at experiments.echo.presets.g.server: 'go-fast' is not one of",
    ),
    (
        {"experiments": {"echo": {"presets": {"x": ["rm -rf /"]}}}},
        "config error at experiments.echo.presets.x[0]: 'rm -rf /' does not match",
    ),
    (
        {"experiments": {"uring_batch": {"max_not_inline": 2}}},
        "config error at experiments.uring_batch.max_not_inline: 2 is greater than the maximum of 1",
    ),
    # YAML's .nan passes JSON Schema's minimum and maximum (NaN compares false both ways).
    (
        {"experiments": {"uring_batch": {"max_not_inline": float("nan")}}},
        "config error at experiments.uring_batch.max_not_inline: nan is not a finite number",
    ),
    (
        {"nodes": [{"name": "far", "runner": "ssh"}]},
        "config error at nodes[0].host: node 'far' uses the ssh runner and needs a host",
    ),
    (
        {"nodes": [{"name": "a", "runner": "local", "echo_client": "b"}]},
        "config error at nodes[0].echo_client: 'b' is not a node in the inventory",
    ),
    (
        {"nodes": [{"name": "a", "runner": "local", "experiments": ["mpi", "teleport"]}]},
        "config error at nodes[0].experiments: 'teleport' is not an experiment",
    ),
    (
        {"nodes": [{"name": "a", "runner": "vm", "vm": {"accel": "hvf"}}]},
        "config error at nodes[0].vm.accel: 'hvf' is not one of",
    ),
    (
        {"experiments": {"mpi": {"transports": ["shm", "infiniband"]}}},
        "config error at experiments.mpi.transports[1]: 'infiniband' is not one of",
    ),
    (
        {"experiments": {"mpi": {"ranks": [4, 8]}}},
        "config error at experiments.mpi.ranks: ping-pong runs in the 2-rank launch",
    ),
    (
        {"experiments": {"mpi": {"algorithms": {"bcast": "telepathy"}}}},
        "config error at experiments.mpi.algorithms.bcast: 'telepathy' is not one of",
    ),
    (
        {"experiments": {"mpi": {"algorithms": None, "selections": ["pinned", "default"]}}},
        "config error at experiments.mpi.selections: pinned and default would run the same algorithms",
    ),
    (
        {"experiments": {"echo": {"setups": [{"client": "thread-per-connection", "layout": "shared"}], "pipeline": 4}}},
        "config error at experiments.echo.setups[0]: the thread-per-connection client is closed-loop ping-pong",
    ),
    (
        {
            "experiments": {
                "echo": {
                    "setups": [
                        {"client": "event-loop", "layout": "pinned", "pipeline": 8},
                        {"client": "thread-per-connection", "layout": "shared", "pipeline": 8},
                    ]
                }
            }
        },
        "config error at experiments.echo.setups[1]: the thread-per-connection client is closed-loop ping-pong",
    ),
    (
        {"experiments": {"echo": {"setups": [{"client": "event-loop", "layout": "shared", "only": ["go_nett"]}]}}},
        "config error at experiments.echo.setups[0].only: 'go_nett' is not a preset",
    ),
    (
        {"experiments": {"echo": {"setups": [{"client": "event-loop", "layout": "spread"}]}}},
        "config error at experiments.echo.setups[0].layout: 'spread' is not one of",
    ),
    (
        {"experiments": {"mpi": {"selections": ["tuned"]}}},
        "config error at experiments.mpi.selections[0]: 'tuned' is not one of",
    ),
    (
        {"nodes": [{"name": "a", "runner": "local", "address": "10.0.0.1", "mpi": {"peers": ["b"]}}]},
        "config error at nodes[0].mpi.peers: 'b' is not a node in the inventory",
    ),
    (
        {
            "nodes": [
                {"name": "a", "runner": "local", "address": "10.0.0.1", "mpi": {"peers": ["b"]}},
                {"name": "b", "runner": "local"},
            ]
        },
        "config error at nodes[0].mpi.peers: 'b' is a local node; MPI peers are ssh nodes",
    ),
    (
        {
            "nodes": [
                {"name": "a", "runner": "local", "mpi": {"peers": ["b"]}},
                {"name": "b", "runner": "ssh", "host": "b.example.org"},
            ]
        },
        "config error at nodes[0].address: node 'a' has MPI peers, which reach it by its address",
    ),
    (
        {"nodes": [{"name": "a", "runner": "local", "mpi": {"transports": ["shm", "nodes"]}}]},
        "config error at nodes[0].mpi.transports: nodes runs across this node's mpi.peers; set them",
    ),
    (
        {"nodes": [{"name": "a", "runner": "local", "ib": {"peer": "b"}}]},
        "config error at nodes[0].ib.peer: 'b' is not a node in the inventory",
    ),
    (
        {"nodes": [{"name": "a", "runner": "local", "ib": {"peer": "b"}}, {"name": "b", "runner": "local"}]},
        "config error at nodes[0].ib.peer: perftest runs between a local or ssh node and an ssh peer",
    ),
    (
        {"experiments": {"ib": {"iterations": 1}}},
        "config error at experiments.ib.iterations: 1 is less than the minimum of 5",
    ),
    (
        {"experiments": {"mpi": {"methods": ["probe", "imb"]}}},
        "config error at experiments.mpi.methods[1]: 'imb' is not one of",
    ),
    (
        {"experiments": {"mpi": {"methods": ["osu"]}}},
        "config error at experiments.mpi.methods: the models, figures and claims use mpi-probe's own timing",
    ),
    # An ssh field never changes meaning by its spelling: no option, no new line.
    (
        {"nodes": [{"name": "a", "runner": "ssh", "host": "-oProxyCommand=touch /tmp/x"}]},
        "config error at nodes[0].host: '-oProxyCommand=touch /tmp/x' is not allowed here: ssh: host name",
    ),
    (
        {"nodes": [{"name": "a", "runner": "ssh", "host": "a", "user": "bob\nHost *"}]},
        "config error at nodes[0].user: 'bob\\nHost *' is not allowed here: ssh: login user",
    ),
    (
        {"nodes": [{"name": "a", "runner": "ssh", "host": "a", "identity_file": "k\n  ProxyCommand x"}]},
        "config error at nodes[0].identity_file: ",
    ),
    (
        {"nodes": [{"name": "a", "runner": "ssh", "host": "a", "known_hosts": "-x"}]},
        "config error at nodes[0].known_hosts: ",
    ),
    (
        {"nodes": [{"name": "a", "runner": "local", "address": "10.0.0.1 slots=99\nevil"}]},
        "config error at nodes[0].address: ",
    ),
    (
        {"nodes": [{"name": "a", "runner": "ssh", "host": "a.example.org", "mpi": {"transports": ["netns"]}}]},
        "config error at nodes[0].mpi.transports: netns needs the network namespaces of the machine",
    ),
]

# Lines snakemake itself prints before the workflow is even parsed.
PREAMBLE = (
    "Using workflow specific profile",
    "Config file config/config.yaml is extended",
    "Config file config/nodes.yaml is extended",
)


@pytest.mark.parametrize("overlay,expected", BAD_CONFIGS, ids=[e.split(":")[0][16:] or "top" for _, e in BAD_CONFIGS])
def test_bad_config_gives_one_line(tmp_path: Path, overlay: dict, expected: str) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(overlay))
    with pytest.raises(iolab_config.ConfigError) as info:
        iolab_config.load(bad)
    message = str(info.value)
    assert "\n" not in message and expected in message, message


def test_the_default_config_and_every_profile_load() -> None:
    cfg = iolab_config.load()
    # The schema's defaults are filled in: a key config.yaml leaves out.
    assert cfg["experiments"]["mpi"]["netns"]["hosts"] >= 2
    for profile in sorted((iolab_config.REPO / "config" / "profiles").glob("*.yaml")):
        assert iolab_config.load(profile)["profile"] == profile.stem


def test_merge_is_snakemakes_overlay() -> None:
    base = {"a": {"b": 1, "c": [1, 2]}, "d": 1}
    assert iolab_config.merge(base, {"a": {"c": [3]}, "e": 2}) == {"a": {"b": 1, "c": [3]}, "d": 1, "e": 2}
    assert base == {"a": {"b": 1, "c": [1, 2]}, "d": 1}


@pytest.mark.parametrize("overlay,expected", [BAD_CONFIGS[0], BAD_CONFIGS[-1]], ids=["schema", "semantics"])
def test_the_workflow_stops_with_that_one_line(workflow: Path, tmp_path: Path, overlay: dict, expected: str) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(overlay))
    res = snakemake(workflow, "-n", "--cores", "1", "--configfile", str(bad))
    assert res.returncode != 0
    lines = [ln for ln in (res.stdout + res.stderr).splitlines() if ln.strip() and not ln.startswith(PREAMBLE)]
    assert len(lines) == 1, lines
    assert expected in lines[0], lines[0]


def test_profiles_are_valid(workflow: Path) -> None:
    for profile in sorted((workflow / "config" / "profiles").glob("*.yaml")):
        res = snakemake(workflow, "-n", "--cores", "1", "--configfile", str(profile))
        assert res.returncode == 0, f"{profile.name}: {res.stderr[-2000:]}"


def test_example_inventory_is_valid_and_plans_mpi_across_nodes(workflow: Path) -> None:
    res = snakemake(workflow, "-n", "-p", "--cores", "1", "--configfile", "config/nodes.example.yaml")
    assert res.returncode == 0, res.stderr[-2000:]
    # metal1 measures MPI with its peer's entry passed along; metal2 measures
    # nothing of its own.
    assert "data/raw/metal1/mpi/" in res.stdout and "data/raw/metal2/" not in res.stdout
    commands = [ln for ln in res.stdout.splitlines() if "iolab.measure mpi" in ln and "data/raw/metal1/mpi/" in ln]
    assert commands and all("--peer-nodes" in c and '"name": "metal2"' in c for c in commands), commands


# -- the typed node inventory (iolab/inventory.py) --------------------------------


def _schema_keys(schema: dict) -> dict:
    """Each key of a node entry's schema, its sections' keys nested."""
    return {k: _schema_keys(v) if "properties" in v else None for k, v in schema["properties"].items()}


def _model_keys(model: type) -> dict:
    out = {}
    for name, field in model.model_fields.items():
        nested = (
            field.annotation
            if isinstance(field.annotation, type) and hasattr(field.annotation, "model_fields")
            else None
        )
        out[name] = _model_keys(nested) if nested is not None else None
    return out


def test_the_node_model_names_the_schemas_keys() -> None:
    assert _model_keys(NodeEntry) == _schema_keys(node_schema())


def _without_optional_nones(value: object, schema: dict) -> object:
    """A model dump as the schema fills it in: keys the schema gives no default are absent when unset."""
    if isinstance(value, list):
        return [_without_optional_nones(v, schema.get("items", {})) for v in value]
    if not isinstance(value, dict):
        return value
    props = schema.get("properties", {})
    return {
        k: _without_optional_nones(v, props.get(k, {}))
        for k, v in value.items()
        if not (v is None and "default" not in props.get(k, {}))
    }


@pytest.mark.parametrize(
    "entry",
    [
        {"name": "x", "runner": "ssh", "host": "h"},
        {"name": "g", "runner": "vm", "vm": {"accel": "tcg"}},
        {"name": "m", "runner": "local", "mpi": {"interface": "lo"}, "cpus": {"server": "0-1"}},
    ],
)
def test_a_nodes_defaults_are_the_ones_snakemake_fills_in(entry: dict) -> None:
    # The defaults are written once, in the schema: the model's must be the
    # very values the schema validation fills into the same entry.
    filled = {**iolab_config.load(), "nodes": [dict(entry)]}
    iolab_config.validate_config(filled)
    typed = NodeEntry.of(entry).as_config()
    assert _without_optional_nones(typed, node_schema()) == filled["nodes"][0]
    assert NodeEntry.of(filled["nodes"][0]) == NodeEntry.of(entry)


@pytest.mark.parametrize(
    "entry, expected",
    [
        ({"name": "n", "runner": "vm", "vm": {"accel": "fast"}}, "node 'n': vm.accel: Input should be 'kvm' or 'tcg'"),
        ({"name": "n", "runner": "ssh", "port": "twenty"}, "node 'n': port: Input should be a valid integer"),
        ({"name": "n", "runner": "local", "cpu": {}}, "node 'n': cpu: Extra inputs are not permitted"),
        ({"name": "n"}, "node 'n': runner: Field required"),
    ],
)
def test_a_bad_node_entry_is_one_line_naming_the_key(entry: dict, expected: str) -> None:
    with pytest.raises(ValueError) as e:
        NodeEntry.of(entry)
    assert str(e.value).startswith(expected) and "\n" not in str(e.value)


# -- the typed experiment sections (iolab/settings.py) ------------------------------

# experiment -> its section's model, as the registry declares it.
SETTINGS = {name: e.settings for name, e in REGISTRY.items()}


def test_every_experiment_has_a_typed_section() -> None:
    # The registry's models are the section classes, each naming its
    # experiment, and the config's experiments model is made of them.
    assert all(model.EXPERIMENT == name for name, model in SETTINGS.items())
    assert set(SETTINGS.values()) == set(ExperimentSettings.__subclasses__())
    assert set(Experiments.model_fields) == set(SETTINGS)


@pytest.mark.parametrize("experiment", sorted(SETTINGS))
def test_each_experiment_model_names_the_schemas_keys(experiment: str) -> None:
    model = SETTINGS[experiment]
    section = subschema("experiments", experiment)
    assert set(_model_keys(model)) - model.WORKFLOW_KEYS == set(_schema_keys(section)) - model.LOAD_KEYS
    for name, nested in _model_keys(model).items():
        if nested is not None:
            assert nested == _schema_keys(section["properties"][name]), name


@pytest.mark.parametrize("experiment", sorted(SETTINGS))
def test_an_experiments_defaults_are_the_ones_snakemake_fills_in(experiment: str) -> None:
    # The section as a user may write it (only what has no default), filled
    # in by the schema validation, and the same section typed: equal.
    config = iolab_config.load()
    written = {"presets": config["experiments"]["echo"]["presets"]} if experiment == "echo" else {}
    config["experiments"][experiment] = dict(written)
    iolab_config.validate_config(config)
    filled = config["experiments"][experiment]
    model = SETTINGS[experiment]
    typed = model.of(written)
    assert typed == model.of(filled)
    # (echo's presets are typed as Presets: compared above)
    left_out = set(model.WORKFLOW_KEYS) | set(written)
    dumped = typed.model_dump(mode="json", exclude=left_out)
    section = subschema("experiments", experiment)
    assert _without_optional_nones(dumped, section) == {k: v for k, v in filled.items() if k not in left_out}


@pytest.mark.parametrize(
    "experiment, section, expected",
    [
        (
            "echo",
            {"presets": {"epoll": []}, "duration": "soon"},
            "experiments.echo: duration: Value error, a number is needed",
        ),
        (
            "echo",
            {"presets": {"x": {"flags": ["--sqpoll"]}}},
            "experiments.echo: presets: Value error, preset 'x' is a mapping without its server",
        ),
        ("mpi", {"netns": {"hosts": 2, "rate": 1}}, "experiments.mpi: netns.rate: Extra inputs are not permitted"),
        ("syscall", {"variants": ["getpid"]}, "experiments.syscall: variants.0: Input should be 'getppid' or 'enosys'"),
    ],
)
def test_a_bad_experiment_section_is_one_line_naming_the_key(experiment: str, section: dict, expected: str) -> None:
    with pytest.raises(ValueError) as e:
        SETTINGS[experiment].of(section)
    assert str(e.value).startswith(expected) and "\n" not in str(e.value)


@pytest.mark.parametrize("experiment", [name for name, e in REGISTRY.items() if e.probe_mode])
def test_each_cost_probe_key_is_a_flag_of_cost_probe(experiment: str) -> None:
    # iolab.experiments.cost_probes passes each key but the switch as the flag of its name.
    source = (REPO / "native" / "probes" / "cost_probe.c").read_text()
    flags = set(re.findall(r'\{ "([a-z-]+)", required_argument', source))
    keys = {k.replace("_", "-") for k in SETTINGS[experiment].model_fields} - {"enabled"}
    assert keys <= flags, keys - flags


def as_flag_values(settings: dict) -> dict[str, str]:
    """A section's values as cost-probe prints its defaults: key=value, the
    key as its flag, a list comma-separated."""
    return {
        k.replace("_", "-"): ",".join(map(str, v)) if isinstance(v, (list, tuple)) else str(v)
        for k, v in settings.items()
        if k != "enabled"
    }


@pytest.mark.parametrize("experiment", [name for name, e in REGISTRY.items() if e.probe_mode])
def test_each_cost_probe_mode_defaults_to_its_schema_section(native_build: Path, experiment: str) -> None:
    """Every mode declares its defaults in its own *_mode.c; they are the
    schema's, key for key (cost-probe MODE --defaults)."""
    res = subprocess.run(
        [str(native_build / "cost-probe"), REGISTRY[experiment].probe_mode, "--defaults"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 0, res.stderr
    in_c = dict(line.split("=", 1) for line in res.stdout.splitlines())
    schema = SETTINGS[experiment]().model_dump()
    assert in_c == as_flag_values(schema)
    # The comparison sees one changed default (the negative control).
    assert in_c != as_flag_values({**schema, "batches": schema["batches"] + 1})


def test_the_precision_model_names_the_schemas_keys_and_fills_in_its_defaults() -> None:
    assert set(_model_keys(PrecisionSettings)) == set(_schema_keys(subschema("precision")))
    config = iolab_config.load()
    config["precision"] = {}
    iolab_config.validate_config(config)
    assert PrecisionSettings.of({}).model_dump() == config["precision"]
    with pytest.raises(ValueError, match=r"^precision: max_rounds: Input should be a valid integer"):
        PrecisionSettings.of({"max_rounds": "many"})


def test_the_run_config_names_the_schemas_keys() -> None:
    assert set(RunConfig.model_fields) == set(_schema_keys(subschema()))
    assert set(Experiments.model_fields) == set(_schema_keys(subschema("experiments"))) == set(SETTINGS)


@pytest.mark.parametrize("profile", [None, *sorted(p.name for p in (REPO / "config" / "profiles").glob("*.yaml"))])
def test_validation_returns_the_config_typed(profile: str | None) -> None:
    overlays = [REPO / "config" / "profiles" / profile] if profile else []
    config = iolab_config.load(*overlays)
    run = iolab_config.validate_config(config)
    assert run.profile == config["profile"] and run.repeats == config["repeats"]
    assert run.nodes == tuple(NodeEntry.of(n) for n in config["nodes"])
    assert run.precision.model_dump() == config["precision"]
    # Each configured section is the one its experiment's run code gets.
    assert set(run.experiments.configured()) == set(config["experiments"])
    for name, section in run.experiments.configured().items():
        assert section == SETTINGS[name].of(config["experiments"][name])


def test_a_config_the_model_cannot_type_is_one_line() -> None:
    config = iolab_config.load()
    config["experiments"]["syscall"]["batches"] = "many"  # past the schema, e.g. a hand-built dict
    with pytest.raises(
        iolab_config.ConfigError,
        match=r"^config error at experiments\.syscall\.batches: Input should be a valid integer",
    ):
        iolab_config.check_semantics(config)


@pytest.mark.parametrize(
    "experiment, node, settings, expected",
    [
        (
            "syscall",
            {"name": "local", "runner": "local"},
            {"batches": 2},
            "iolab: experiments.syscall: batches: must be bigger than or equal to 10 (it is 2)",
        ),
        (
            "echo",
            {"name": "local", "runner": "local"},
            {"presets": {"epoll": []}, "duration": 0, "cells": [["epoll", 1, 128]]},
            "iolab: experiments.echo: duration: must be bigger than 0 (it is 0)",
        ),
        (
            "syscall",
            {"name": "local", "runner": "local", "port": 0},
            {},
            "iolab: node 'local': port: must be bigger than or equal to 1 (it is 0)",
        ),
    ],
)
def test_a_section_given_by_hand_is_held_to_the_schemas_ranges(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], experiment: str, node: dict, settings: dict, expected: str
) -> None:
    # python -m iolab.measure, as a user may call it with a section written by
    # hand: the ranges Snakemake's validation would have applied still hold.
    from iolab import measure

    out = tmp_path / "raw" / "rep1.csv"
    status = measure.main(
        [
            experiment,
            "--node",
            json.dumps(node),
            "--settings",
            json.dumps(settings),
            "--rep",
            "1",
            "--seed",
            "1",
            "--output",
            str(out),
        ]
    )
    assert status == 1
    assert capsys.readouterr().err.strip() == expected
    assert not out.parent.exists()


def test_the_config_readme_is_what_the_config_says() -> None:
    # config/README.md is generated (python -m iolab.configdoc): a profile
    # or a schema description changed without it fails here.
    from iolab import configdoc

    assert configdoc.README.read_text() == configdoc.render(), "run python -m iolab.configdoc"
    for profile in sorted((configdoc.CONFIG / "profiles").glob("*.yaml")):
        assert f"| `{profile.stem}` |" in configdoc.render()


def _preset_lists(path: Path) -> dict[str, tuple[str, ...]]:
    """Where a config file lists preset names (as written: groups unexpanded)."""
    experiments = (yaml.safe_load(path.read_text()) or {}).get("experiments") or {}
    echo, latency = experiments.get("echo") or {}, experiments.get("latency") or {}
    where = {f"{path.name}: echo.only": echo.get("only"), f"{path.name}: latency.presets": latency.get("presets")}
    where |= {f"{path.name}: echo.setups[{i}].only": s.get("only") for i, s in enumerate(echo.get("setups") or [])}
    return {k: tuple(v) for k, v in where.items() if v}


def repeated_preset_lists(paths: list[Path], groups: dict[str, list[str]]) -> list[str]:
    """Lists of three or more presets written out in two places, or written
    where a group holds the same presets: each should name a group."""
    found: dict[frozenset[str], list[str]] = {}
    for path in paths:
        for where, names in _preset_lists(path).items():
            if len(names) >= 3:
                found.setdefault(frozenset(names), []).append(where)
    out = [" and ".join(places) for places in found.values() if len(places) > 1]
    expanded = {frozenset(iolab_config._expanded(members, groups)): name for name, members in groups.items()}
    out += [
        f"{place} is group {expanded[names]}"
        for names, places in found.items()
        if names in expanded
        for place in places
    ]
    return out


def test_a_preset_group_stands_for_its_presets_and_no_list_is_kept_twice(tmp_path: Path) -> None:
    files = [REPO / "config" / "config.yaml", *sorted((REPO / "config" / "profiles").glob("*.yaml"))]
    groups = yaml.safe_load(files[0].read_text())["experiments"]["echo"]["preset_groups"]
    assert repeated_preset_lists(files, groups) == []
    # A group (and a group inside a group) is its presets, in order, where
    # the config names it; the groups themselves never reach a measurement.
    modern = iolab_config.load(REPO / "config" / "profiles" / "modern.yaml")["experiments"]
    assert modern["echo"]["only"] == [*groups["modern"], "bundle_buf_inc", "napi"]
    assert modern["latency"]["presets"] == [*groups["modern"], "bundle_buf_inc"]
    assert "preset_groups" not in modern["echo"]
    # Negative control: the list written out again in a profile is found.
    again = tmp_path / "again.yaml"
    again.write_text(yaml.safe_dump({"experiments": {"echo": {"only": list(reversed(groups["ring_options"]))}}}))
    assert repeated_preset_lists([*files, again], groups) == ["again.yaml: echo.only is group ring_options"]
    twice = tmp_path / "twice.yaml"
    twice.write_text(yaml.safe_dump({"experiments": {"latency": {"presets": ["epoll", "default", "async"]}}}))
    assert repeated_preset_lists([again, twice, twice], {}) == [
        "twice.yaml: latency.presets and twice.yaml: latency.presets"
    ]
