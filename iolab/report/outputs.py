"""What a notebook produces: figures (PDF, PNG, SVG under stable names),
numbers for the paper text, and a manifest fragment that links each figure to
its notebook, tables, raw files and the git commit.

A notebook creates one ``Outputs``, registers figures and numbers, and calls
``finish()``; rules/paper.smk merges the fragments of all notebooks.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import matplotlib.pyplot as plt
from matplotlib.figure import Figure
from matplotlib.transforms import Bbox

if TYPE_CHECKING:
    import pandas as pd

from .. import atomic, paths
from ..claims.verdicts import Finding, Outcome, interval_text
from ..estimation import occasion_spread as occasions
from ..estimation.intervals import MIN_REPS_FOR_CI, Estimate
from ..provenance import git_state, sidecar_for, utc_now
from ..tables import raw_files_under, resolve, sha256, table_sources
from .claim_texts import MEANS_MARGIN

FIGURE_FORMATS = ("pdf", "png", "svg")
# Metadata fixed so re-rendering identical data gives identical files.
_FIG_METADATA: dict[str, dict[str, str | None]] = {
    "pdf": {"CreationDate": None, "ModDate": None, "Creator": "iolab"},
    "svg": {"Date": None, "Creator": "iolab"},
    "png": {"Software": "iolab"},
}


def figure_caption(name: str) -> str:
    """A figure's caption, from its reStructuredText file (one home for both
    the manifest and the Snakemake report: iolab.paths.caption), as plain text."""
    path = paths.caption(name)
    if not path.exists():
        raise ValueError(f"figure {name!r} has no caption: write {paths.relative(path)}")
    return " ".join(path.read_text().split()).replace("\\*", "*")


def machine(frame: pd.DataFrame) -> dict[str, Any]:
    """Where a figure's data were measured, from its tidy rows: node(s),
    kind, CPU model, CPU count, kernel, repetitions."""

    def values(col: str) -> list[str]:
        return sorted({str(v) for v in frame[col].dropna()}) if col in frame else []

    return {
        "nodes": values("node"),
        "kinds": values("kind"),
        "cpu": values("cpu_model"),
        "cpus": int(frame["cpus"].max()) if "cpus" in frame and len(frame) else 0,
        "kernel": values("kernel"),
        "repetitions": int(frame["rep"].nunique()) if "rep" in frame else 0,
    }


def stamp_text(where: dict[str, Any], date: str, commit: str) -> str:
    """One line: the machine, the repetitions, the date and the commit."""
    unit = "vCPUs" if where["kinds"] and all(k == "vm" for k in where["kinds"]) else "CPUs"
    cpu = " / ".join(where["cpu"]) or "CPU not recorded"
    kernel = ", ".join(where["kernel"]) or "not recorded"
    return (
        f"{', '.join(where['nodes']) or 'node not recorded'}: {cpu}, {where['cpus']} {unit}, "
        f"Linux {kernel} · {where['repetitions']} repetitions · {date} · iolab {commit}"
    )


def _tight_box(fig: Figure) -> Bbox:
    """The figure's tight bounding box with savefig's padding, as
    ``bbox_inches="tight"`` finds it: after a dry-run draw (titles and ticks
    move there), at the saving resolution (hinted text measures wider at low
    ones)."""
    dpi = fig.dpi
    save_dpi = plt.rcParams["savefig.dpi"]
    fig.set_dpi(dpi if save_dpi == "figure" else save_dpi)
    try:
        fig.draw_without_rendering()
        box = fig.get_tightbbox()
    finally:
        fig.set_dpi(dpi)
    return box.padded(plt.rcParams["savefig.pad_inches"])


def finding_rows(findings: Sequence[Finding]) -> list[dict[str, Any]]:
    """The claims' findings, one dict each, for the paper's claims table:
    the part without its setup note (``setup``, stated once below the
    table), the interval to 3 significant figures, the rule and its
    margin, the verdict and, for an undecided part, which way it leans."""
    rows = []
    for f in findings:
        est = f.estimate
        part, setup = f.part, ""
        if part.endswith("]") and " [" in part:
            part, setup = part[: part.rindex(" [")], part[part.rindex(" [") + 2 : -1]
        undecided = f.outcome is Outcome.UNDECIDED and est is not None and f.rule is not None
        rows.append(
            {
                "claim": f.claim,
                "part": part,
                "setup": setup,
                "outcome": f.outcome.value,
                "rule": f.rule.text() if f.rule else "",
                # The rule as data, for pooling runs (iolab.claims.kind_verdicts).
                "rule_kind": f.rule.kind if f.rule else None,
                "bound": f.rule.bound if f.rule else None,
                "margin_share": f.rule.margin if f.rule else None,
                "role": f.role,
                "stand_in": f.stand_in,
                # The client-bound gate's figures in this run, for pooling.
                "gate": f.gate.as_json() if f.gate is not None else None,
                "gate_note": f.gate_note,
                "note": f.note,
                "cell": f.cell,
                "margin": f.rule.why if f.rule else "",
                "quoted": f.quoted,
                "value": interval_text(est) if est is not None and f.per_rep else "",
                "reason": f.reason,
                "reps": est.n if est else 0,
                "needed": f.needed,
                "summary": f.summary(),
                "context": f.context,
                "held_back": f.held_back,
                "held_back_text": f.held_back_text,
                "group": f.group,
                "kind": f.kind,
                "per_rep": [v if math.isfinite(v) else None for v in f.per_rep],
                "round0": f.n0,
                "family": f.family,
                "withheld": f.withheld,
                "ratio_of_means": f.ratio_of_means
                if f.ratio_of_means is None or math.isfinite(f.ratio_of_means)
                else None,
                # Shown beside the part where its margin is narrow (claim_texts.ESTIMAND says so).
                "means_shown": f.ratio_of_means is not None
                and math.isfinite(f.ratio_of_means)
                and f.rule is not None
                and 0 < f.rule.margin <= MEANS_MARGIN,
                "reachable": list(f.reachable) if f.rule is not None and est is not None else None,
                "leaning": f.rule.leaning(est.value) if undecided and f.rule and est else "",
                "estimate": None
                if est is None
                else {
                    k: (x if math.isfinite(x) else None)
                    for k, x in (
                        ("value", est.value),
                        ("low", est.low),
                        ("high", est.high),
                        ("pred_low", est.pred_low),
                        ("pred_high", est.pred_high),
                    )
                },
            }
        )
    return rows


@dataclass
class Outputs:
    notebook: str
    figure_dir: Path
    numbers_path: Path
    manifest_path: Path
    # experiment -> its table's source as the notebook was given it: a Parquet
    # table, a raw-data root, "auto" (iolab.tables.resolve) or "" (not run).
    tables: dict[str, str] = field(default_factory=dict)
    figures: dict[str, dict[str, Any]] = field(default_factory=dict)
    numbers: dict[str, dict[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.sources = {e: resolve(e, t) for e, t in self.tables.items() if t}
        self.figure_dir = paths.resolve(self.figure_dir)
        self.numbers_path = paths.resolve(self.numbers_path)
        self.manifest_path = paths.resolve(self.manifest_path)

    def figure(
        self, fig: Figure, name: str, caption: str | None = None, data: pd.DataFrame | None = None
    ) -> list[Path]:
        """Save ``fig`` as <name>.pdf/.png/.svg and record it for the manifest.
        The caption is iolab.paths.caption(name) (what the Snakemake report
        shows too) unless one is given (a caption that names the data).
        ``data``: the tidy rows it draws, for the stamp (machine, repetitions,
        date, commit) that goes under the figure, into each file's metadata
        and into the manifest, where the paper's caption reads it."""
        from .plots import style

        # A figure whose optional elements depend on the data carries the
        # caption of what it drew (``style.drawn_caption``).
        caption = caption if caption is not None else getattr(fig, "iolab_caption", None) or figure_caption(name)
        git = git_state()
        commit = (git["commit"][:8] + ("+changes" if git["dirty"] else "")) if git["commit"] else "(no git commit)"
        where = (
            machine(data)
            if data is not None
            else {"nodes": [], "kinds": [], "cpu": [], "cpus": 0, "kernel": [], "repetitions": 0}
        )
        date = utc_now()[:10]
        stamp = stamp_text(where, date, commit)
        # The stamp under everything else the figure holds, from its left
        # edge, measured as the files will be (at the saving resolution).
        pad = plt.rcParams["savefig.pad_inches"]
        box = _tight_box(fig)
        text = style.add_stamp(fig, stamp)
        text.set_position(((box.x0 + pad) / fig.get_figwidth(), (box.y0 + pad) / fig.get_figheight() - 0.01))
        # The layout and the tight box once, then every format with layout
        # off: bbox_inches="tight" would draw the whole figure twice per
        # format (a dry run to measure, then the file), and drawing is most of
        # a notebook's run time.
        bbox = _tight_box(fig)
        engine = fig.get_layout_engine()
        fig.set_layout_engine(None)
        written = []
        try:
            for ext in FIGURE_FORMATS:
                dest = self.figure_dir / f"{name}.{ext}"
                meta = dict(_FIG_METADATA[ext])
                meta["Description" if ext != "pdf" else "Subject"] = f"{name}: {stamp}"
                with atomic.atomic_path(dest) as tmp:
                    fig.savefig(tmp, format=ext, bbox_inches=bbox, metadata=meta)
                written.append(dest)
        finally:
            fig.set_layout_engine(engine)
        self.figures[name] = {
            "caption": caption,
            "files": [paths.relative(p) for p in written],
            "machine": where,
            "date": date,
            "commit": commit,
            "stamp": stamp,
            "width_in": round(bbox.width, 3),
            # As printed across the text width: what the page must hold.
            "printed_height_in": round(bbox.height * style.TEXT_WIDTH_IN / bbox.width, 2),
            "smallest_font_pt": round(style.smallest_font(fig, bbox.width), 2),
            "intervals": style.draws_intervals(fig),
            # What its panels draw, for the caption's promises (style.broken_promises).
            "drawn": style.drawn_elements(fig, bbox.width),
            "overlapping_labels": style.overlapping_labels(fig),
        }
        return written

    def number(
        self,
        key: str,
        value: float,
        *,
        unit: str = "",
        digits: int = 0,
        estimate: Estimate | None = None,
        kind: str | None = None,
        note: str = "",
    ) -> str:
        """Record a number for the paper text; returns its rendered text.
        A number with an ``estimate`` declares its ``kind``
        (iolab.estimation.occasion_spread.KINDS): which between-occasion spread its
        prediction interval takes depends on what it is, not on its unit."""
        if not math.isfinite(value):
            raise ValueError(f"number {key!r} is not finite ({value})")
        if kind is not None and kind not in occasions.KINDS:
            raise ValueError(f"number {key!r}: kind {kind!r} is not one of {', '.join(occasions.KINDS)}")
        if estimate is not None and kind is None:
            raise ValueError(f"number {key!r} has an interval: declare its kind ({', '.join(occasions.KINDS)})")
        text = f"{value:,.{digits}f}".replace(",", "\u2009")
        entry: dict[str, Any] = {"value": value, "text": text, "unit": unit, "notebook": self.notebook, "note": note}
        if kind is not None:
            entry["kind"] = kind
        if estimate is not None:

            def bound(x: float) -> str:
                if math.isfinite(x):
                    return f"{x:,.{digits}f}".replace(",", "\u2009")
                return "∞" if x > 0 else "−∞"

            def finite(x: float) -> float | None:
                # JSON has no infinity: an unbounded interval end is null, shown as ∞.
                return x if math.isfinite(x) else None

            entry["ci95"] = [finite(estimate.low), finite(estimate.high)]
            # Where a re-run on another occasion is expected: this run's
            # repetitions and the between-occasion spread of the number's
            # group (iolab.estimation.occasion_spread), on the log scale; none where
            # that spread is unknown.
            group = occasions.group_of(self.notebook, kind)
            pred = (
                occasions.prediction_interval(estimate.values, occasions.load().spread(group))
                if estimate.values
                else (estimate.pred_low, estimate.pred_high)
            )
            entry["pi95"] = None if math.isnan(pred[0]) else [finite(pred[0]), finite(pred[1])]
            entry["group"] = group
            entry["n"] = estimate.n
            if estimate.values:
                entry["reps"] = [finite(v) for v in estimate.values]
            # Below MIN_REPS_FOR_CI repetitions there is no interval at all; an
            # end can still be infinite (a crossover some repetition never reaches).
            entry["ci_bounded"] = estimate.n >= MIN_REPS_FOR_CI
            entry["ci_text"] = (
                f"{bound(estimate.low)}–{bound(estimate.high)}"
                if entry["ci_bounded"]
                else f"none from {estimate.n} repetitions; it needs {MIN_REPS_FOR_CI}"
            )
        self.numbers[key] = entry
        return text

    def findings(self, key: str, findings: list[Finding]) -> None:
        """The claims' findings for the paper's claims table (``finding_rows``)."""
        rows = finding_rows(findings)
        self.numbers[key] = {
            "value": rows,
            "text": f"{len(rows)} findings",
            "unit": "",
            "notebook": self.notebook,
            "note": "",
        }

    def rows(self, key: str, frame: pd.DataFrame, note: str = "") -> None:
        """A table for the paper, every cell as text: counts with thin-space
        thousands, "not measured" for a missing number."""

        def cell(v: Any) -> str:
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                return "not measured" if v != v else f"{v:,.0f}".replace(",", "\u2009")
            return str(v)

        rows = [{str(k): cell(v) for k, v in r.items()} for r in frame.to_dict("records")]
        self.numbers[key] = {
            "value": rows,
            "text": f"{len(rows)} rows",
            "unit": "",
            "notebook": self.notebook,
            "note": note,
        }

    def text(self, key: str, value: str, note: str = "") -> str:
        """Record a piece of generated text (a verdict, a setting) for the paper."""
        self.numbers[key] = {"value": value, "text": value, "unit": "", "notebook": self.notebook, "note": note}
        return value

    def texts(self, prefix: str = "") -> dict[str, str]:
        """Every recorded number and text as the paper shows it (for the notebook)."""
        return {k: v["text"] for k, v in self.numbers.items() if k.startswith(prefix)}

    def finish(self) -> None:
        raw: list[dict[str, Any]] = []
        for experiment, src in self.sources.items():
            if src.suffix == ".parquet":
                raw.extend(
                    table_sources(src)
                    or [
                        {
                            "table": paths.relative(src),
                            "sha256": sha256(src),
                            "provenance": "none: table has no .sources.json",
                        }
                    ]
                )
            else:  # a raw-data root, such as the shipped reference data
                raw.extend(
                    {"raw": paths.relative(f), "sha256": sha256(f), "provenance": paths.relative(sidecar_for(f))}
                    for f in raw_files_under(src, experiment)
                )
        fragment = {
            "notebook": f"notebooks/{self.notebook}.py",
            "executed": utc_now(),
            "git": git_state(),
            "tables": sorted({paths.relative(t) for t in self.sources.values()}),
            "raw": raw,
            "figures": self.figures,
        }
        atomic.write_json(self.numbers_path, self.numbers)
        atomic.write_json(self.manifest_path, fragment)
