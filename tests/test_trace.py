"""The bpftrace kernel-side view: its output parsed; where bpftrace cannot
run, nothing measured is stored, and the reason the workflow left it out
reaches the table and the claims."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import pytest
from conftest import REPO, others_can_enter

from iolab import privilege, tables
from iolab.experiments import trace
from iolab.rooms.cost_probes import summaries as models

BPFTRACE_OUTPUT = """Attaching 10 probes...


@ns_getppid: count 989320, average 261, total 258595541
@ns_io_uring_enter: count 3495, average 21760, total 76054170
@submit_req: 55920
"""


def test_parse_output() -> None:
    maps = trace.parse_output(BPFTRACE_OUTPUT)
    assert maps["ns_getppid"] == {"count": 989320, "avg_ns": 261, "total_ns": 258595541}
    assert maps["submit_req"]["count"] == 55920


def measure_trace(
    raw: Path, env: dict[str, str] | None = None, uid: int | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m iolab.measure trace`` into ``raw`` (as ``uid``: the module
    loaded first, then the process drops to it)."""
    node = {"name": "local", "runner": "local", "kind": "auto", "cpus": {"probe": None}}
    argv = [
        "trace",
        *("--node", json.dumps(node), "--settings", json.dumps({"enabled": True, "seconds": 1})),
        *("--rep", "1", "--seed", "1", "--output", str(raw)),
    ]
    drop = f"import os; os.setgid({uid}); os.setuid({uid}); " if uid is not None else ""
    code = f"import sys; from iolab import measure; {drop}sys.exit(measure.main({argv!r}))"
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=REPO, capture_output=True, text=True, timeout=120)


def test_a_trace_that_cannot_run_stores_nothing(tmp_path: Path) -> None:
    """Without bpftrace the measurement fails in one line and leaves no raw
    file: a measurement that did not happen is not data (the workflow
    leaves it out before it starts: iolab.privilege)."""
    raw = tmp_path / "local" / "trace" / "0123456789ab" / "rep1.csv"
    env = dict(os.environ, PATH=str(Path(sys.executable).parent) + ":/usr/sbin:/sbin")  # no /usr/bin
    res = measure_trace(raw, env)
    assert res.returncode == 1, res.stderr
    assert res.stderr.strip().splitlines()[-1] == (
        "iolab: trace on local: cannot trace here: bpftrace is not installed (apt-get install bpftrace)"
    )
    assert not raw.parent.exists() or list(raw.parent.iterdir()) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as uid 65534")
@pytest.mark.skipif(
    not others_can_enter(Path(sys.prefix)),
    reason=f"uid 65534 cannot enter {sys.prefix} (a folder above it is closed to other users)",
)
def test_a_trace_without_root_stores_nothing(tmp_path: Path) -> None:
    out = Path(tempfile.mkdtemp(dir="/tmp"))
    try:
        os.chown(out, 65534, 65534)
        raw = out / "local" / "trace" / "0123456789ab" / "rep1.csv"
        res = measure_trace(raw, uid=65534)
        assert res.returncode == 1, res.stderr
        assert res.stderr.strip().splitlines()[-1] == (
            "iolab: trace on local: cannot trace here: bpftrace attaches kernel tracepoints, "
            "which needs root; run as root to measure it"
        )
        assert not raw.parent.exists() or list(raw.parent.iterdir()) == []
    finally:
        shutil.rmtree(out, ignore_errors=True)


def test_a_trace_left_out_says_why_in_its_table_and_its_claims(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The workflow left the trace out of a node (no raw file): its table
    holds the node's row with the reason, and every claim part that reads
    the trace is "not testable here" with that reason."""
    from iolab.claims import design, openanolis, premise
    from iolab.claims.verdicts import Outcome

    monkeypatch.chdir(tmp_path)
    why = privilege.experiment_left_out("trace") or (
        "bpftrace attaches kernel tracepoints, which needs root; run as root to measure it"
    )
    out = tmp_path / "trace.parquet"
    assert tables.main(["trace", "--output", str(out), f"--left-out=local={why}"]) == 0
    table = tables.load("trace", out)
    assert list(table["node"]) == ["local"] and list(table["skipped"]) == [why] and table["map"].isna().all()
    assert json.loads(tables.sources_path(out).read_text())["left_out"] == {"local": why}
    assert models.kernel_view(table, "local") == {"trace_status": f"skipped: {why}"}
    said = f"the trace experiment did not run here: {why}"
    assert models.trace_not_run(table, "local") == said
    u5 = design.u5(None, models.trace_rates(table, "local", "echo_default", "queue_async_work"), said)[0]
    c1 = premise.premise_in_servers(table, "local", pd.DataFrame())
    for f in [u5, *c1]:
        assert f.outcome == Outcome.NOT_TESTABLE and f.reason == said, f
    assert openanolis.poll_first_inline(table, "local") == (None, said)
    # The negative control: a trace that ran has no such reason.
    measured = table.assign(map="ns_getppid", skipped="")
    assert models.trace_not_run(measured, "local") == ""
    assert tables.main(["trace", "--output", str(out)]) == 1  # neither raw files nor nodes left out


@pytest.mark.skipif(not trace.availability().available, reason="bpftrace is not usable here")
def test_traced_workload_counts_sqes_per_enter() -> None:
    maps = trace.run_workload("uring_n16", seconds=1, cpu=None, seed=1)
    enters = maps["ns_io_uring_enter"]["count"]
    assert enters > 0
    assert maps["submit_req"]["count"] / enters == pytest.approx(16, rel=0.01)
    assert maps["ns_io_uring_enter"]["avg_ns"] > 0


def test_a_bpftrace_that_never_attaches_fails_within_the_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Fault injection: a bpftrace that hangs without printing (the failure
    # mode a plain readline would wait on forever). The deadline must fire,
    # with one line, and nothing may be left running.
    fake = tmp_path / "bpftrace"
    fake.write_text("#!/bin/sh\nexec sleep 6007\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    monkeypatch.setattr(trace, "ATTACH_TIMEOUT", 1)
    with pytest.raises(RuntimeError, match=r"^bpftrace did not attach its probes within 1 s$"):
        trace.run_workload("getppid", seconds=1, cpu=None, seed=1)
    assert subprocess.run(["pgrep", "-f", "sleep 6007"], capture_output=True).returncode == 1


def test_an_attach_line_that_arrives_with_the_line_before_it_is_seen(tmp_path: Path) -> None:
    # bpftrace prints "Attaching N probes..." and then, once attached, the
    # BEGIN line; when both reach the pipe before they are read, a buffered
    # readline takes both and select() then waits on an empty pipe until the
    # deadline (a trace repetition lost 300 s so). Both lines in one write:
    # the wait must return, and the process must still be running.
    fake = subprocess.Popen(
        ["sh", "-c", f"printf 'Attaching 12 probes...\\n{trace.ATTACHED}\\n'; exec sleep 6011"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        time.sleep(0.5)  # both lines are in the pipe before the first read
        trace.wait_attached(fake, timeout=20)
        assert fake.poll() is None
    finally:
        fake.kill()
        fake.wait()
    # And a bpftrace that exits first is named, with what it said.
    gone = subprocess.Popen(
        ["sh", "-c", "echo 'ERROR: no BTF' >&2; echo 'Attaching 1 probe...'"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    with pytest.raises(RuntimeError, match=r"^bpftrace exited before attaching: ERROR: no BTF$"):
        trace.wait_attached(gone, timeout=20)


@pytest.mark.skipif(
    not trace.availability().available or (os.cpu_count() or 1) < 2,
    reason="bpftrace is not usable here, or fewer than 2 CPUs",
)
def test_traced_echo_workloads_show_where_task_work_runs() -> None:
    """The default ring runs its completions' task work in the server's task
    (after a kick); DEFER_TASKRUN runs it deferred, at the server's next wait,
    and never the other way. The poll-first server (C3's) completes every
    receive and send in the enter that submits it: io_uring never arms a
    poll for one, where the default ring arms one for receives that find
    no data (only its accepts do); neither hands a request to io-wq."""
    cpus = {"server": 0, "client": 1}
    default = trace.run_workload("echo_default", seconds=1, cpu=None, seed=1, cpus=cpus)
    deferred = trace.run_workload("echo_defer_taskrun", seconds=1, cpu=None, seed=1, cpus=cpus)
    polled = trace.run_workload("echo_poll_first", seconds=1, cpu=None, seed=1, cpus=cpus)
    # Each ran and echoed: 1785-16806 requests in its second beside four
    # busy loops on these 2 CPUs, so no count near a quiet machine's is asked.
    for maps in default, deferred, polled:
        assert maps["echoed_requests"]["count"] > 100

    def runs(maps: dict, name: str) -> int:  # bpftrace may print an unused count as 0, or not at all
        return maps.get(name, {"count": 0})["count"]

    assert runs(default, "task_work_run") > 0 and runs(default, "local_work_run") == 0
    assert runs(deferred, "local_work_run") > 0 and runs(deferred, "task_work_run") == 0
    # The default ring arms a poll for a receive that finds no data: how
    # often depends on timing (above 5 % of requests on a quiet machine,
    # 0.26 % beside a pipeline run on both CPUs, where data is mostly there
    # by the time the server asks), so only that it happens is asserted.
    assert runs(default, "poll_arm") > 0
    # The poll-first server reads and writes only what is ready (MSG_DONTWAIT
    # after its own poll): io_uring arms no poll per request, only for the
    # odd accept that found no connection yet, at most a few per connection
    # (2-3 in all beside four busy loops; 50 alone and 114 beside a loaded
    # CPU in earlier runs). A server that armed one per request would arm
    # half as many as it echoed; a busy machine echoes fewer requests, so
    # the accepts' allowance is a count, not a share of the requests.
    allowance = 4 * trace.ECHO_CONNECTIONS
    requests = polled["echoed_requests"]["count"]
    assert runs(polled, "poll_arm") < 0.01 * requests + allowance, (runs(polled, "poll_arm"), requests)
    assert runs(default, "queue_async_work") == runs(polled, "queue_async_work") == 0
    rows = [
        {"node": "n", "workload": w, "map": m, "count": v["count"], "avg_ns": 0, "total_ns": 0, "skipped": ""}
        for w, maps in (("echo_default", default), ("echo_defer_taskrun", deferred))
        for m, v in maps.items()
    ]
    view = {
        k: v
        for k, v in models.kernel_view(
            pd.DataFrame(
                rows
                + [
                    {"node": "n", "workload": w, "map": m, "count": 1, "avg_ns": 1, "total_ns": 1, "skipped": ""}
                    for w, m in (
                        ("getppid", "ns_getppid"),
                        ("sendrecv", "ns_sendto"),
                        ("sendrecv", "ns_recvfrom"),
                        ("uring_n1", "ns_io_uring_enter"),
                        ("uring_n16", "ns_io_uring_enter"),
                    )
                ]
            ),
            "n",
        ).items()
        if k.startswith("trace_echo_")
    }
    assert view["trace_echo_default_task_work_run_per_request"] > 0
    assert view["trace_echo_defer_taskrun_local_work_run_per_request"] > 0
    assert view["trace_echo_defer_taskrun_task_work_run_per_request"] == 0


@pytest.mark.skipif(
    not trace.availability().available or (os.cpu_count() or 1) < 2,
    reason="bpftrace is not usable here, or fewer than 2 CPUs",
)
def test_the_trace_counts_only_the_processes_it_started(tmp_path: Path) -> None:
    """Another run's echo-uring on the same machine (here a DEFER_TASKRUN
    server, whose task work runs at its waits: local_work_run) must not
    reach the traced default ring's counts: the default ring never runs
    deferred task work, so any local_work_run it shows came from elsewhere.
    Filtering by the program's name alone (comm) counted the other run's."""
    build = REPO / "native" / "build"
    subprocess.run(["make", "-s", "-C", str(REPO / "native")], check=True, capture_output=True, timeout=600)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # Started by a shell, as another run's would be: not this process's child.
    beside = subprocess.Popen(
        [
            "sh",
            "-c",
            f"{build}/echo-uring --port {port} --single-issuer --defer-taskrun 2>/dev/null >/dev/null & pid=$!; "
            f"sleep 0.3; {build}/loadgen --port {port} --connections 20 --bytes 128 --duration 30 --warmup 0 "
            ">/dev/null; kill -TERM $pid; wait $pid",
        ],
        start_new_session=True,
    )
    try:
        time.sleep(1.5)  # the other load is running
        assert beside.poll() is None, "the other run did not start"
        maps = trace.run_workload("echo_default", seconds=1, cpu=None, seed=1, cpus={"server": 0, "client": 1})
        assert beside.poll() is None, "the other run ended before the traced workload did"
    finally:
        os.killpg(beside.pid, signal.SIGTERM)
        beside.wait(timeout=30)
    assert maps["echoed_requests"]["count"] > 100
    assert maps.get("local_work_run", {"count": 0})["count"] == 0, maps
    assert maps.get("task_work_run", {"count": 0})["count"] > 0, maps
