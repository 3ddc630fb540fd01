"""The choices the typed config spells as Literals (iolab.settings,
iolab.inventory) against the schema's enums, walked together."""

from __future__ import annotations

import json

from iolab.settings import RunConfig

# -- the typed models' choices against the schema's enums ------------------------


def _choices(model: type, schema: dict, where: str = "") -> dict[str, tuple[set, set | None]]:
    """Each Literal the typed config holds (a field's, a list's items', a
    nested section's), keyed by its config path: (the model's choices, the
    schema's enum there, None where the schema gives none)."""
    import types
    import typing

    def unwrap(tp: object, prop: dict) -> tuple[object, dict]:
        # Optional[X] and tuple[X, ...] step into X (and an array's items).
        while True:
            args = [a for a in typing.get_args(tp) if a is not type(None)]
            origin = typing.get_origin(tp)
            if origin in (typing.Union, types.UnionType) and len(args) == 1:
                tp = args[0]
            elif origin is tuple and len(args) == 2 and args[1] is Ellipsis:
                tp, prop = args[0], prop.get("items", {})
            elif origin is typing.Annotated:
                tp = args[0]
            else:
                return tp, prop

    out: dict[str, tuple[set, set | None]] = {}
    for name, field in model.model_fields.items():
        prop = schema.get("properties", {}).get(field.alias or name, {})
        tp, prop = unwrap(field.annotation, prop)
        path = f"{where}{name}"
        if typing.get_origin(tp) is typing.Literal:
            enum = prop.get("enum")
            out[path] = (set(typing.get_args(tp)), None if enum is None else {e for e in enum if e is not None})
        elif isinstance(tp, type) and hasattr(tp, "model_fields"):
            out.update(_choices(tp, prop, path + "."))
    return out


def test_every_choice_the_models_type_is_the_schemas_enum() -> None:
    # The typed models spell some choices as Literals beside the schema's
    # enums: a choice added to one and not the other would pass one check
    # and fail the other (a section written by hand, or a config).
    from iolab.schema import config_schema

    choices = _choices(RunConfig, config_schema())
    # nodes.runner is no Literal: its choices are iolab.capabilities' runners,
    # which fill the schema's enum (tests/test_declared_once.py).
    assert {"nodes.kind", "nodes.vm.accel", "experiments.mpi.transports", "experiments.mpi.sync"} <= set(choices)
    assert len(choices) >= 11, sorted(choices)
    differ = {path: pair for path, pair in choices.items() if pair[0] != pair[1]}
    assert differ == {}, differ
    # The walk sees a drift: a choice the schema lacks (negative control).
    schema = config_schema()
    drifted = json.loads(json.dumps(schema))
    drifted["properties"]["nodes"]["items"]["properties"]["kind"]["enum"].remove("container")
    assert _choices(RunConfig, drifted)["nodes.kind"][1] == {"auto", "bare-metal", "vm"}
