"""Runners: how a command reaches a node. Only ``local`` exists so far."""

from __future__ import annotations

from ..nodes import Node
from .local import LocalRunner, RunError

__all__ = ["LocalRunner", "RunError", "runner_for"]


def runner_for(node: Node) -> LocalRunner:
    if node.runner == "local":
        return LocalRunner()
    raise RunError(f"node {node.name!r}: runner {node.runner!r} is not available in this version")
