"""The experiments' manifests: config/experiments/<name>.yaml, one per
experiment, each declaring once what the rest of the package derives:

- ``order``: its place in every list of experiments;
- ``required``: whether every config has its section;
- ``registry``: what it runs, what decides what it measures, what it writes
  and needs (iolab.registry.Experiment's fields, by the same names; the
  registry refuses any other key, iolab.registry.registry_keys);
- ``settings``: its config section's JSON Schema, with defaults, bounds and
  descriptions (iolab.schema puts it under ``experiments`` in
  config/schema.yaml; iolab.settings builds its typed model from it);
- ``notebooks``: the notebooks that read its table (their
  ``<name>_table`` parameter; iolab.registry.NOTEBOOKS' tables);
- ``figures``: its figures, each with the notebook that draws it and, if
  any, the condition of the run it needs (``when``: a name in
  iolab.registry.CONDITIONS); each one's caption is ``<figure>.rst`` in its
  experiment's room (iolab.paths.caption);
- ``raw_columns``: its raw file's columns in the order they are written,
  each a name or ``{name, optional: fill}`` / ``{name, counter: true}``
  (iolab.formats);
- ``checks``: the run's own checks that read its numbers, by name (the read
  side's iolab.report.checks holds them, checked against the manifests
  when it is imported).

In the base of the package: the workflow, the run side and the read side
all read it, through iolab.schema and iolab.registry.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from .paths import EXPERIMENT_MANIFESTS

TOP_KEYS = frozenset({"order", "required", "registry", "settings", "notebooks", "figures", "raw_columns", "checks"})


class ManifestError(ValueError):
    """A manifest that cannot be read, with one line naming its file."""


def _load(path: Path) -> dict[str, Any]:
    try:
        manifest = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise ManifestError(f"{path}: not YAML: {' '.join(str(e).split())}") from None
    if not isinstance(manifest, dict):
        raise ManifestError(f"{path}: a manifest is a mapping of {', '.join(sorted(TOP_KEYS))}")
    unknown = set(manifest) - TOP_KEYS
    missing = {"order", "registry", "settings"} - set(manifest)
    if unknown or missing:
        raise ManifestError(
            f"{path}: "
            + "; ".join(
                part
                for part in (
                    f"unknown key(s) {', '.join(sorted(unknown))}" if unknown else "",
                    f"missing {', '.join(sorted(missing))}" if missing else "",
                )
                if part
            )
            + f" (a manifest has {', '.join(sorted(TOP_KEYS))})"
        )
    if not isinstance(manifest["registry"] or {}, dict):
        raise ManifestError(
            f"{path}: registry: a mapping of Experiment fields is needed (it is {manifest['registry']!r})"
        )
    for figure in manifest.get("figures") or ():
        if (
            not isinstance(figure, dict)
            or set(figure) - {"name", "notebook", "when"}
            or not {"name", "notebook"} <= set(figure)
        ):
            raise ManifestError(f"{path}: figures: each is {{name, notebook}} with an optional when (it is {figure!r})")
    for column in manifest.get("raw_columns") or ():
        if not isinstance(column, str) and not (
            isinstance(column, dict) and "name" in column and set(column) - {"name"} in ({"optional"}, {"counter"})
        ):
            raise ManifestError(
                f"{path}: raw_columns: each is a name, {{name, optional: fill}} or {{name, counter: true}} "
                f"(it is {column!r})"
            )
    if not isinstance(manifest["order"], int) or isinstance(manifest["order"], bool):
        raise ManifestError(f"{path}: order: an integer is needed (it is {manifest['order']!r})")
    return manifest


@cache
def manifests(directory: Path = EXPERIMENT_MANIFESTS) -> dict[str, dict[str, Any]]:
    """experiment name (its file's stem) -> its manifest, in ``order``."""
    loaded = {path.stem: _load(path) for path in sorted(directory.glob("*.yaml"))}
    if not loaded:
        raise ManifestError(f"{directory}: no experiment manifests (<name>.yaml) found")
    orders: dict[int, str] = {}
    for name, manifest in loaded.items():
        if manifest["order"] in orders:
            raise ManifestError(
                f"{directory / (name + '.yaml')}: order {manifest['order']} is also "
                f"{orders[manifest['order']]}'s; give each experiment its own place"
            )
        orders[manifest["order"]] = name
    return dict(sorted(loaded.items(), key=lambda item: item[1]["order"]))


def restated_defaults(experiments: Mapping[str, Any], directory: Path = EXPERIMENT_MANIFESTS) -> list[str]:
    """The keys of the ``experiments`` sections of a config file that set a
    value equal to their manifest's default (a value written twice), as
    ``experiments.<name>.<key>``; ``enabled`` says a section is on, and is
    left out."""
    found = manifests(directory)
    out = []
    for name, section in experiments.items():
        props = found[name]["settings"].get("properties", {}) if name in found else {}
        for key, value in (section or {}).items():
            if key != "enabled" and key in props and "default" in props[key] and props[key]["default"] == value:
                out.append(f"experiments.{name}.{key}")
    return out


# Keys that mean the same in every experiment's section: described once
# here, for each manifest that does not say more.
SHARED_DESCRIPTIONS = {
    "enabled": "Whether the run measures this experiment.",
    "batches": "Measured batches per configuration (the probe's --batches).",
    "warmup_batches": "Batches per configuration run first and flagged warmup, never counted (--warmup-batches).",
}


def _described(settings: dict[str, Any]) -> dict[str, Any]:
    """A manifest's settings schema with the shared keys' descriptions filled in."""
    props = {
        key: ({"description": SHARED_DESCRIPTIONS[key], **prop} if key in SHARED_DESCRIPTIONS else prop)
        for key, prop in settings.get("properties", {}).items()
    }
    return {**settings, "properties": props} if props else settings


def experiments_schema(directory: Path = EXPERIMENT_MANIFESTS) -> dict[str, Any]:
    """The ``experiments`` part of the config's schema: each manifest's
    ``settings`` under its name (the shared keys described), the
    ``required: true`` ones required."""
    found = manifests(directory)
    return {
        "properties": {name: _described(m["settings"]) for name, m in found.items()},
        "required": [name for name, m in found.items() if m.get("required")],
    }
