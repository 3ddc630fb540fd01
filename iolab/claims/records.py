"""A run's record: the few kB of evidence a verdict about the machine kind
needs, kept after the crate and the machine are gone.

A record holds a run's identity (its commit, first start, launch and the
digests of its raw files and of its findings), the machine kind it ran on,
the SHA-256 of its crate, and each claim part's per-repetition values as
the run's findings recorded them (iolab.claims.kind_verdicts reads them as it
reads a crate's). ``./repro archive`` writes one beside the crate, under
``data/records/<run>.json.gz`` (gzip'd JSON, about 5 kB); the project keeps the records of its runs on distinct
launches there, so the verdicts about the machine kind grow with every
launch instead of starting from zero on each new machine.

A record is untrusted data, like a crate: it is parsed field by field
against a fixed shape (never executed, never used as a path or a parameter
name), bounded in size, and refused whole, in one line, when any field is
not what it must be or its first start lies in the future. It carries no
rule: every part is judged by this checkout's claims (iolab.claims.kind_verdicts).

**Identity.** Copies of one run count once however their bytes were
edited: two runs are the same run when they share a raw file (or the
digest of all of them), the digest of their per-repetition findings, or
their first start on one launch (or where either launch is unknown).
"""

from __future__ import annotations

import datetime as dt
import gzip
import hashlib
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import paths

FORMAT = "iolab-run-record"
VERSION = 1
DIRECTORY = paths.REPO / "data" / "records"
SUFFIX = ".json.gz"
# A default run's record is about 25 kB of JSON, 5 kB compressed; these
# bound what a made-up one can make a reader read and parse (a small file
# that expands without end is refused at the bound).
MAX_BYTES = 1 << 20
MAX_COMPRESSED = 256 << 10
MAX_FINDINGS = 2000
MAX_VALUES = 1000
MAX_TEXT = 600
# A start this far past the reader's clock is refused (clocks drift; a
# record from tomorrow is not evidence of today).
FUTURE_SLACK = dt.timedelta(days=1)
_HEX = re.compile(r"[0-9a-f]*")
_BOOT = re.compile(r"[0-9a-f-]{0,80}(\+[0-9a-f-]{1,80}){0,63}")
_COMMIT = re.compile(r"[0-9a-f]{7,40}|unknown")
# The fields of a finding a record keeps: what pooling reads, nothing else.
# Records written before the config overlays were called overlays name
# theirs under this key; they are read as they are.
LEGACY_OVERLAY_KEY = "profile"
FINDING_TEXT = ("claim", "part", "setup", "cell", "role", "reason", "note", "group", "rule_kind")
FINDING_FLAGS = ("context", "stand_in", "gate_note")
FINDING_NUMBERS = ("bound", "margin_share", "round0")


class RecordError(ValueError):
    """Why a record cannot be read or trusted: one line."""


def digest_of(texts: Iterable[str]) -> str:
    """SHA-256 of sorted lines."""
    return hashlib.sha256("\n".join(sorted(texts)).encode()).hexdigest()


def _sig(x: float) -> str:
    return f"{float(x):.6g}"


def findings_digest(findings: Sequence[Mapping[str, Any]]) -> str:
    """A digest of a run's per-repetition findings (claim, part, setup and
    the values to 6 significant figures): equal for every copy of the run,
    however its files were re-zipped or its bytes edited. "" where no
    finding has values."""
    lines = []
    for f in findings:
        values = f.get("per_rep")
        if not isinstance(values, list) or not values:
            continue
        kept = [_sig(v) for v in values if isinstance(v, int | float) and math.isfinite(v)]
        if kept:
            lines.append(json.dumps([str(f.get("claim", "")), str(f.get("part", "")), str(f.get("setup", "")), kept]))
    return digest_of(lines) if lines else ""


@dataclass(frozen=True)
class RunIdentity:
    """What makes two copies one run (module docstring). ``raw`` is the set
    of its raw files' SHA-256 where a crate gives them; a record keeps only
    ``raw_digest``, the digest of that set."""

    commit: str
    first_start: str
    raw: frozenset[str] = frozenset()
    launch: str = ""
    findings: str = ""
    raw_digest: str = ""

    def __post_init__(self) -> None:
        if self.raw and not self.raw_digest:
            object.__setattr__(self, "raw_digest", digest_of(self.raw))

    @property
    def ident(self) -> str:
        """A short name for the run: its raw files' digest, cut."""
        if self.raw_digest:
            return self.raw_digest[:12]
        basis = self.findings or f"{self.commit}\n{self.first_start}"
        return hashlib.sha256(basis.encode()).hexdigest()[:12]

    def same_run(self, other: RunIdentity) -> bool:
        if self.raw and other.raw and self.raw & other.raw:
            return True
        if self.raw_digest and self.raw_digest == other.raw_digest:
            return True
        if self.findings and self.findings == other.findings:
            return True
        if self.first_start and self.first_start == other.first_start:
            return not (self.launch and other.launch) or self.launch == other.launch
        return not (self.raw or other.raw or self.findings or other.findings or self.first_start) and (
            self.commit == other.commit
        )


def when(text: str) -> dt.datetime | None:
    """An ISO time as an aware datetime (naive: UTC); None if unreadable."""
    try:
        t = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=dt.UTC)


def future_problem(first_start: str, now: dt.datetime | None = None) -> str:
    """Why a run's first start cannot be evidence ("" if it can)."""
    t = when(first_start) if first_start else None
    if first_start and t is None:
        return f"its first start {first_start[:40]!r} is not an ISO time"
    if t is not None and t > (now or dt.datetime.now(dt.UTC)) + FUTURE_SLACK:
        return f"its first start {first_start[:40]} lies in the future"
    return ""


@dataclass(frozen=True)
class RunRecord:
    """One run's record (module docstring)."""

    identity: RunIdentity
    machine: str  # the machine kind it ran on (``machine_kind``)
    crate_sha256: str  # "" for a run not archived as a crate
    overlay: str  # the config overlay the run used ("default": none)
    findings: tuple[dict[str, Any], ...] = field(default_factory=tuple)
    # Its measurement and notebook seconds (what a launch costs), where known.
    run_seconds: float | None = None

    def as_json(self) -> dict[str, Any]:
        i = self.identity
        return {
            "format": FORMAT,
            "version": VERSION,
            "run": i.ident,
            "commit": i.commit,
            "first_start": i.first_start,
            "launch": i.launch,
            "raw_digest": i.raw_digest,
            "findings_digest": i.findings,
            "machine": self.machine,
            "crate_sha256": self.crate_sha256,
            "overlay": self.overlay,
            "run_seconds": self.run_seconds,
            "findings": list(self.findings),
        }

    def write(self, directory: Path = DIRECTORY) -> Path:
        from .. import atomic

        path = directory / f"{self.identity.ident}{SUFFIX}"
        text = json.dumps(self.as_json(), separators=(",", ":"), sort_keys=True) + "\n"
        # mtime 0: the same record always compresses to the same bytes.
        atomic.write_bytes(path, gzip.compress(text.encode(), compresslevel=9, mtime=0))
        return path


def machine_kind(nodes: Mapping[str, Any]) -> str:
    """The machine kind of a run's nodes: what a verdict about "this machine
    kind" generalises over. The CPU model is not part of it (launches of one
    VM kind land on different CPUs), the kind of node, its CPU count, its
    kernel's series and its mitigations are."""
    kinds = []
    for _, facts in sorted(nodes.items()):
        if not isinstance(facts, Mapping):
            continue
        kernel = str(facts.get("kernel", "?"))
        series = ".".join(kernel.split("-")[0].split(".")[:2])
        kinds.append(
            f"{facts.get('kind', '?')}, {facts.get('cpus', '?')} CPUs, Linux {series}, "
            f"mitigations {facts.get('mitigations', '?')}"
        )
    return " + ".join(dict.fromkeys(kinds)) or "unknown"


def launch_of(nodes: Mapping[str, Any]) -> str:
    """A run's launch: the boot ids of its nodes' kernels ("" unknown)."""
    boots = sorted(
        {str(f.get("boot_id")) for f in nodes.values() if isinstance(f, Mapping) and isinstance(f.get("boot_id"), str)}
    )
    return "+".join(boots)


# A finding's fields that pooling reads as absent when they hold these.
_DEFAULTS: dict[str, Any] = {"context": False, "stand_in": False, "gate_note": False, "role": "both"}


def kept_finding(entry: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a finding a record keeps (what pooling reads), its
    values to the 6 significant figures its digest reads, and nothing that
    holds its default."""
    out: dict[str, Any] = {
        k: entry[k]
        for k in (*FINDING_TEXT, *FINDING_FLAGS, *FINDING_NUMBERS)
        if k in entry and entry[k] not in ("", None) and _DEFAULTS.get(k, object()) != entry[k]
    }
    values = entry.get("per_rep")
    out["per_rep"] = (
        [float(_sig(v)) for v in values if isinstance(v, int | float) and math.isfinite(v)]
        if isinstance(values, list)
        else []
    )
    if isinstance(entry.get("gate"), Mapping):
        out["gate"] = dict(entry["gate"])
    return out


def _text(d: Mapping[str, Any], key: str, pattern: re.Pattern[str] | None = None, limit: int = MAX_TEXT) -> str:
    v = d.get(key, "")
    if v is None:
        v = ""
    if not isinstance(v, str) or len(v) > limit or (pattern is not None and not pattern.fullmatch(v)):
        raise RecordError(f"its {key!r} is not a valid value")
    return v


def _finding(raw: Any, claims: Iterable[str]) -> dict[str, Any]:
    if not isinstance(raw, Mapping):
        raise RecordError("a finding is not an object")
    out: dict[str, Any] = {}
    for key in FINDING_TEXT:
        if key in raw:
            out[key] = _text(raw, key)
    if out.get("claim") not in set(claims):
        raise RecordError(f"a finding names claim {str(out.get('claim'))[:20]!r}, which this checkout does not hold")
    for key in FINDING_FLAGS:
        if key in raw:
            if not isinstance(raw[key], bool):
                raise RecordError(f"a finding's {key!r} is not true or false")
            out[key] = raw[key]
    for key in FINDING_NUMBERS:
        v = raw.get(key)
        if v is not None and not (isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)):
            raise RecordError(f"a finding's {key!r} is not a finite number")
        if key in raw:
            out[key] = v
    values = raw.get("per_rep", [])
    if (
        not isinstance(values, list)
        or len(values) > MAX_VALUES
        or not all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in values)
    ):
        raise RecordError("a finding's per_rep is not a list of finite numbers")
    out["per_rep"] = [float(v) for v in values]
    gate = raw.get("gate")
    if gate is not None:
        if not isinstance(gate, Mapping) or len(json.dumps(gate, default=str)) > 4 * MAX_TEXT:
            raise RecordError("a finding's gate is not a small object")
        out["gate"] = dict(gate)
    return out


def parse(data: Any, claims: Iterable[str], crate_sha256: str = "", now: dt.datetime | None = None) -> RunRecord:
    """A record from its parsed JSON, checked field by field; ``claims``:
    the claim ids this checkout holds."""
    if not isinstance(data, Mapping) or data.get("format") != FORMAT:
        raise RecordError(f"not an {FORMAT}")
    if data.get("version") != VERSION:
        raise RecordError(f"version {str(data.get('version'))[:10]!r}, this checkout reads {VERSION}")
    first_start = _text(data, "first_start", limit=40)
    if problem := future_problem(first_start, now):
        raise RecordError(problem)
    raw = data.get("findings")
    if not isinstance(raw, list) or len(raw) > MAX_FINDINGS:
        raise RecordError(f"its findings are not a list of at most {MAX_FINDINGS}")
    claim_ids = list(claims)
    findings = tuple(_finding(f, claim_ids) for f in raw)
    identity = RunIdentity(
        _text(data, "commit", _COMMIT, 40),
        first_start,
        launch=_text(data, "launch", _BOOT, 8000),
        findings=findings_digest(findings),
        raw_digest=_text(data, "raw_digest", _HEX, 64),
    )
    recorded = _text(data, "findings_digest", _HEX, 64)
    if recorded and recorded != identity.findings:
        raise RecordError("its findings do not match its findings digest")
    sha = _text(data, "crate_sha256", _HEX, 64)
    if crate_sha256 and sha and sha != crate_sha256:
        raise RecordError("it names another crate than the one beside it")
    seconds = data.get("run_seconds")
    if seconds is not None and not (
        isinstance(seconds, int | float) and not isinstance(seconds, bool) and 0 < seconds < 1e7
    ):
        raise RecordError("its run_seconds is not a positive number of seconds")
    return RunRecord(
        identity,
        _text(data, "machine", limit=400),
        sha,
        _text(data, "overlay" if "overlay" in data else LEGACY_OVERLAY_KEY, limit=80),
        findings,
        float(seconds) if seconds is not None else None,
    )


def _inflate(path: Path) -> bytes:
    """A record file's JSON bytes, read within the bounds."""
    if path.is_symlink() or not path.is_file():
        raise RecordError("not a plain file")
    if path.stat().st_size > MAX_COMPRESSED:
        raise RecordError(f"larger than {MAX_COMPRESSED >> 10} kB")
    with gzip.open(path, "rb") as f:
        data = f.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise RecordError(f"expands beyond {MAX_BYTES >> 10} kB")
    return data


def read(path: Path, claims: Iterable[str]) -> RunRecord:
    """One record file, checked (RecordError names the file)."""
    try:
        return parse(json.loads(_inflate(path)), claims)
    except (OSError, EOFError, ValueError, RecursionError) as e:
        raise RecordError(f"{path.name}: {e}") from None


def read_all(directory: Path, claims: Iterable[str], say: Any = print) -> list[RunRecord]:
    """Every record under ``directory`` that checks out; each refused one is
    said in one line and left out."""
    out = []
    claim_ids = list(claims)
    for path in sorted(directory.glob(f"*{SUFFIX}")) if directory.is_dir() else []:
        try:
            out.append(read(path, claim_ids))
        except RecordError as e:
            say(f"records: {e}: left out")
    return out
