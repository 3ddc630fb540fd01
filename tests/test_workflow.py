"""The workflow as a user drives it: lint, dry run, a real smoke run, no-op
re-runs, and what re-runs after an edit."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, snakemake, tool_env
from test_interrupt import repro_env

from iolab import readers
from iolab.readers import sha256
from iolab.registry import REGISTRY
from iolab.schema import subschema


def planned_jobs(dry_run_output: str) -> dict[str, int]:
    """Rule name -> job count, from the job-stats table of `snakemake -n`."""
    rules: dict[str, int] = {}
    in_table = False
    for line in dry_run_output.splitlines():
        if line.startswith("job "):
            in_table = True
            continue
        if in_table:
            if line.startswith("total"):
                break
            m = re.match(r"^(\w+)\s+(\d+)$", line.strip())
            if m:
                rules[m.group(1)] = int(m.group(2))
    return rules


def planned_rules(dry_run_output: str) -> set[str]:
    return set(planned_jobs(dry_run_output))


def test_lint_is_clean(workflow: Path) -> None:
    res = snakemake(workflow, "--lint")
    out = res.stdout + res.stderr
    assert res.returncode == 0, out
    assert "Lints for" not in out, out
    assert "Congratulations" in out


def smoke_measures() -> set[str]:
    """The experiments the smoke overlay measures on its node, as the
    workflow plans them (iolab.runplan): not ib (it needs a node with an
    ib.peer) nor an experiment off by default that the overlay leaves off
    (epoll_ctl)."""
    from iolab import runplan
    from iolab.config import load, validate_config

    config = load(REPO / "config" / "overlays" / "smoke.yaml")
    plan = runplan.RunPlan(validate_config(config), config, REPO, cores=lambda: 2)
    return {e for e in plan.experiments_on if any(plan.measures(n, e) for n in plan.nodes)}


def switchable_experiments() -> list[str]:
    """The experiments whose config section has an on/off switch."""
    return [name for name in REGISTRY if "enabled" in subschema("experiments", name).get("properties", {})]


def test_each_switch_turns_its_experiment_off(workflow: Path) -> None:
    """Every experiment but the four cost probes has ``enabled`` in its
    section, and with it false the workflow plans no measurement of it;
    the same plan with the switches on measures each (the control)."""
    switchable = switchable_experiments()
    assert set(REGISTRY) - set(switchable) == {"syscall", "sendrecv", "uring_batch", "nop"}
    off = workflow / "all-off.yaml"
    off.write_text(json.dumps({"experiments": {name: {"enabled": False} for name in switchable}}))
    plans = {}
    for label, extra in (("on", []), ("off", [str(off)])):
        res = snakemake(
            workflow, "-n", "--forceall", "--cores", "all", "--configfile", "config/overlays/smoke.yaml", *extra
        )
        assert res.returncode == 0, res.stderr
        plans[label] = {
            r.removeprefix("measure_") for r in planned_rules(res.stdout + res.stderr) if r.startswith("measure_")
        }
    # What the workflow plans is what iolab.runplan plans (ib needs a node
    # with an ib.peer, which the smoke overlay's node has not), and that is
    # every experiment but ib and those off by default (epoll_ctl).
    assert plans["on"] == smoke_measures()
    assert set(REGISTRY) - smoke_measures() == {"ib", "epoll_ctl"}
    assert plans["off"] == set(REGISTRY) - set(switchable)


def test_dry_run_with_default_config(workflow: Path) -> None:
    res = snakemake(workflow, "-n", "--cores", "all")
    assert res.returncode == 0, res.stderr
    rules = planned_rules(res.stdout + res.stderr)
    assert {
        "measure_syscall",
        "measure_echo",
        "measure_mpi",
        "tidy_table",
        "notebook_cost_model",
        "notebook_echo",
        "paper_pdf",
        "all",
    } <= rules


def test_smoke_run_end_to_end(smoke_run: tuple[Path, object]) -> None:
    wd, res = smoke_run
    # The jobs' own lines (the cause of a failed job) are on stdout; a later
    # test re-runs the workflow and overwrites their logs.
    failed = [ln for ln in res.stdout.splitlines() if ln.startswith(("iolab:", "missing dependency", "make"))]
    assert res.returncode == 0, "\n".join(failed[-20:]) + "\n" + res.stderr[-3000:]
    pdf = wd / "paper" / "paper.pdf"
    assert pdf.read_bytes().startswith(b"%PDF")
    for name in ("syscall_cost", "sendrecv_cost", "uring_batch_time", "cost_model_per_request"):
        for ext in ("pdf", "png", "svg"):
            assert (wd / "paper" / "figures" / f"{name}.{ext}").stat().st_size > 1000
    executed = json.loads((wd / "results" / "notebooks" / "cost_model.ipynb").read_text())
    assert executed["metadata"]["papermill"]["exception"] in (None, False)
    # The smoke overlay measures every cell the paper's text discusses.
    assert 'shows "not measured"' not in res.stdout + res.stderr


def test_a_number_the_config_left_out_shows_as_not_measured_and_is_named(smoke_copy: Path) -> None:
    # A config without the default ring at c = 50 (say) still gets its paper:
    # the sentence about that cell says "not measured", and the build names the key.
    wd = smoke_copy
    generated = wd / "paper" / "generated" / "numbers.json"
    numbers = json.loads(generated.read_text())
    del numbers["echo_default_c50_rps"]
    generated.write_text(json.dumps(numbers))
    pdf = wd / "paper" / "paper.pdf"
    pdf.unlink()
    res = subprocess.run(
        [sys.executable, "-m", "iolab.report.paper", "build", "paper/paper.typ", "--output", "paper/paper.pdf"],
        cwd=wd,
        env=tool_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    assert res.stderr.strip().splitlines() == [
        'iolab: warning: the paper shows "not measured" for 1 number(s) this run did not produce: '
        "echo_default_c50_rps (its text discusses the paper overlay's cells; this config leaves them out)"
    ]
    assert pdf.read_bytes().startswith(b"%PDF")


def test_every_raw_file_names_its_registered_format(smoke_run: tuple[Path, object]) -> None:
    wd, _ = smoke_run
    raws = [p for p in (wd / "data" / "raw").glob("*/*/*/rep*.csv") if not p.name.endswith(".histograms.csv")]
    # Every experiment the smoke overlay's node runs (ib needs an ib.peer).
    assert {p.parent.parent.name for p in raws} == smoke_measures()
    wrong = [
        (str(p), readers.raw_format(p))
        for p in raws
        if readers.raw_format(p) != REGISTRY[p.parent.parent.name].raw_format
    ]
    assert wrong == []


def test_smoke_numbers_come_from_the_measurement(smoke_run: tuple[Path, object]) -> None:
    import pandas as pd

    wd, _ = smoke_run
    numbers = json.loads((wd / "paper" / "generated" / "numbers.json").read_text())
    table = pd.read_parquet(wd / "results" / "tables" / "syscall.parquet")
    measured = table[~table["warmup"] & (table["variant"] == "getppid")]
    # The median over repetitions of each repetition's median.
    assert numbers["s_getppid_ns"]["value"] == measured.groupby("rep")["ns_per_call"].median().median()
    assert numbers["s_repeats"]["value"] == 2  # the smoke overlay's repeats
    # Two repetitions give no 95 % interval, and the paper says so.
    assert numbers["s_getppid_ns"]["ci95"] == [None, None] and not numbers["s_getppid_ns"]["ci_bounded"]
    assert numbers["s_getppid_ns"]["ci_text"] == "none from 2 repetitions; it needs 6"
    # Quoted figures are labelled as such, never mixed with ours.
    assert "quoted_from" in numbers["c1_s_mitigations_on_ns"]
    assert "quoted_from" not in numbers["s_getppid_ns"]


def test_manifest_links_figures_to_code_tables_and_raw_files(smoke_run: tuple[Path, object]) -> None:
    wd, _ = smoke_run
    manifest = json.loads((wd / "paper" / "figures" / "manifest.json").read_text())
    fig = manifest["figures"]["syscall_cost"]
    assert fig["notebook"] == "notebooks/cost_model.py"
    assert "results/tables/syscall.parquet" in fig["tables"]
    # 2 repetitions of syscall, sendrecv, uring_batch, nop, epoll_wait,
    # send_zc, trace and echo: the cost-model notebook's tables (its model
    # figure overlays the measured echo servers)
    assert len(fig["raw"]) == 16
    assert {Path(r["raw"]).parts[3] for r in fig["raw"]} == {
        "syscall",
        "sendrecv",
        "uring_batch",
        "nop",
        "epoll_wait",
        "send_zc",
        "trace",
        "echo",
    }
    for raw in fig["raw"]:
        path = wd / raw["raw"]
        assert sha256(path) == raw["sha256"]
        side = json.loads((wd / raw["provenance"]).read_text())
        for key in ("node", "host", "cpu", "mitigations", "virtualization", "toolchain", "git", "settings", "started"):
            assert key in side, key
        assert side["toolchain"]["liburing"]
        assert side["virtualization"]["kind"] in ("bare-metal", "vm", "container")


def test_noop_rerun_does_nothing(smoke_copy: Path) -> None:
    before = {p: p.stat().st_mtime_ns for p in (smoke_copy / "paper").rglob("*") if p.is_file()}
    res = snakemake(smoke_copy, "--cores", "all", "--configfile", "config/overlays/smoke.yaml")
    assert res.returncode == 0, res.stderr
    assert "Nothing to be done" in res.stdout + res.stderr
    after = {p: p.stat().st_mtime_ns for p in (smoke_copy / "paper").rglob("*") if p.is_file()}
    assert before == after


def planned_after_edit(wd: Path, relpath: str, line: str) -> dict[str, int]:
    """The jobs a dry run of the smoke overlay plans after appending
    ``line`` to one file of the run's copy."""
    edited = wd / relpath
    edited.write_text(edited.read_text() + line)
    res = snakemake(wd, "-n", "--cores", "all", "--configfile", "config/overlays/smoke.yaml")
    assert res.returncode == 0, res.stderr
    return planned_jobs(res.stdout + res.stderr)


def test_editing_a_notebook_reruns_only_analysis(smoke_copy: Path) -> None:
    rules = set(planned_after_edit(smoke_copy, "notebooks/cost_model.py", "\n# %%\n# an edit\n"))
    assert rules == {"notebook_cost_model", "paper_numbers", "figure_manifest", "paper_pdf", "all"}


@pytest.mark.parametrize("reader", ["iolab/readers.py", "iolab/rooms/cost_probes/tidy.py"])
def test_editing_a_reader_rebuilds_the_tables(smoke_copy: Path, reader: str) -> None:
    # The tidy step's code is the closure of iolab.tables and of every
    # room's tidy module, not tables.py alone: a reader edited left the
    # tables stale while the notebooks re-ran.
    jobs = planned_after_edit(smoke_copy, reader, "\n# an edit\n")
    assert jobs.get("tidy_table", 0) >= 1 and "notebook_cost_model" in jobs
    assert not {rule for rule in jobs if rule.startswith("measure")}


def test_editing_a_manifest_rebuilds_its_table_only(smoke_copy: Path) -> None:
    # An experiment's raw columns (what its reader checks and fills in) are
    # in its manifest, not in the tidy step's code.
    jobs = planned_after_edit(smoke_copy, "config/experiments/echo.yaml", "\n# an edit\n")
    assert jobs.get("tidy_table") == 1 and "notebook_echo" in jobs
    assert not {rule for rule in jobs if rule.startswith("measure")}


def test_editing_a_rooms_figure_reruns_its_notebook_not_the_tables(smoke_copy: Path) -> None:
    # Each notebook's code input is its own import closure: before, every
    # notebook read one closure of the whole read side, and this edit
    # re-ran all of them.
    jobs = planned_after_edit(smoke_copy, "iolab/rooms/send_zc/present.py", "\n# an edit\n")
    assert {rule for rule in jobs if rule.startswith("notebook_")} == {"notebook_cost_model"}
    assert "tidy_table" not in jobs


def test_editing_the_papers_code_rebuilds_the_paper_not_the_notebooks(smoke_copy: Path) -> None:
    jobs = planned_after_edit(smoke_copy, "iolab/report/artifact.py", "\n# an edit\n")
    assert {"paper_numbers", "paper_pdf"} <= set(jobs)
    assert not {rule for rule in jobs if rule.startswith(("notebook_", "measure", "tidy"))}


def test_smoke_echo_results(smoke_run: tuple[Path, object]) -> None:
    import pandas as pd

    wd, _ = smoke_run
    echo = pd.read_parquet(wd / "results" / "tables" / "echo.parquet")
    # smoke: 10 presets (C and Go) x 2 setups x 3 connection counts x 1 size x 2 repetitions
    assert len(echo) == 120
    # U4's helpers need a CPU besides the server's and the load generator's:
    # pinned apart on a 2-CPU node there is none (the cells say so); in the
    # shared layout every CPU is spare, and the cell records which it used.
    helpers = echo["preset"].isin(["sqpoll_sq_aff_spare", "async_iowq_spare"])
    cpus = os.cpu_count() or 1
    pinned_helpers = echo[helpers & (echo["layout"] == "pinned")]
    if cpus == 2:
        assert (pinned_helpers["status"] == "unavailable").all() and len(pinned_helpers) == 12
        assert pinned_helpers["reason"].str.contains("runs a helper on a CPU besides the server's").all()
    shared_helpers = echo[helpers & (echo["layout"] == "shared")]
    assert (shared_helpers["status"] == "ok").all() and len(shared_helpers) == 12
    assert set(shared_helpers.loc[shared_helpers["preset"] == "async_iowq_spare", "helper_cpus"]) == {f"0-{cpus - 1}"}
    assert set(shared_helpers.loc[shared_helpers["preset"] == "sqpoll_sq_aff_spare", "helper_cpus"]) == {"0"}
    # Go's net server in the source's blocking mode starts an OS thread per
    # connection as each first blocks; on 2 CPUs some of 50 or 100 are not
    # served within the smoke's 0.4 s cells, and the load generator fails
    # such a cell rather than measure fewer connections than asked. Every
    # other cell measures.
    ramping = ~helpers & (echo["preset"] == "go_net") & (echo["status"] == "failed")
    assert ramping.sum() < (echo["preset"] == "go_net").sum()
    assert echo.loc[ramping, "reason"].str.contains(r"the server answered \d+ of the \d+ connections asked for").all()
    steady = ~helpers & ~ramping
    assert (echo.loc[steady, "status"] == "ok").all() and (echo.loc[~helpers, "helper_cpus"] == "").all()
    echo = echo[echo["status"] == "ok"]
    assert (echo["server_ns_per_request"] > 0).all()
    assert set(zip(echo["client"], echo["layout"], strict=True)) == {
        ("event-loop-uring", "pinned"),
        ("thread-per-connection", "shared"),
    }
    assert set(echo["server"]) == {"epoll", "uring", "go-net", "go-uring"}
    numbers = json.loads((wd / "paper" / "generated" / "numbers.json").read_text())
    # The sources' claims are judged on the sources' setup; U2 and U3 on the
    # sources' own systems (the Go servers), at c = 100 (part 3's cell).
    findings = numbers["findings"]["value"]
    echo_parts = [f for f in findings if f["claim"] in ("U1", "U2", "U3", "U4") and f["value"]]
    assert echo_parts and all(
        f["setup"] == "thread-per-connection client, shared CPUs, as the sources" for f in echo_parts
    )
    assert any(
        f["claim"] == "U3"
        and f["value"]
        and "Go reactor SQPOLL (2 rings)/Go reactor" in f["part"]
        and "c=100 128 B" in f["part"]
        for f in findings
    )
    for key in ("u1_verdict", "u3_verdict", "echo_default_c50_rps", "echo_epoll_c50_rps"):
        assert key in numbers, key
    for name in ("echo_rps", "echo_cpu_per_request", "echo_latency", "echo_batch_size"):
        assert (wd / "paper" / "figures" / f"{name}.svg").exists()


def test_smoke_echo_repetitions_run_each_setups_presets_in_mirrored_orders(smoke_run: tuple[Path, object]) -> None:
    """The rule gives every repetition the run's seed: repetition 2 runs each
    setup's presets in the reverse of repetition 1's order (ABBA over
    repetitions), and each sidecar says which it ran."""
    from iolab import provenance, readers

    wd, _ = smoke_run
    orders = {}
    for rep in (1, 2):
        (raw,) = (wd / "data" / "raw" / "local" / "echo").glob(f"*/rep{rep}.csv")
        side = json.loads(provenance.sidecar_for(raw).read_text())
        orders[rep] = side["echo"]["preset_order"]
        frame = readers.read_echo_csv(raw).sort_values("order")
        orders[rep]["presets"] = {
            key: list(group["preset"])
            for key, group in frame.groupby(["connections", "bytes", "client", "layout", "pipeline"])
        }
    assert orders[1]["run_seed"] == orders[2]["run_seed"]
    assert (orders[1]["reversed"], orders[2]["reversed"]) == (False, True)
    assert orders[1]["presets"].keys() == orders[2]["presets"].keys()
    for key, first in orders[1]["presets"].items():
        assert len(first) > 1 and orders[2]["presets"][key] == first[::-1], key


def test_smoke_mpi_results(smoke_run: tuple[Path, object]) -> None:
    import pandas as pd

    wd, _ = smoke_run
    mpi = pd.read_parquet(wd / "results" / "tables" / "mpi.parquet")
    assert set(mpi["transport"]) == {"shm", "tcp", "netns", "netns_tbf"}
    assert set(mpi["rep"]) == {1, 2} and set(mpi["ranks"]) == {2, 4}
    assert mpi.loc[mpi["ranks"] == 4, "oversubscribed"].all()
    numbers = json.loads((wd / "paper" / "generated" / "numbers.json").read_text())
    for key in (
        "m1_verdict",
        "m2_verdict",
        "mpi_shm_latency_us",
        "mpi_netns_bandwidth_mb_s",
        "mpi_tbf_fitted_mbit",
        "mpi_tcp_probe_over_reference",
        "mpi_algorithm_bcast",
    ):
        assert key in numbers, key
    assert numbers["m1_verdict"]["text"].startswith(
        "not testable here: needs MPI between two bare-metal nodes and between two VMs"
    )
    assert numbers["mpi_algorithm_bcast"]["text"] == "binomial"
    assert "quoted_from" in numbers["m1_latency_ratio"]
    for name in ("mpi_pingpong", "mpi_collectives", "mpi_prediction_error", "mpi_transport_ratio", "mpi_method_ratio"):
        assert (wd / "paper" / "figures" / f"{name}.svg").exists()
    # Both timing methods ran (the smoke overlay's methods): every
    # (transport, p, operation, size) both measured is compared.
    assert set(mpi["bench"]) >= {"osu_latency", "osu_bcast", "pingpong", "bcast"}
    assert numbers["mpi_osu_method_cells"]["value"] > 0
    assert 0 <= numbers["mpi_osu_method_within_10pct"]["value"] <= numbers["mpi_osu_method_cells"]["value"]
    manifest = json.loads((wd / "paper" / "figures" / "manifest.json").read_text())
    raw = manifest["figures"]["mpi_pingpong"]["raw"]
    assert len(raw) == 2 and all(Path(r["raw"]).parts[3] == "mpi" for r in raw)


def test_smoke_numbers_cover_the_cost_model(smoke_run: tuple[Path, object]) -> None:
    wd, _ = smoke_run
    numbers = json.loads((wd / "paper" / "generated" / "numbers.json").read_text())
    for key in (
        "w_send_ns",
        "w_recv_ns",
        "a_send_ns",
        "b_send_ns",
        "a_recv_ns",
        "b_recv_ns",
        "t1_mean_ns",
        "epoll_request_ns",
        "floor_request_ns",
        "preferred_model",
        "c1_verdict",
        "c2_verdict",
        "c3_verdict",
        "trace_status",
        "unavailable_presets",
        "findings",
        "method_estimator",
        "method_rule",
    ):
        assert key in numbers, key
    # The floor (kernel work alone) is below the epoll request cost, which adds 2s.
    assert numbers["floor_request_ns"]["value"] < numbers["epoll_request_ns"]["value"]
    assert "sqpoll" in numbers["unavailable_presets"]["text"]


def test_changed_settings_measure_into_a_new_directory(smoke_copy: Path) -> None:
    wd = smoke_copy
    before = {p: p.read_bytes() for p in (wd / "data" / "raw").rglob("*") if p.is_file()}
    res = snakemake(wd, "-n", "--cores", "all", "--configfile", "config/overlays/smoke.yaml", "--config", "repeats=3")
    assert res.returncode == 0, res.stderr
    # Adding a repetition measures one more file per experiment; existing ones stay.
    jobs = planned_jobs(res.stdout + res.stderr)
    assert {e: jobs.get(f"measure_{e}") for e in smoke_measures()} == dict.fromkeys(smoke_measures(), 1)
    after = {p: p.read_bytes() for p in (wd / "data" / "raw").rglob("*") if p.is_file()}
    assert before == after
    for p in before:
        assert not p.stat().st_mode & 0o222, f"{p} is writable"


def test_jobs_run_on_snakemakes_own_python_when_the_venv_is_not_activated(smoke_copy: Path) -> None:
    """Started as .venv/bin/snakemake with the venv's bin not on PATH (not
    activated), a measurement job's `python -m iolab.measure` still runs on
    the venv's interpreter: one more repetition is measured and tabulated."""
    wd = smoke_copy
    env = tool_env()
    bindir = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if p != bindir)
    res = subprocess.run(
        [
            os.path.join(bindir, "snakemake"),
            "results/tables/syscall.parquet",
            "--cores",
            "all",
            "--configfile",
            "config/overlays/smoke.yaml",
            "--config",
            "repeats=3",
        ],
        cwd=wd,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert res.returncode == 0, (res.stdout + res.stderr)[-3000:]
    reps = {p.name for p in (wd / "data" / "raw" / "local" / "syscall").glob("*/rep*.csv")}
    assert reps == {"rep1.csv", "rep2.csv", "rep3.csv"}
    # The workflow profile's display, as for any run.
    assert "done: measure syscall rep 3 on local" in res.stderr, res.stderr[-3000:]


def test_html_report_has_the_figures_in_categories(smoke_copy: Path) -> None:
    wd = smoke_copy
    res = snakemake(wd, "--report", "report.html", "--configfile", "config/overlays/smoke.yaml")
    assert res.returncode == 0, res.stderr[-3000:]
    html = (wd / "report.html").read_text()
    assert "Cost model" in html
    for name in ("syscall_cost", "sendrecv_cost", "uring_batch_time", "cost_model_per_request"):
        assert f"{name}.png" in html


def _raw_bytes(wd: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in (wd / "data" / "raw").rglob("*") if p.is_file()}


def test_switching_profile_plans_no_measured_file_again(smoke_copy: Path) -> None:
    # The settings go to the measurement as canonical JSON. The default
    # config gives trace the smoke overlay's settings (one key directory),
    # in another key order; with unsorted JSON Snakemake saw "params
    # changed" and planned the measured repetitions again (checked on that
    # version: trace rep1 and rep2 were planned).
    wd = smoke_copy
    have = {p.relative_to(wd).as_posix() for p in (wd / "data" / "raw").rglob("rep*.csv")}
    for extra in (["--configfile", "config/overlays/smoke.yaml"], []):
        res = snakemake(wd, "-n", "--cores", "1", *extra)
        assert res.returncode == 0, res.stderr[-2000:]
        outputs = " ".join(ln for ln in res.stdout.splitlines() if ln.strip().startswith("output:"))
        planned = set(re.findall(r"data/raw/\S+?/rep\d+\.csv", outputs))
        assert not planned & have, sorted(planned & have)[:5]
        assert "Params have changed" not in res.stdout
    # Not vacuous: the default plan adds repetitions beside measured ones.
    assert {Path(p).parent for p in planned} & {Path(p).parent for p in have}


def test_a_repetition_snakemake_asks_to_rerun_is_kept_byte_for_byte(smoke_copy: Path) -> None:
    # Whatever makes Snakemake re-run a measurement job (changed parameter
    # text or rule code; here asked outright), the raw file it has is kept:
    # as root, write protection does not stop a delete, so the rule flags
    # its outputs `update` and the measurement keeps what is measured.
    wd = smoke_copy
    before = _raw_bytes(wd)
    res = snakemake(
        wd,
        "--cores",
        "all",
        "--configfile",
        "config/overlays/smoke.yaml",
        "--forcerun",
        "measure_syscall",
        "measure_sendrecv",
        "--until",
        "tidy_table",
    )
    assert res.returncode == 0, res.stderr[-3000:]
    assert _raw_bytes(wd) == before
    logs = list((wd / "results" / "logs" / "measure").rglob("syscall/*/rep*.log"))
    assert logs and all("is measured already; kept as it is" in log.read_text() for log in logs)


def test_figures_refuses_a_plan_that_would_measure(smoke_copy: Path) -> None:
    # Without the run's --configfile the default config's raw files do not
    # exist: ./repro figures says so in one line and starts nothing.
    wd = smoke_copy
    before = _raw_bytes(wd)
    env = repro_env(wd)
    res = subprocess.run(["./repro", "figures"], cwd=wd, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode != 0
    last = res.stderr.strip().splitlines()[-1]
    assert (
        last.startswith("repro: figures only re-derives from raw data already measured, and with this config")
        and "--configfile" in last
    ), res.stderr[-2000:]
    assert _raw_bytes(wd) == before and not list((wd / "data" / "raw").rglob(".tmp-*"))
    # With the run's own config it re-derives, measuring nothing.
    res = subprocess.run(
        ["./repro", "figures", "--configfile", "config/overlays/smoke.yaml"],
        cwd=wd,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    assert _raw_bytes(wd) == before
