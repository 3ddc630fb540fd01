"""A run's record (iolab.claims.records): what it keeps, how copies of one
run are told apart from runs, and how a hostile record is refused whole,
in one line."""

from __future__ import annotations

import datetime as dt
import gzip
import json
import os
from pathlib import Path

import pytest

from iolab import claims
from iolab.claims import records
from iolab.claims.records import RecordError, RunIdentity

CLAIMS = list(claims.CLAIM_TESTS)


def finding(part: str = "c=50 128 B, io_uring/epoll requests/s", values: tuple[float, ...] = (1.0, 1.1, 0.9)) -> dict:
    return {
        "claim": "U1",
        "part": part,
        "setup": "thread-per-connection client, shared",
        "rule_kind": "above",
        "bound": 0.95,
        "margin_share": 0.0,
        "context": False,
        "per_rep": list(values),
    }


def record(**over: object) -> dict:
    findings = [finding()]
    data = {
        "format": records.FORMAT,
        "version": records.VERSION,
        "run": "abc",
        "commit": "10a8834",
        "first_start": "2026-12-06T02:50:00+00:00",
        "launch": "377f8510-8837-4aff-8676-d073460112b3",
        "raw_digest": "ab" * 32,
        "findings_digest": records.findings_digest(findings),
        "machine": "vm, 2 CPUs, Linux 6.18, mitigations on",
        "crate_sha256": "cd" * 32,
        "overlay": "default",
        "run_seconds": 1900.0,
        "findings": findings,
    }
    data.update(over)
    return data


def test_a_record_round_trips_through_its_file(tmp_path: Path) -> None:
    rec = records.parse(record(), CLAIMS)
    path = rec.write(tmp_path)
    again = records.read(path, CLAIMS)
    assert again == rec
    assert again.identity.launch.startswith("377f8510") and again.run_seconds == 1900.0
    assert again.findings[0]["per_rep"] == [1.0, 1.1, 0.9]


def test_a_record_from_before_overlays_were_named_so_keeps_its_overlay(monkeypatch: pytest.MonkeyPatch) -> None:
    # The records in data/records/ name their overlay under "profile".
    legacy = record(profile="claims")
    del legacy["overlay"]
    assert records.parse(legacy, CLAIMS).overlay == "claims"
    assert records.parse(record(overlay="claims"), CLAIMS).overlay == "claims"
    # Negative control: read without the old key, the overlay is lost.
    monkeypatch.setattr(records, "LEGACY_OVERLAY_KEY", "overlay")
    assert records.parse(legacy, CLAIMS).overlay == ""


@pytest.mark.parametrize(
    "change,said",
    [
        ({"format": "other"}, "not an iolab-run-record"),
        ({"version": 2}, "version"),
        ({"first_start": "2099-01-01T00:00:00+00:00"}, "lies in the future"),
        ({"first_start": "yesterday"}, "not an ISO time"),
        ({"commit": "--upload-pack=x"}, "'commit' is not a valid value"),
        ({"launch": "../../etc"}, "'launch' is not a valid value"),
        ({"findings": [{**finding(), "claim": "Z9"}]}, "claim 'Z9', which this checkout does not hold"),
        ({"findings": [{**finding(), "per_rep": [1.0, float("nan")]}]}, "per_rep is not a list of finite numbers"),
        ({"findings": [{**finding(), "per_rep": "1,2"}]}, "per_rep is not a list of finite numbers"),
        ({"findings": [{**finding(), "context": "yes"}]}, "'context' is not true or false"),
        ({"findings": [{**finding(), "bound": "0.95"}]}, "'bound' is not a finite number"),
        ({"findings": [finding()] * (records.MAX_FINDINGS + 1)}, "at most"),
        ({"findings_digest": "ab" * 32}, "do not match its findings digest"),
        ({"run_seconds": -1}, "run_seconds"),
    ],
)
def test_a_hostile_record_is_refused_whole_in_one_line(change: dict, said: str) -> None:
    with pytest.raises(RecordError, match=said) as e:
        records.parse(record(**change), CLAIMS)
    assert "\n" not in str(e.value)


def test_a_record_too_large_not_a_file_or_a_bomb_is_refused_with_its_name(tmp_path: Path) -> None:
    big = tmp_path / "big.json.gz"
    big.write_bytes(os.urandom(records.MAX_COMPRESSED + 1))
    with pytest.raises(RecordError, match=r"big\.json\.gz: larger than 256 kB"):
        records.read(big, CLAIMS)
    # A small file that expands without end is read only to the bound.
    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(gzip.compress(b" " * (64 * records.MAX_BYTES)))
    assert bomb.stat().st_size < records.MAX_COMPRESSED
    with pytest.raises(RecordError, match=r"bomb\.json\.gz: expands beyond 1024 kB"):
        records.read(bomb, CLAIMS)
    link = tmp_path / "link.json.gz"
    link.symlink_to(big)
    with pytest.raises(RecordError, match=r"link\.json\.gz: not a plain file"):
        records.read(link, CLAIMS)
    (tmp_path / "bad.json.gz").write_bytes(gzip.compress(b"{"))
    (tmp_path / "plain.json.gz").write_bytes(b"not gzip at all")
    said: list[str] = []
    assert records.read_all(tmp_path, CLAIMS, say=said.append) == []
    assert len(said) == 5 and all(s.endswith(": left out") and "\n" not in s for s in said), said


def test_a_record_never_carries_a_rule_into_the_verdict() -> None:
    # The record keeps the rule it was judged by only to be compared with
    # this checkout's (iolab.claims.kind_verdicts); its "why" is not kept.
    kept = records.kept_finding({**finding(), "rule": "\u2265 0.000000667", "margin": "made up", "why": "x"})
    assert "rule" not in kept and "margin" not in kept and "why" not in kept


def test_copies_of_one_run_are_one_run_however_their_bytes_were_edited() -> None:
    findings = [finding()]
    digest = records.findings_digest(findings)
    run = RunIdentity("10a8834", "2026-12-06T02:50:00", frozenset({"a", "b"}), "boot1", digest)
    # Raw files edited (every checksum recomputed): the findings and the start remain.
    edited = RunIdentity("10a8834", "2026-12-06T02:50:00", frozenset({"c", "d"}), "boot1", digest)
    assert run.same_run(edited)
    # The start moved too: the per-repetition findings remain.
    moved = RunIdentity("10a8834", "2026-12-07T00:00:00", frozenset({"e"}), "boot9", digest)
    assert run.same_run(moved)
    # The findings rounded in the last digits: still the same digest.
    rounded = [finding(values=(1.0000001, 1.1, 0.9))]
    assert records.findings_digest(rounded) == digest
    # Same start, launch stripped: still one run.
    assert run.same_run(RunIdentity("", "2026-12-06T02:50:00", launch=""))
    # A second run of the same launch is another run.
    second = RunIdentity(
        "10a8834",
        "2026-12-06T04:08:00",
        frozenset({"x"}),
        "boot1",
        records.findings_digest([finding(values=(1.2, 1.0, 1.1))]),
    )
    assert not run.same_run(second)
    # Two nodes of a study starting in the same second on different boots are two runs.
    assert not RunIdentity("", "t", launch="boot1").same_run(RunIdentity("", "t", launch="boot2"))


def test_the_machine_kind_leaves_the_cpu_model_out_and_the_launch_is_the_boot_ids() -> None:
    a = {"local": {"kind": "vm", "cpus": 2, "kernel": "6.18.44-fc-v1272", "mitigations": "on", "cpu_model": "AMD EPYC"}}
    b = {"local": {**a["local"], "cpu_model": "Intel(R) Xeon(R) Processor", "kernel": "6.18.50-other"}}
    assert records.machine_kind(a) == records.machine_kind(b) == "vm, 2 CPUs, Linux 6.18, mitigations on"
    assert records.machine_kind({"n": {**a["local"], "cpus": 64, "kind": "bare-metal"}}) != records.machine_kind(a)
    assert records.launch_of({"a": {"boot_id": "b2"}, "b": {"boot_id": "a1"}}) == "a1+b2"
    assert records.launch_of({"a": {}}) == ""


def test_a_start_in_the_future_is_not_evidence() -> None:
    now = dt.datetime(2026, 12, 6, tzinfo=dt.UTC)
    assert records.future_problem("2026-12-06T12:00:00+00:00", now) == ""
    assert "future" in records.future_problem("2026-12-08T00:00:00+00:00", now)
    # Negative control: the same record dated now parses.
    assert records.parse(record(first_start="2026-12-06T00:00:00+00:00"), CLAIMS, now=now).identity.first_start


def test_the_shipped_records_parse(tmp_path: Path) -> None:
    # Whatever data/records/ holds must read back; its verdicts are never asserted.
    said: list[str] = []
    recs = records.read_all(records.DIRECTORY, CLAIMS, say=said.append)
    assert said == []
    assert len({r.identity.ident for r in recs}) == len(recs)
    for r in recs:
        assert len(json.dumps(r.as_json())) < records.MAX_BYTES
