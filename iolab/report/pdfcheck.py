"""The built paper as a page shows it: text that runs past the page's text
area (a figure or table taller than its page pushes its top rows, axis or
legend into the margins, and its caption onto the page number), text
printed over other text, and tables with a header and no rows.

Reads the PDF through poppler's ``pdftotext -bbox`` (every word with its
box, in points from the page's top left) and the Typst source through
``typst query``; paper/paper.typ sets the page (A4, 2 cm margins).
"""

from __future__ import annotations

import html
import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

# paper/paper.typ: #set page(paper: "a4", margin: 2cm).
MARGIN_PT = 2 / 2.54 * 72
# A line's box reaches past the text area by its ascenders and descenders
# (Typst sets a line from its cap height to its baseline): up to 4 pt at
# the paper's 10 pt text, measured on the built paper's first lines.
SLACK_PT = 6.0
# Two words overlap when their boxes share this much of the smaller one's
# area: touching sub- and superscripts share less.
OVERLAP = 0.3
_WORD = re.compile(r'<word xMin="([-\d.]+)" yMin="([-\d.]+)" xMax="([-\d.]+)" yMax="([-\d.]+)">([^<]*)</word>')
_PAGE = re.compile(r'<page width="([\d.]+)" height="([\d.]+)">')


@dataclass(frozen=True)
class Word:
    x0: float
    y0: float
    x1: float
    y1: float
    text: str


@dataclass(frozen=True)
class Page:
    number: int  # from 1
    width: float
    height: float
    words: tuple[Word, ...]


def pages(pdf: Path) -> list[Page]:
    """Every page's words with their boxes (pdftotext -bbox)."""
    out = subprocess.run(["pdftotext", "-bbox", str(pdf), "-"], capture_output=True, text=True, check=True).stdout
    found = []
    for i, chunk in enumerate(out.split("<page ")[1:], start=1):
        size = _PAGE.match("<page " + chunk)
        if size is None:
            continue
        words = tuple(
            Word(float(a), float(b), float(c), float(d), html.unescape(t)) for a, b, c, d, t in _WORD.findall(chunk)
        )
        found.append(Page(i, float(size[1]), float(size[2]), words))
    return found


def _footer(page: Page, w: Word) -> bool:
    """The page number, where the page's footer prints it."""
    return w.text.strip() == str(page.number) and w.y0 >= page.height - MARGIN_PT


def overflows(pdf: Path, margin: float = MARGIN_PT) -> list[str]:
    """Each page whose text runs past its text area, in one line: where,
    by how much, and the first words there."""
    out = []
    for page in pages(pdf):
        left, top = margin - SLACK_PT, margin - SLACK_PT
        right, bottom = page.width - margin + SLACK_PT, page.height - margin + SLACK_PT
        outside = [
            w
            for w in page.words
            if not _footer(page, w) and (w.y0 < top or w.y1 > bottom or w.x0 < left or w.x1 > right)
        ]
        if outside:
            worst = max(outside, key=lambda w: max(top - w.y0, w.y1 - bottom, left - w.x0, w.x1 - right))
            by = max(top - worst.y0, worst.y1 - bottom, left - worst.x0, worst.x1 - right)
            shown = " ".join(w.text for w in outside[:6])
            out.append(f"p. {page.number}: {len(outside)} words past the text area, by up to {by:.0f} pt ({shown})")
    return out


def _shared(a: Word, b: Word) -> float:
    """The share of the smaller box that the two words' boxes share."""
    w = min(a.x1, b.x1) - max(a.x0, b.x0)
    h = min(a.y1, b.y1) - max(a.y0, b.y0)
    if w <= 0 or h <= 0:
        return 0.0
    smaller = min((a.x1 - a.x0) * (a.y1 - a.y0), (b.x1 - b.x0) * (b.y1 - b.y0))
    return w * h / smaller if smaller > 0 else 0.0


def overprinted(pdf: Path) -> list[str]:
    """Each page where a word is printed over another (a caption over a
    figure's ticks, a page number under a caption), in one line."""
    out = []
    for page in pages(pdf):
        words = sorted(page.words, key=lambda w: (w.y0, w.x0))
        hits = []
        for i, a in enumerate(words):
            for b in words[i + 1 :]:
                if b.y0 > a.y1:
                    break
                if _shared(a, b) >= OVERLAP:
                    hits.append(f"{a.text!r} over {b.text!r}")
        if hits:
            out.append(f"p. {page.number}: {len(hits)} words printed over others ({'; '.join(hits[:4])})")
    return out


def empty_tables(source: Path, root: Path) -> list[str]:
    """Each table the paper lays out with a header and no row under it,
    by its header's cells (``typst query`` of the source)."""
    import typst

    tables = json.loads(typst.query(str(source), "table", root=str(root)))
    out = []
    for t in tables:
        children = t.get("children", [])
        # typst query names a table's header element "header".
        header = [c for c in children if c.get("func") in ("header", "table.header")]
        columns = t.get("columns")
        ncols = len(columns) if isinstance(columns, list) else int(columns) if isinstance(columns, int) else 1
        cells = [c for c in children if c not in header]
        if header and len(cells) < ncols:
            out.append(f"a table with the header {_plain(header[0])!r} and no rows")
    return out


def _plain(content: object) -> str:
    """The text of a queried content tree, flattened."""
    if isinstance(content, dict):
        if "text" in content and isinstance(content["text"], str):
            return content["text"]
        return " ".join(filter(None, (_plain(v) for k, v in content.items() if k != "func")))
    if isinstance(content, list):
        return " ".join(filter(None, (_plain(v) for v in content)))
    return ""
