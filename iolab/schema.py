"""config/schema.yaml, with each experiment's section from its manifest
(iolab.manifests), as the source of the typed config models.

iolab.config validates the config against the schema and fills in its
defaults; the models (iolab.inventory for ``nodes``, iolab.settings for
``experiments``) take every default from the same schema, so none is
written twice. tests/test_config.py checks that each model names the keys
its part of the schema names.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import cache
from typing import Any, Self

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .capabilities import RUNNER_NAMES
from .manifests import experiments_schema
from .paths import CONFIG_SCHEMA, OVERLAYS


@cache
def config_schema() -> dict[str, Any]:
    """The whole config's schema: config/schema.yaml, its ``experiments``
    filled in from the manifests, its ``overlay`` names from
    config/overlays/ and its runner names from iolab.capabilities."""
    schema: dict[str, Any] = yaml.safe_load(CONFIG_SCHEMA.read_text())
    schema["properties"]["experiments"].update(experiments_schema())
    # The overlays a config may name: "default" (none) and one per file.
    schema["properties"]["overlay"]["enum"] = ["default", *sorted(p.stem for p in OVERLAYS.glob("*.yaml"))]
    schema["properties"]["nodes"]["items"]["properties"]["runner"]["enum"] = sorted(RUNNER_NAMES)
    return schema


def subschema(*path: str) -> dict[str, Any]:
    """The schema of a config key: ``path`` names properties, and "[]" steps
    into an array's items (``"nodes", "[]", "vm"``)."""
    schema = config_schema()
    for part in path:
        schema = schema["items"] if part == "[]" else schema["properties"][part]
    return schema


def schema_default(*path: str) -> Any:
    """The schema's default of a key; None where it gives none (an optional key)."""
    return subschema(*path).get("default")


@cache
def _compiled(*path: str) -> Callable[[Any], Any]:
    # fastjsonschema, not jsonschema: importing jsonschema builds its format
    # checkers' grammars, about 2 s here, and every measurement job pays it.
    # Imported here: only python -m iolab.measure checks ranges, and every
    # notebook and the Snakefile import this module.
    import fastjsonschema

    return fastjsonschema.compile(subschema(*path))


def schema_problem(value: Mapping[str, Any], *path: str) -> str | None:
    """What the schema of ``path`` finds wrong with ``value`` that the models
    leave to it (ranges, patterns, list lengths), as one line naming the key
    within ``value``; None if nothing. For a section that did not come
    through Snakemake's validation."""
    from fastjsonschema import JsonSchemaValueException

    try:
        _compiled(*path)(dict(value))
    except JsonSchemaValueException as e:
        key = ".".join(str(p) for p in e.path[1:])  # path[0] is "data", the value itself
        what = f"{e.message.removeprefix(e.name or '').strip()} (it is {e.value!r})"
        return f"{key}: {what}" if key else what
    return None


def from_schema(*path: str) -> Any:
    """A model field whose default is the schema's."""
    return Field(default=schema_default(*path))


def first_error(e: ValidationError) -> str:
    """A validation error as one line: where, and what is wrong."""
    first = e.errors()[0]
    return ".".join(str(p) for p in first["loc"]) + ": " + first["msg"]


class Section(BaseModel):
    """A config section: no unknown keys, read-only, and its defaults
    validated too (so the schema's [] becomes a tuple)."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)

    @classmethod
    def where(cls, value: Mapping[str, Any]) -> str:
        """What a one-line error about ``value`` names first ("": nothing)."""
        return cls.__name__

    @classmethod
    def of(cls, value: Mapping[str, Any] | Self) -> Self:
        """The typed section; a bad one is a ValueError of one line naming the key."""
        if isinstance(value, cls):
            return value
        data = dict(value)
        try:
            return cls.model_validate(data)
        except ValidationError as e:
            where = cls.where(data)
            raise ValueError(f"{where}: {first_error(e)}" if where else first_error(e)) from None
