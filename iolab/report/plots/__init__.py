"""The paper's figures that no room draws alone, one module per notebook
(cost, claims, nodes), over one shared style (style); a room's own
figures are in its present module (iolab/rooms/<room>/present.py)."""

from . import claims, cost, nodes, style

__all__ = ["claims", "cost", "nodes", "style"]
