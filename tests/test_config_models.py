"""The typed configuration: the node entries, each experiment's section, the
precision settings and the run config name the schema's keys, fill in the
defaults snakemake fills in, and turn a value they cannot type into one
line naming the key."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from conftest import REPO

from iolab import config as iolab_config
from iolab.inventory import NodeEntry, node_schema
from iolab.registry import REGISTRY
from iolab.schema import subschema
from iolab.settings import Experiments, ExperimentSettings, PrecisionSettings, RunConfig

# (overlay, text the one-line error must contain)


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


@pytest.mark.parametrize("overlay", [None, *sorted(p.name for p in (REPO / "config" / "overlays").glob("*.yaml"))])
def test_validation_returns_the_config_typed(overlay: str | None) -> None:
    overlays = [REPO / "config" / "overlays" / overlay] if overlay else []
    config = iolab_config.load(*overlays)
    run = iolab_config.validate_config(config)
    assert run.overlay == config["overlay"] and run.repeats == config["repeats"]
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
