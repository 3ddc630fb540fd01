"""YAML as iolab reads a config or a node inventory: plain data, or one line
saying what is wrong with the file.

PyYAML's safe loader builds an alias (``*name``) as a second reference to
the anchored value, so a few lines of nested aliases stand for billions of
values: any walk over the config (the schema's, the checks') then runs for
hours. A config is written by hand and needs neither anchors nor aliases,
so both are refused where they appear. Input that is not UTF-8 text (a
binary file given by mistake) is refused before parsing, and PyYAML's own
errors (a tab, a bad indent, an unknown tag) become one line with the
place. Numbers follow YAML 1.2: ``1e-9`` and ``1.0e9`` are floats, where
PyYAML's YAML 1.1 rules read them as strings.

    python -m iolab.yamlfile FILE...     # exit 1 with one line per bad file
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import yaml

# A float in exponent form, with or without a dot and with or without the
# exponent's sign (YAML 1.2's core schema); the forms with a dot and a
# signed exponent PyYAML already reads. No integer matches (an exponent is
# required), so integers keep resolving as they did.
_EXPONENT_FLOAT = re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$")
# Control characters a text file has no business holding (tab, newline and
# carriage return are text).
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


class YamlError(ValueError):
    """A YAML file iolab will not read, with one line naming it."""


class _StrictLoader(yaml.SafeLoader):
    """The safe loader without anchors and aliases, with YAML 1.2 floats."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            raise _Refused(event.start_mark, f"an alias (*{event.anchor})")
        anchor = getattr(event, "anchor", None)
        if anchor is not None:
            raise _Refused(event.start_mark, f"an anchor (&{anchor})")
        return super().compose_node(parent, index)


_StrictLoader.add_implicit_resolver("tag:yaml.org,2002:float", _EXPONENT_FLOAT, list("-+0123456789."))


class _Refused(yaml.YAMLError):
    def __init__(self, mark: Any, what: str) -> None:
        super().__init__(what)
        self.mark, self.what = mark, what


def _place(mark: Any) -> str:
    return f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else "somewhere"


def loads(data: bytes, name: str) -> Any:
    """The data of one YAML document ``data``, read from ``name``; YamlError
    with one line naming ``name`` otherwise."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise YamlError(
            f"{name}: not a YAML text file (byte 0x{data[e.start]:02x} at offset {e.start} is not UTF-8); "
            "give the config's .yaml file"
        ) from None
    bad = _CONTROL.search(text)
    if bad:
        line = text.count("\n", 0, bad.start()) + 1
        raise YamlError(
            f"{name}: not a YAML text file (control character {bad.group()!r} on line {line}); "
            "give the config's .yaml file"
        )
    try:
        return yaml.load(text, Loader=_StrictLoader)
    except _Refused as e:
        raise YamlError(
            f"{name}: {e.what} at {_place(e.mark)}: iolab's configs do not use YAML anchors or aliases; "
            "write the value out where it is needed"
        ) from None
    except yaml.MarkedYAMLError as e:
        problem = " ".join(str(e.problem or e.context or "not valid YAML").split())
        raise YamlError(f"{name}: {problem} at {_place(e.problem_mark or e.context_mark)}") from None
    except yaml.YAMLError as e:
        raise YamlError(f"{name}: not valid YAML: {' '.join(str(e).split())}") from None


def load(path: str | Path) -> Any:
    """The data of the YAML file ``path`` (see ``loads``)."""
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise YamlError(f"{path}: cannot be read: {e.strerror or e}") from None
    return loads(data, str(path))


def main(argv: list[str] | None = None) -> int:
    files = sys.argv[1:] if argv is None else argv
    if not files:
        print("usage: python -m iolab.yamlfile FILE...", file=sys.stderr)
        return 2
    status = 0
    for f in files:
        try:
            load(f)
        except YamlError as e:
            print(f"iolab: {e}", file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
