"""One manifest per experiment (config/experiments/<name>.yaml): the config's
schema, the typed settings and the registry derive from it, nothing about
one experiment is written elsewhere, and a bad manifest is refused in one
line naming its file."""

from __future__ import annotations

import copy
import dataclasses
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import REPO

from iolab import config as iolab_config
from iolab import formats, registry
from iolab import manifests as manifests_module
from iolab.manifests import SHARED_DESCRIPTIONS, ManifestError, experiments_schema, manifests, restated_defaults
from iolab.paths import EXPERIMENT_MANIFESTS
from iolab.registry import COST_MODEL_EXPERIMENTS, EXPERIMENTS, NOTEBOOKS, Experiment
from iolab.schema import config_schema
from iolab.settings import RunConfig


def test_every_experiment_has_one_manifest_and_the_registry_is_built_from_them() -> None:
    assert list(EXPERIMENTS) == list(manifests())
    assert sorted(p.stem for p in EXPERIMENT_MANIFESTS.glob("*.yaml")) == sorted(EXPERIMENTS)
    for name, manifest in manifests().items():
        entry = EXPERIMENTS[name]
        for key, value in manifest["registry"].items():
            if key in registry.DERIVED_KEYS:
                continue
            got = getattr(entry, key)
            if key == "capabilities":
                got = sorted(c.value for c in got)
                value = sorted(value)
            elif isinstance(got, tuple):
                # code_of's experiments' code follows the experiment's own.
                got = list(got[: len(value)])
            assert got == value, f"{name}.{key}"
    assert COST_MODEL_EXPERIMENTS == ("syscall", "sendrecv", "uring_batch")


def test_a_manifests_registry_keys_are_the_registrys_fields() -> None:
    fields = {f.name for f in dataclasses.fields(Experiment)} - {"name", "settings"}
    assert registry.registry_keys() - registry.DERIVED_KEYS == fields
    used = {key for m in manifests().values() for key in m["registry"]}
    assert registry.DERIVED_KEYS <= used, "a derived key no manifest uses"


def test_a_registry_key_the_registry_does_not_know_is_refused_naming_its_file(tmp_path: Path) -> None:
    directory = _copy(tmp_path)
    (directory / "zz_bad.yaml").write_text("order: 99\nregistry: {programs: [x], code_off: [echo]}\nsettings: {}\n")
    manifests_module.manifests.cache_clear()
    try:
        with pytest.raises(ManifestError) as info:
            registry.check_registry_keys(directory)
        # The negative control: the shipped manifests pass the same check.
        registry.check_registry_keys()
    finally:
        manifests_module.manifests.cache_clear()
    message = str(info.value)
    assert "\n" not in message and "zz_bad.yaml: registry: unknown key(s) code_off" in message, message


def test_the_schema_file_declares_no_experiment_and_the_manifests_fill_it() -> None:
    raw = yaml.safe_load((REPO / "config" / "schema.yaml").read_text())
    experiments = raw["properties"]["experiments"]
    assert experiments["properties"] == {} and experiments["required"] == []
    assembled = config_schema()["properties"]["experiments"]
    # Each manifest's settings as written, but for the descriptions of the
    # keys every experiment shares (manifests.SHARED_DESCRIPTIONS).
    as_written = {}
    for name, section in assembled["properties"].items():
        props = {
            key: {k: v for k, v in prop.items() if not (k == "description" and v == SHARED_DESCRIPTIONS.get(key))}
            for key, prop in section.get("properties", {}).items()
        }
        as_written[name] = {**section, "properties": props} if props else section
    assert as_written == {name: m["settings"] for name, m in manifests().items()}
    assert assembled["required"] == ["syscall", "sendrecv", "uring_batch", "nop"]


def test_a_manifests_defaults_and_bounds_reach_the_config() -> None:
    config = iolab_config.load()
    del config["experiments"]["syscall"]["batch_us"]
    typed: RunConfig = iolab_config.validate_config(config)
    default = manifests()["syscall"]["settings"]["properties"]["batch_us"]["default"]
    assert typed.experiments.syscall.batch_us == default == config["experiments"]["syscall"]["batch_us"]
    config = iolab_config.load()
    config["experiments"]["syscall"]["batch_us"] = 1
    with pytest.raises(iolab_config.ConfigError, match=r"^config error at experiments\.syscall\.batch_us: 1 is less"):
        iolab_config.validate_config(config)


def test_a_required_section_is_required() -> None:
    # Negative control for `required: true`: with it dropped from every
    # manifest, this config would pass.
    config = iolab_config.load()
    del config["experiments"]["nop"]
    with pytest.raises(iolab_config.ConfigError, match=r"'nop' is a required property"):
        iolab_config.validate_config(config)


def _copy(tmp_path: Path) -> Path:
    directory = tmp_path / "experiments"
    shutil.copytree(EXPERIMENT_MANIFESTS, directory)
    return directory


def test_a_new_manifest_is_a_new_section(tmp_path: Path) -> None:
    directory = _copy(tmp_path)
    (directory / "pipe.yaml").write_text(
        "order: 15\nregistry:\n  raw_format: cost-probe pipe v2\nsettings:\n"
        "  type: object\n  properties:\n    batches: {type: integer, default: 7}\n"
    )
    schema = experiments_schema(directory)
    assert list(schema["properties"])[:3] == ["syscall", "pipe", "sendrecv"]
    assert schema["properties"]["pipe"]["properties"]["batches"]["default"] == 7


@pytest.mark.parametrize(
    "text,expected",
    [
        ("order: 1\nregistry: {}\nsettings: {}\ncaptions: []\n", "unknown key(s) captions"),
        ("order: 1\nregistry: {}\nsettings: {}\nfigures: [{name: f}]\n", "figures: each is {name, notebook}"),
        (
            "order: 1\nregistry: {}\nsettings: {}\nraw_columns: [{name: c, optional: 0, counter: true}]\n",
            "raw_columns:",
        ),
        ("registry: {}\nsettings: {}\n", "missing order"),
        ("order: 1\nregistry: [programs]\nsettings: {}\n", "registry: a mapping of Experiment fields"),
        ("order: one\nregistry: {}\nsettings: {}\n", "order: an integer is needed"),
        ("order: 10\nregistry: {}\nsettings: {}\n", "order 10 is also"),
        ("order: [1\n", "not YAML"),
        ("- 1\n", "a manifest is a mapping"),
    ],
)
def test_a_bad_manifest_is_refused_in_one_line_naming_its_file(tmp_path: Path, text: str, expected: str) -> None:
    directory = _copy(tmp_path)
    (directory / "zz_bad.yaml").write_text(text)
    manifests_module.manifests.cache_clear()
    try:
        with pytest.raises(ManifestError) as info:
            manifests(directory)
    finally:
        manifests_module.manifests.cache_clear()
    message = str(info.value)
    assert "\n" not in message and expected in message and "zz_bad.yaml" in message, message


def test_the_notebooks_tables_and_figures_come_from_the_manifests() -> None:
    for name, notebook in NOTEBOOKS.items():
        assert list(notebook.tables) == [e for e, m in manifests().items() if name in m.get("notebooks", ())]
        declared = [
            (f["name"], e) for e, m in manifests().items() for f in m.get("figures", ()) if f["notebook"] == name
        ]
        assert [(f.name, f.experiment) for f in notebook.figures if f.experiment] == declared
    assert "epoll_wait" in NOTEBOOKS["cost_model"].tables


def _with_figure(figure: dict[str, str]) -> dict[str, dict[str, Any]]:
    found = copy.deepcopy(manifests())
    found["nop"]["figures"] = [figure]
    return found


def test_a_figures_condition_and_notebook_must_exist(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "manifests", lambda: _with_figure({"name": "nop_cost", "notebook": "cost_model"}))
    assert "nop_cost" in [f.name for f in registry._notebook("cost_model", "Cost model").figures]
    bad_when = _with_figure({"name": "nop_cost", "notebook": "cost_model", "when": "tuesdays"})
    monkeypatch.setattr(registry, "manifests", lambda: bad_when)
    with pytest.raises(ManifestError, match=r"nop\.yaml: figure nop_cost: when: 'tuesdays' is none of"):
        registry._notebook("cost_model", "Cost model")
    monkeypatch.setattr(registry, "manifests", lambda: _with_figure({"name": "nop_cost", "notebook": "nops"}))
    with pytest.raises(ManifestError, match=r"name notebook\(s\) nops, which"):
        registry.check_notebooks_named()


def test_the_raw_columns_come_from_the_manifests() -> None:
    written = [c if isinstance(c, str) else c["name"] for c in manifests()["echo"]["raw_columns"]]
    assert formats.CELL_COLUMNS == written and formats.LATENCY_COLUMNS == formats.raw_columns("latency")
    assert formats.URING_COUNTERS[:2] == ("recv_buffers", "recv_bufs_hist")
    assert set(formats.URING_COUNTERS) <= set(formats.CELL_OPTIONAL)
    assert formats.CELL_OPTIONAL["recv_bufs_hist"] == "" and formats.CELL_OPTIONAL["recv_buffers"] is None
    assert formats.CELL_OPTIONAL["client"] == "event-loop" and "server_bytes" in formats.LATENCY_OPTIONAL
    assert "rps" not in formats.CELL_OPTIONAL


def test_config_yaml_sets_only_what_the_default_run_changes() -> None:
    """config.yaml's experiment sections restate no manifest default: each
    value has one home (the control: one restated default is found)."""
    base = yaml.safe_load((REPO / "config" / "config.yaml").read_text())["experiments"]
    assert restated_defaults(base) == []
    restated = copy.deepcopy(base)
    restated["syscall"]["batch_us"] = manifests()["syscall"]["settings"]["properties"]["batch_us"]["default"]
    assert restated_defaults(restated) == ["experiments.syscall.batch_us"]
