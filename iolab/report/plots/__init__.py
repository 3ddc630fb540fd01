"""Every figure of the paper, one module per notebook (cost, echo, mpi,
claims, nodes) over one shared style (style)."""

from . import claims, cost, echo, mpi, nodes, style

__all__ = ["claims", "cost", "echo", "mpi", "nodes", "style"]
