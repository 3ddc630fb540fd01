"""The paper's figures that no room draws alone, one module per notebook
(cost, claims and the headline, nodes), over one shared style (style); a room's own
figures are in its present module (iolab/rooms/<room>/present.py)."""

from . import claims, cost, headline, nodes, style

__all__ = ["claims", "cost", "headline", "nodes", "style"]
