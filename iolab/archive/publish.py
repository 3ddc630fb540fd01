"""Publish the store of runs as a static site: plain HTML with local assets,
no network needed; it works opened from the file system and served by
`python -m http.server --bind 127.0.0.1`.

    python -m iolab.archive.publish [--db archive/store.sqlite] [--out archive/site]   (./repro publish ...)

Crates come into the store with ./repro store add (./repro archive adds its own).

Pages:
- index.html: every run, comparison key and claim;
- runs/<crate>.html: a run's verdicts, headline numbers with their 95 %
  intervals, environment, code marks, and its paper (copied from the crate);
- keys/<key>.html: per comparison key, each headline quantity over time, by
  date and by commit, with intervals and change points (iolab.archive.timeline);
- claims/<claim>.html: a claim's verdict in every run, on every machine;
- diffs/<A>--<B>.html: what differs between two runs' environments, keys
  and code, for every pair;
- studies/<name>.html: a cluster study's verdicts pooled over its nodes
  (iolab.archive.study; ``--study DIR``).

Charts are Vega-Lite (altair), drawn in the page by the Vega bundle that
vl-convert ships (assets/vega-bundle.js), over a static SVG of the same
chart that stays for a reader without JavaScript. The site is written to a
temporary directory beside --out and moved into place when whole.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .. import paths
from ..codehash import measuring_sources
from ..estimation import changepoints
from ..provenance import utc_now
from . import compare, store, timeline
from .untrusted import Crate, CrateError, commit_or_none, display_safe, display_safe_tree

DEFAULT_OUT = paths.REPO / "archive" / "site"
STUDY = paths.REPO / "results" / "study"
TEMPLATES = Path(__file__).with_name("site_templates")
# What the Vega bundle exposes to the pages' classic scripts (site.js): a
# module script would not load from the file system.
GLOBALS = "window.vegaEmbed = vegaEmbed; window.vega = vega; window.vegaLite = vegaLite;"


def _interval(value: float | None, low: float | None, high: float | None) -> str:
    if value is None:
        return ""
    if low is None or high is None or not (math.isfinite(low) and math.isfinite(high)):
        return f"{value:.4g}"
    return f"{value:.4g} [{low:.4g}, {high:.4g}]"


def outcome_class(outcome: str) -> str:
    return {"reproduced": "reproduced", "not reproduced": "not-reproduced"}.get(
        outcome, "undecided" if outcome.startswith("undecided") else ""
    )


def _file_name(text: str, taken: set[str]) -> str:
    """A safe, unique file stem for a name a crate chose."""
    stem = re.sub(r"[^A-Za-z0-9_-]", "_", text)[:60] or "_"
    name, i = stem, 1
    while name in taken:
        i += 1
        name = f"{stem}_{i}"
    taken.add(name)
    return name


def _machine(record: store.Record) -> str:
    nodes = compare.node_facts(record.as_run())
    return "; ".join(f"{node}: {f.get('cpu_model')} ×{f.get('cpus')}, kernel {f.get('kernel')}" for node, f, _ in nodes)


def _changed_by(root: Path, head: str, commit: str, experiment: str) -> str:
    """The commits since ``commit`` that changed ``experiment``'s measuring
    sources, as a range and the first few hashes ("" where git cannot tell)."""
    if commit_or_none(commit) is None:
        return ""
    res = subprocess.run(
        [
            "git",
            "-C",
            str(root),
            "log",
            "--format=%h",
            "--end-of-options",
            f"{commit}..HEAD",
            "--",
            *measuring_sources(experiment),
        ],
        capture_output=True,
        text=True,
    )
    hashes = res.stdout.split()
    if res.returncode != 0 or not hashes:
        return ""
    shown = ", ".join(hashes[:5]) + (", …" if len(hashes) > 5 else "")
    return f"{commit[:12]}..{head}: {len(hashes)} commit(s) changed it ({shown})"


def _code_note(record: store.Record, marks: list[str], root: Path, head: str) -> str:
    """What a run's stale marks (compare.stale) mean, in a sentence."""
    if marks == ["unknown"]:
        return "code not recorded (archived before crates recorded it)"
    older = [m.removeprefix("measured: ") for m in marks if m.startswith("measured: ")]
    unknown = [m.removeprefix("unrecorded: ") for m in marks if m.startswith("unrecorded: ")]
    said = []
    for experiment in older:
        since = _changed_by(root, head, record.git_commit, experiment)
        said.append(
            f"{experiment} measured with older code ({since or f'at {record.git_commit[:12]}; this checkout differs'})"
        )
    if unknown:
        said.append(f"measured with code its crate could not name: {', '.join(unknown)}")
    if "analysed" in marks:
        said.append("analysed with older code")
    return "; ".join(said) or "measured and analysed with this checkout's code"


def head_commit(root: Path) -> str:
    res = subprocess.run(["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True)
    return res.stdout.strip() if res.returncode == 0 else "unknown"


def _displayed(value: Any) -> Any:
    """What a page shows of a value: a string made display-safe (its
    control and bidirectional characters escaped), then HTML-escaped by the
    template; markup the templates themselves made (a spec's JSON) as it is."""
    import markupsafe

    return display_safe(value) if isinstance(value, str) and not isinstance(value, markupsafe.Markup) else value


def environment() -> Any:
    """The site's templates: autoescaped, every value shown display-safe."""
    import jinja2

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        finalize=_displayed,
    )


def study_page(doc: Mapping[str, Any], lines: Sequence[str], root: str = "") -> str:
    """A cluster study's page (iolab.archive.study) in the site's style; ``root``: the way up to the
    site's assets (a study's own folder holds a copy of them)."""
    env = environment()
    rows = [
        {"claim": c, "outcome": v["outcome"], "css": outcome_class(v["outcome"]), "line": v["line"]}
        for c, v in doc["claims"].items()
    ]
    return env.get_template("study.html").render(
        title=f"Cluster study over {len(doc['nodes'])} node(s)",
        root=root,
        built=utc_now()[:16].replace("T", " "),
        run_count=len(doc["nodes"]),
        head=head_commit(paths.REPO),
        charts=False,
        doc=doc,
        claims=rows,
        lines=lines,
    )


class Site:
    def __init__(self, db: Path, out: Path, root: Path = paths.REPO, studies: Sequence[Path] = ()) -> None:
        self.db, self.out = db, out
        # Cluster studies (iolab.archive.study): each folder's verdicts.json.
        self.studies = {d.name: json.loads((d / "verdicts.json").read_text()) for d in studies}
        self.env = environment()
        self.records = store.records(db)
        self.numbers = {r.crate_sha256: store.numbers_of(db, r.crate_sha256) for r in self.records}
        self.verdicts = {r.crate_sha256: store.verdicts_of(db, r.crate_sha256) for r in self.records}
        self.groups = timeline.groups(self.records)
        self.key_of = {r.crate_sha256: g.ident for g in self.groups for r in g.runs}
        # Each run's code digests against today's sources, read once: every
        # page that marks a run reads these.
        head = head_commit(root)
        stale = {r.crate_sha256: compare.stale(r.as_run(), root) for r in self.records}
        self.marks = {sha: timeline.experiment_code(m) for sha, m in stale.items()}
        self.notes = {r.crate_sha256: _code_note(r, stale[r.crate_sha256], root, head) for r in self.records}
        taken: set[str] = set()
        self.claim_files = {
            c: _file_name(c, taken) for c in sorted({v.claim for vs in self.verdicts.values() for v in vs})
        }
        # The verdicts about each machine kind, over the stored runs and the
        # records of earlier runs (data/records/), each run once, by launch.
        self.kinds = self.kind_verdicts(root)
        self.common = {
            "built": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "run_count": len(self.records),
            "head": head,
            "charts": False,
        }
        self.pages = 0
        self.charts = 0

    def kind_verdicts(self, root: Path) -> dict[str, list[dict[str, Any]]]:
        """Per claim: each machine kind's verdict over its launches."""
        from ..claims import kind_verdicts as pooled
        from . import pooling

        evidence = pooling.gather(
            [Path(r.path) for r in self.records if Path(r.path).exists()], root / "data" / "records", say=lambda s: None
        )
        out: dict[str, list[dict[str, Any]]] = {}
        for machine, mine in pooling.by_machine(evidence):
            parts = pooling.pool_evidence(mine, "accumulating")
            launches = len({e.launch or e.identity.ident for e in mine})
            for claim in sorted({p.claim for p in parts}):
                verdict = pooled.claim_verdict(claim, [p for p in parts if p.claim == claim])
                out.setdefault(claim, []).append(
                    {
                        "machine": machine,
                        "launches": launches,
                        "runs": len(mine),
                        "outcome": verdict.outcome.value,
                        "css": outcome_class(verdict.outcome.value),
                        "line": verdict.line(),
                    }
                )
        return out

    def write(self, target: Path, template: str, **values: Any) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        depth = len(target.relative_to(self.out).parts) - 1
        page = self.env.get_template(template).render(**{**self.common, "root": "../" * depth, **values})
        target.write_text(page)
        self.pages += 1

    def run_row(self, r: store.Record) -> dict[str, Any]:
        return {
            "short": r.short,
            "measured": r.measured[:16].replace("T", " "),
            "commit": r.git_commit[:12],
            "machine": _machine(r),
            "key": self.key_of[r.crate_sha256],
            "numbers": len(self.numbers[r.crate_sha256]),
            "verdicts": len(self.verdicts[r.crate_sha256]),
            "code": self.notes[r.crate_sha256],
        }

    def index(self) -> None:
        claims = [
            {
                "claim": c,
                "file": f,
                "parts": len({v.part for vs in self.verdicts.values() for v in vs if v.claim == c}),
            }
            for c, f in self.claim_files.items()
        ]
        keys = []
        for g in self.groups:
            kinds = sorted({v for f, v in g.fields.items() if f.endswith(": cpu_model")})
            kernels = sorted({v for f, v in g.fields.items() if f.endswith(": kernel")})
            keys.append(
                {"ident": g.ident, "runs": len(g.runs), "summary": f"{', '.join(kinds)}; kernel {', '.join(kernels)}"}
            )
        self.write(
            self.out / "index.html",
            "index.html",
            title="Runs over time and across machines",
            runs=[self.run_row(r) for r in self.records],
            keys=keys,
            claims=claims,
            studies=[
                {"file": name, "nodes": len(doc.get("nodes", [])), "decided": doc.get("decided", 0)}
                for name, doc in self.studies.items()
            ],
        )

    def paper(self, r: store.Record) -> str | None:
        """Copy the run's paper out of its crate (checked member by member)."""
        try:
            with Crate(Path(r.path)) as crate:
                if not crate.has("paper/paper.pdf"):
                    return None
                where = self.out / "runs" / r.short
                where.mkdir(parents=True, exist_ok=True)
                crate.extract("paper/paper.pdf", where, where)
        except (CrateError, OSError) as e:
            print(f"publish: {r.file}: its paper is not copied: {e}", file=sys.stderr)
            return None
        return f"{r.short}/paper/paper.pdf"

    def run_page(self, r: store.Record, diffs: dict[frozenset[str], str]) -> None:
        marks = self.marks[r.crate_sha256]
        numbers = [
            {
                "key": n.key,
                "cell": _interval(n.value, n.low, n.high),
                "unit": n.unit,
                "n": n.n or "",
                "code": timeline.code_status(n.notebook, marks),
            }
            for n in self.numbers[r.crate_sha256].values()
            if timeline.headline(n.key)
        ]
        verdicts = [
            {
                "claim": v.claim,
                "file": self.claim_files[v.claim],
                "part": v.part,
                "outcome": v.outcome,
                "css": outcome_class(v.outcome),
                "estimate": _interval(v.value, v.low, v.high),
            }
            for v in self.verdicts[r.crate_sha256]
        ]
        others = [
            {"name": o.name, "file": diffs[frozenset((r.crate_sha256, o.crate_sha256))]}
            for o in self.records
            if o.crate_sha256 != r.crate_sha256
        ]
        self.write(
            self.out / "runs" / f"{r.short}.html",
            "run.html",
            title=f"Run {r.name}",
            run=r,
            key=self.key_of[r.crate_sha256],
            code=self.notes[r.crate_sha256],
            paper=self.paper(r),
            verdicts=verdicts,
            numbers=numbers,
            environment=sorted(compare.flat_environment(r.environment).items()),
            others=others,
        )

    def key_page(self, g: timeline.KeyGroup) -> None:
        import vl_convert

        charts_dir = self.out / "charts" / g.ident
        charts_dir.mkdir(parents=True, exist_ok=True)
        questions: dict[str, list[dict[str, Any]]] = {}
        lines = timeline.timelines(g, self.numbers, self.marks)
        for i, t in enumerate(lines):
            # The spec's strings (a crate's commits and labels) are drawn as
            # text by Vega and in the SVG: display-safe as the page's own.
            spec = display_safe_tree(timeline.chart(t))
            (charts_dir / f"{i:03d}.svg").write_text(vl_convert.vegalite_to_svg(spec))
            self.charts += 1
            current = sum(p.code == timeline.TODAY for p in t.points)
            if t.changes:
                said = "; ".join(
                    f"changed ×{ratio:.3g} at {p.run.git_commit[:12]} (measured {p.run.measured[:10]})"
                    for p, ratio in ((t.points[at], ratio) for at, ratio in t.changes)
                )
            elif current >= 2:
                said = f"no change among the {current} runs measured with today's code"
            else:
                said = f"{current} run(s) measured with today's code: too few to look for a change"
            questions.setdefault(t.question, []).append(
                {"quantity": t.quantity, "chart": f"{i:03d}", "spec": spec, "summary": said}
            )
        titles = {name: title for name, (title, _) in compare.QUESTIONS.items()}
        self.write(
            self.out / "keys" / f"{g.ident}.html",
            "key.html",
            title=f"Comparison key {g.ident}",
            ident=g.ident,
            fields=sorted(g.fields.items()),
            runs=[self.run_row(r) for r in g.runs],
            current=sum(1 for r in g.runs if self.marks[r.crate_sha256] == {}),
            alpha=changepoints.ALPHA,
            questions=[{"title": titles.get(q, q), "timelines": ts} for q, ts in questions.items()],
            charts=bool(lines),
        )

    def claim_page(self, claim: str, file: str) -> None:
        parts: dict[str, list[dict[str, Any]]] = {}
        for r in self.records:
            for v in self.verdicts[r.crate_sha256]:
                if v.claim != claim:
                    continue
                parts.setdefault(v.part, []).append(
                    {
                        "short": r.short,
                        "measured": r.measured[:16].replace("T", " "),
                        "commit": r.git_commit[:12],
                        "machine": _machine(r),
                        "outcome": v.outcome,
                        "css": outcome_class(v.outcome),
                        "estimate": _interval(v.value, v.low, v.high),
                        "code": timeline.code_status("claims", self.marks[r.crate_sha256]),
                    }
                )
        self.write(
            self.out / "claims" / f"{file}.html",
            "claim.html",
            title=f"Claim {claim}",
            claim=claim,
            kinds=self.kinds.get(claim, []),
            parts=[{"part": p, "rows": rows} for p, rows in sorted(parts.items())],
        )

    def diff_page(self, a: store.Record, b: store.Record, file: str) -> None:
        self.write(
            self.out / "diffs" / f"{file}.html",
            "diff.html",
            title=f"{a.name} against {b.name}",
            a=a,
            b=b,
            key=compare.flat_diff(a.comparison_key, b.comparison_key),
            environment=compare.environment_diff(a.as_run(), b.as_run()),
            settings=compare.settings_diff(a.as_run(), b.as_run()),
            code_a=self.notes[a.crate_sha256],
            code_b=self.notes[b.crate_sha256],
        )

    def build(self, say: Any = print) -> None:
        import vl_convert

        assets = self.out / "assets"
        shutil.copytree(TEMPLATES / "assets", assets)
        (assets / "vega-bundle.js").write_text(vl_convert.javascript_bundle(GLOBALS))
        counts = f"{len(self.records)} run(s), {len(self.groups)} comparison key(s), {len(self.claim_files)} claim(s)"
        say(f"publish: {counts}")
        self.index()
        diffs = {
            frozenset((a.crate_sha256, b.crate_sha256)): f"{a.short}--{b.short}"
            for a, b in itertools.combinations(self.records, 2)
        }
        for a, b in itertools.combinations(self.records, 2):
            self.diff_page(a, b, diffs[frozenset((a.crate_sha256, b.crate_sha256))])
        for i, r in enumerate(self.records, 1):
            say(f"publish: run {i}/{len(self.records)}: {r.name}")
            self.run_page(r, diffs)
        for i, g in enumerate(self.groups, 1):
            say(f"publish: comparison key {i}/{len(self.groups)}: {g.ident}, {len(g.runs)} run(s)")
            self.key_page(g)
        for claim, file in self.claim_files.items():
            self.claim_page(claim, file)
        for name, doc in self.studies.items():
            (self.out / "studies").mkdir(exist_ok=True)
            (self.out / "studies" / f"{name}.html").write_text(study_page(doc, doc.get("report", []), "../"))
            self.pages += 1


def publish(
    db: Path, out: Path, root: Path = paths.REPO, say: Any = print, studies: Sequence[Path] = ()
) -> tuple[int, int]:
    """Build the site into ``out``, replacing what was there only once the
    new one is whole; (pages, charts) written."""
    out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        site = Site(db, work, root, studies)
        site.build(say)
        if out.exists():
            old = out.with_name(f".{out.name}-old-{time.monotonic_ns()}")
            out.rename(old)
            work.rename(out)
            shutil.rmtree(old)
        else:
            work.rename(out)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return site.pages, site.charts


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m iolab.archive.publish",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument(
        "--db",
        type=Path,
        default=store.DEFAULT_STORE,
        help=f"the store (default {paths.relative(store.DEFAULT_STORE)})",
    )
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"the site (default {paths.relative(DEFAULT_OUT)})")
    ap.add_argument(
        "--study",
        type=Path,
        action="append",
        metavar="DIR",
        help=f"a cluster study's folder to give a page (default {paths.relative(STUDY)} when ./repro study wrote it)",
    )
    args = ap.parse_args(argv)
    studies = args.study if args.study is not None else [STUDY] if (STUDY / "verdicts.json").exists() else []
    for d in studies:
        if not (d / "verdicts.json").is_file():
            print(f"publish: --study {d}: no verdicts.json there: run ./repro study first", file=sys.stderr)
            return 2
    started = time.monotonic()
    try:
        if not args.db.exists() or not store.records(args.db):
            print(
                f"publish: {paths.relative(args.db)} holds no run: add crates with ./repro store add "
                "CRATE.zip (./repro archive adds its own)",
                file=sys.stderr,
            )
            return 1
        pages, charts = publish(args.db, args.out, say=lambda s: print(s, file=sys.stderr), studies=studies)
    except (store.StoreError, CrateError) as e:
        print(f"publish: {e}", file=sys.stderr)
        return 1
    size = sum(f.stat().st_size for f in args.out.rglob("*") if f.is_file())
    print(
        f"wrote {paths.relative(args.out)}: {pages} pages, {charts} charts, {size / 1e6:.1f} MB in "
        f"{time.monotonic() - started:.0f} s; open {paths.relative(args.out / 'index.html')}, or serve it with "
        f"python -m http.server --bind 127.0.0.1 --directory {paths.relative(args.out)}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
