"""The checks of the built paper as a page shows it (iolab.report.pdfcheck)
and of a figure's caption against what it draws (style.broken_promises),
each on a small document or figure made to pass and one made to fail:
the failing one is the negative control, so none of them passes by
finding nothing. tests/test_paper.py runs them on the smoke run's paper."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pytest

from iolab.report import pdfcheck
from iolab.report.plots import style

PAGE = '#set page(paper: "a4", margin: 2cm)\n#set text(size: 10pt)\n'


def built(tmp_path: Path, body: str) -> tuple[Path, Path]:
    import typst

    source = tmp_path / "doc.typ"
    source.write_text(PAGE + body)
    pdf = tmp_path / "doc.pdf"
    typst.compile(str(source), output=str(pdf), root=str(tmp_path))
    return source, pdf


def test_text_within_the_page_passes_and_text_past_it_is_found(tmp_path: Path) -> None:
    _, fine = built(tmp_path, "Some words inside the text area.\n#figure(rect(width: 80%, height: 4cm))")
    assert pdfcheck.overflows(fine) == []
    # A block taller than the page's rest pushes its words into the foot margin.
    (tmp_path / "over").mkdir()
    _, over = built(tmp_path / "over", "#block(height: 26.2cm, breakable: false)[#v(1fr) overflowing words]")
    found = pdfcheck.overflows(over)
    assert len(found) == 1 and "overflowing" in found[0] and found[0].startswith("p. 1:")


def test_words_printed_over_words_are_found(tmp_path: Path) -> None:
    _, fine = built(tmp_path, "one line\n\nanother line")
    assert pdfcheck.overprinted(fine) == []
    (tmp_path / "over").mkdir()
    # (pdftotext drops a word printed exactly over the same word: two others.)
    _, over = built(tmp_path / "over", "#place(top + left)[caption words]\n#place(top + left)[axis label]")
    found = pdfcheck.overprinted(over)
    assert len(found) == 1 and "'caption' over 'axis'" in found[0]


def test_a_table_with_a_header_and_no_rows_is_found(tmp_path: Path) -> None:
    rows = "#table(columns: 2, table.header([*quantity*], [*value*]), [s], [77 ns])"
    source, _ = built(tmp_path, rows)
    assert pdfcheck.empty_tables(source, tmp_path) == []
    (tmp_path / "empty").mkdir()
    source, _ = built(tmp_path / "empty", "#table(columns: 2, table.header([*quantity*], [*value*]))")
    assert pdfcheck.empty_tables(source, tmp_path / "empty") == ["a table with the header 'quantity value' and no rows"]


@pytest.mark.parametrize(
    ("face", "size", "broken"),
    [
        ("none", style.HOLLOW_MS, []),  # hollow, and large enough to print so
        (None, style.HOLLOW_MS, ["hollow"]),  # filled: the promise is broken
        ("none", 3.0, ["hollow"]),  # hollow, but its hole prints as a dot
    ],
    ids=["hollow", "filled", "too-small"],
)
def test_a_caption_promising_hollow_markers_is_held_to_them(face: str | None, size: float, broken: list[str]) -> None:
    fig, ax = plt.subplots(figsize=(style.FIGURE_WIDTH_IN, 2.5))
    ax.plot([1, 2, 3], [1, 2, 3], "o", ms=size, mew=style.HOLLOW_MEW, mfc=face)
    drawn = style.drawn_elements(fig)
    plt.close(fig)
    caption = "Hollow circles: a cell the load generator bounded."
    assert style.broken_promises(caption, drawn) == broken
    # Saying an element is absent promises nothing.
    assert style.broken_promises("Circles; no band and without dashed lines.", drawn) == []


def test_a_caption_promising_a_band_and_dashed_lines_is_held_to_them() -> None:
    fig, ax = plt.subplots()
    ax.plot([1, 2], [1, 2], "--")
    ax.fill_between([1, 2], [0.5, 1.5], [1.5, 2.5], alpha=0.2)
    drawn = style.drawn_elements(fig)
    plt.close(fig)
    assert style.broken_promises("The shaded band is the interval; dashed lines the model.", drawn) == []
    fig, ax = plt.subplots()
    ax.plot([1, 2], [1, 2], "-")
    drawn = style.drawn_elements(fig)
    plt.close(fig)
    assert style.broken_promises("The shaded band is the interval; dashed lines the model.", drawn) == [
        "dashed",
        "shaded",
    ]


def test_the_ratio_of_means_is_shown_where_the_estimand_sentence_promises_it() -> None:
    """claim_texts.ESTIMAND promises the ratio of means beside a part whose
    margin is MEANS_MARGIN or narrower; finding_rows marks those parts
    (``means_shown``, which the parts table prints) and no others."""
    from claims_support import judged

    from iolab.claims import rules
    from iolab.claims.findings import finding
    from iolab.report.claim_texts import ESTIMAND, MEANS_MARGIN
    from iolab.report.outputs import finding_rows

    assert f"{MEANS_MARGIN * 100:.0f} % or less" in ESTIMAND
    narrow = finding("C3", "narrow", [1.0] * 6, rules.within(1.0, MEANS_MARGIN, "t"))
    wide = finding("C3", "wide", [1.0] * 6, rules.within(1.0, 0.2, "t"))
    one_sided = finding("C3", "one-sided", [1.2] * 6, rules.above(1.0, "t"))
    for f in (narrow, wide, one_sided):
        f.ratio_of_means = 1.01
    shown = {r["part"].split(" [")[0]: r["means_shown"] for r in finding_rows(judged([narrow, wide, one_sided]))}
    assert shown == {"narrow": True, "wide": False, "one-sided": False}
    # Without a ratio of means there is nothing to show, whatever the margin.
    narrow.ratio_of_means = None
    assert finding_rows([narrow])[0]["means_shown"] is False


def test_a_promise_its_own_clause_makes_conditional_is_not_held() -> None:
    # mpi_collectives: "dotted, where it differs from the dashed curve" promises
    # a dotted line only where the formulas differ.
    assert "dotted" not in style.promised(
        "Dashed: the fit; dotted, where it differs from the dashed curve: the formula."
    )
    # Negative control: the same element promised outright is held to it.
    assert "dotted" in style.promised("Dashed: the fit; dotted: the formula of the algorithm that ran.")
