"""The name Snakemake discovers a logger plugin by (``--logger iolab``, set
by the workflow profile); the display itself is iolab/progress.py of the
checkout this folder is in. It is loaded by its path, not imported as
iolab.progress: Snakemake loads its plugins before it reads the workflow,
and the workflow then imports its own checkout's iolab, which an
environment shared by two checkouts would otherwise shadow with this one's."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

_source = Path(__file__).resolve().parents[2] / "iolab" / "progress.py"
_spec = importlib.util.spec_from_file_location(f"{__name__}.progress", _source)
assert _spec is not None and _spec.loader is not None, _source
_display = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _display  # its dataclasses look their module up
_spec.loader.exec_module(_display)

LogHandler = _display.LogHandler
LogHandlerSettings = _display.LogHandlerSettings

__all__ = ["LogHandler", "LogHandlerSettings"]
