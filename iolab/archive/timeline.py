"""The store's runs over time: per comparison key, each headline quantity's
medians in the order the runs were measured, with their intervals, the
points today's code would measure differently marked apart, and the places
where the quantity changed (iolab.estimation.changepoints).

A series mixes runs of one comparison key only (iolab.archive.compare): the
same machine, software and settings. A number measured with other code than
this checkout's is drawn apart, as "measured with older code", and left out
of the change-point search: a step there could be the code's.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..estimation import changepoints
from ..estimation import occasion_spread as occasions
from ..registry import NOTEBOOKS
from ..report import artifact
from . import compare
from .store import Record, StoredNumber

TODAY = "today's code"
OLDER = "measured with older code"
UNRECORDED = "code not recorded"


@dataclass(frozen=True)
class KeyGroup:
    """The runs that share one comparison key, oldest first."""

    ident: str
    fields: dict[str, str]
    runs: tuple[Record, ...]


def key_ident(fields: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:10]


def groups(records: Sequence[Record]) -> list[KeyGroup]:
    """The comparison keys of ``records``, each with its runs, by first run."""
    by_key: dict[str, list[Record]] = {}
    for record in records:
        by_key.setdefault(key_ident(record.comparison_key), []).append(record)
    return [KeyGroup(ident, runs[0].comparison_key, tuple(runs)) for ident, runs in by_key.items()]


def experiment_code(marks: list[str]) -> dict[str, str] | None:
    """From a run's stale marks (compare.stale), the experiments today's
    code would not measure as they were measured, each OLDER or
    UNRECORDED; None when the crate recorded no code digests at all."""
    if marks == ["unknown"]:
        return None
    out = {m.removeprefix("measured: "): OLDER for m in marks if m.startswith("measured: ")}
    out.update({m.removeprefix("unrecorded: "): UNRECORDED for m in marks if m.startswith("unrecorded: ")})
    return out


def code_status(notebook: str, marks: dict[str, str] | None) -> str:
    """Whether a number of ``notebook`` was measured with today's code: not
    when any experiment its notebook reads was measured with older code
    (OLDER) or with code its crate could not name (UNRECORDED); a notebook
    unknown here counts every experiment."""
    if marks is None:
        return UNRECORDED
    reads = set(NOTEBOOKS[notebook].tables) if notebook in NOTEBOOKS else set(marks)
    hit = {marks[e] for e in reads & set(marks)}
    return OLDER if OLDER in hit else UNRECORDED if hit else TODAY


def headline(key: str) -> str | None:
    """The question a number answers on the site (compare.QUESTIONS), if any."""
    for name, (_, pattern) in compare.QUESTIONS.items():
        if pattern.match(key):
            return name
    return None


@dataclass(frozen=True)
class TimelinePoint:
    run: Record
    value: float
    low: float | None
    high: float | None
    code: str


@dataclass(frozen=True)
class Timeline:
    quantity: str
    question: str
    unit: str
    points: tuple[TimelinePoint, ...]
    # Changes among the points measured with today's code: the index into
    # ``points`` of the first point after each.
    changes: tuple[tuple[int, float], ...]
    # The between-occasion spread of its kind; None: unknown, and no change
    # between runs is judged (any would be, with none allowed for).
    sigma_occasion: float | None


def timelines(
    group: KeyGroup,
    numbers: dict[str, dict[str, StoredNumber]],
    marks: dict[str, dict[str, str] | None],
    spread: occasions.Occasions | None = None,
) -> list[Timeline]:
    """Every headline quantity of a key's runs; ``numbers`` and each run's
    experiment_code (``marks``) by run digest; ``spread``: the
    between-occasion estimate (default: the one in use)."""
    spread = spread or occasions.load()
    quantities = sorted({k for r in group.runs for k in numbers.get(r.crate_sha256, {}) if headline(k)})
    out = []
    for quantity in quantities:
        points: list[TimelinePoint] = []
        notebook, unit, kind = "", "", None
        for run in group.runs:
            n = numbers.get(run.crate_sha256, {}).get(quantity)
            if n is None or not (n.value > 0 and math.isfinite(n.value)):
                continue
            notebook, unit, kind = n.notebook, n.unit, n.kind
            code = code_status(n.notebook, marks[run.crate_sha256])
            points.append(TimelinePoint(run, n.value, n.low, n.high, code))
        current = [i for i, p in enumerate(points) if p.code == TODAY]
        sigma = spread.sigma(occasions.group_of(notebook, kind))
        found = (
            changepoints.changes(
                [changepoints.Point(points[i].value, points[i].low, points[i].high) for i in current], sigma
            )
            if sigma is not None
            else []
        )
        out.append(
            Timeline(
                quantity,
                str(headline(quantity)),
                unit,
                tuple(points),
                tuple((current[c.at], c.ratio) for c in found),
                sigma,
            )
        )
    return out


Y_TITLE = "__y_title__"


@functools.cache
def chart_template() -> str:
    """The timeline chart as Vega-Lite JSON, validated once by altair,
    without data, with Y_TITLE where each chart puts its y axis's title:
    the medians with their intervals by date measured and by commit,
    coloured by the code that measured them, with a rule and a label at
    each change."""
    import altair as alt

    colour = alt.Color(
        "code:N",
        scale=alt.Scale(domain=[TODAY, OLDER, UNRECORDED], range=["#1f77b4", "#ff7f0e", "#7f7f7f"]),
        legend=alt.Legend(title="measured with", orient="bottom"),
    )
    tooltip = ["run:N", "measured:N", "commit:N", alt.Tooltip("value:Q", format=".4g"), "low:Q", "high:Q", "code:N"]

    def panel(x: alt.X, title: str) -> alt.LayerChart | alt.FacetChart:
        base = alt.Chart().encode(x=x)
        bars = base.mark_rule().encode(
            y=alt.Y("low:Q", title=Y_TITLE, scale=alt.Scale(type="log", nice=False, padding=8)),
            y2="high:Q",
            color=colour,
        )
        dots = base.mark_point(filled=True, size=50).encode(y="value:Q", color=colour, tooltip=tooltip)
        changed = base.transform_filter(alt.datum.change != "")
        steps = changed.mark_rule(strokeDash=[4, 3], color="#d62728")
        labels = changed.mark_text(align="left", dx=3, dy=-4, color="#d62728").encode(text="change:N", y=alt.value(0))
        return alt.layer(bars, dots, steps, labels).properties(width=300, height=160, title=title)

    by_date = panel(
        alt.X(
            "measured:T",
            title="measured",
            scale=alt.Scale(padding=20),
            axis=alt.Axis(format="%b %d %H:%M", tickCount=4, labelAngle=0),
        ),
        "by date",
    )
    by_commit = panel(alt.X("commit:O", title="run: commit", sort=None, axis=alt.Axis(labelAngle=0)), "by commit")
    chart = alt.hconcat(by_date, by_commit, data=alt.Data(values=[{}])).resolve_scale(y="shared")
    return json.dumps(chart.to_dict())


def words(timeline: Timeline) -> str:
    """A timeline's quantity as a reader reads it ("t(1), send (ns)"), not its key."""
    m = compare.QUESTIONS[timeline.question][1].match(timeline.quantity)
    said = artifact.quantity_words(timeline.question, m["what"]) if m else timeline.quantity
    return said + (f" ({timeline.unit})" if timeline.unit else "")


def chart(timeline: Timeline) -> dict[str, Any]:
    """The Vega-Lite spec of one timeline (chart_template with its data)."""
    spec: dict[str, Any] = json.loads(chart_template().replace(f'"{Y_TITLE}"', json.dumps(words(timeline))))
    spec["data"] = {
        "values": [
            {
                "measured": p.run.measured[:19],
                "commit": f"{i + 1}: {p.run.git_commit[:7]}",
                "run": p.run.name,
                "value": p.value,
                "low": p.low if p.low is not None else p.value,
                "high": p.high if p.high is not None else p.value,
                "code": p.code,
                "change": next((f"×{r:.3g} from here" for at, r in timeline.changes if at == i), ""),
            }
            for i, p in enumerate(timeline.points)
        ]
    }
    return spec
