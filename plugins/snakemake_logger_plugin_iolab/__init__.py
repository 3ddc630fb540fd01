"""The name Snakemake discovers a logger plugin by (``--logger iolab``); the
display itself is iolab.progress."""

from iolab.progress import LogHandler, LogHandlerSettings

__all__ = ["LogHandler", "LogHandlerSettings"]
