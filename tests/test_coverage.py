"""`./repro coverage`: line coverage of iolab/ and of the C programs."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from conftest import REPO
from coverage_c import executed_lines, summary
from test_interrupt import repro_env

from iolab.paths import module_closure

BRANCHY = """#include <stdio.h>

int main(int argc, char **argv)
{
\t(void)argv;
\tif (argc > 1) {
\t\tputs("with an argument");
\t\treturn 1;
\t}
\tputs("without");
\treturn 0;
}
"""


def test_c_lines_count_as_covered_when_any_program_ran_them(tmp_path: Path) -> None:
    (tmp_path / "branchy.c").write_text(BRANCHY)
    build = tmp_path / "build"
    build.mkdir()
    for program in ("plain", "with-arg", "never-run"):
        subprocess.run(["cc", "--coverage", "-o", f"build/{program}", "branchy.c"], cwd=tmp_path, check=True)
    subprocess.run([str(build / "plain")], check=True, capture_output=True)

    lines = executed_lines(build)
    one = summary(lines)["branchy.c"]
    # Every line but the argument branch's two ran.
    assert one["lines"] - one["covered"] == 2 and one["lines"] >= 6
    instrumented, executed = lines["branchy.c"]
    assert instrumented - executed == {7, 8}

    subprocess.run([str(build / "with-arg"), "x"], check=False, capture_output=True)
    both = summary(executed_lines(build))
    assert both["branchy.c"]["covered"] == both["branchy.c"]["lines"] == one["lines"]
    assert both["TOTAL"] == {"lines": one["lines"], "covered": one["lines"], "percent": 100.0}


def test_c_coverage_without_a_coverage_build_is_a_one_line_error(tmp_path: Path) -> None:
    res = subprocess.run(
        ["python", str(REPO / "tests" / "coverage_c.py"), str(tmp_path)], capture_output=True, text=True
    )
    assert res.returncode == 1
    assert res.stderr.strip().splitlines() == [
        f"coverage_c: no .gcno files under {tmp_path}; build with `make EXTRA_CFLAGS=--coverage` "
        "and run the programs first"
    ]


def test_repro_coverage_measures_iolab_and_the_servers_and_puts_the_build_back(workflow: Path) -> None:
    # The checkout's usual build, which the instrumented one replaces for the run.
    subprocess.run(["make", "-s", "-C", "native", "build/echo-epoll"], cwd=workflow, check=True, capture_output=True)
    usual = workflow / "native" / "build" / "echo-epoll"
    stamp = usual.stat().st_mtime_ns
    env = repro_env(workflow)
    # One test with a real io_uring server and the load generator (a sweep
    # cell, in-process iolab), one that runs Snakemake (iolab in a
    # subprocess). Not the IPI
    # test: its bound depends on the machine, and under the instrumented
    # build it failed here twice in fresh clones.
    res = subprocess.run(
        [
            "./repro",
            "coverage",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/test_echo_sweep.py::test_a_sweep_cell_runs_under_the_uring_client",
            "tests/test_config.py::test_example_inventory_is_valid_and_plans_mpi_across_nodes",
        ],
        cwd=workflow,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]

    iolab_cov = json.loads((workflow / "results" / "coverage" / "iolab.json").read_text())["files"]
    assert all(f.startswith("iolab/") for f in iolab_cov), sorted(iolab_cov)  # copies mapped back
    # The test process itself ran the echo cell.
    assert iolab_cov["iolab/experiments/echo/cell.py"]["summary"]["covered_lines"] > 50
    # Only Snakemake, in a subprocess started from a copy of the workflow,
    # calls module_closure: its body counts too.
    code = module_closure.__code__
    body = {line for _, _, line in code.co_lines() if line and line > code.co_firstlineno}
    assert body & set(iolab_cov["iolab/paths.py"]["executed_lines"])

    c_cov = json.loads((workflow / "results" / "coverage" / "c.json").read_text())
    for source in ("echo/echo_uring.c", "echo/uring_conn.c", "echo/loadgen.c"):
        assert 0 < c_cov[source]["covered"] < c_cov[source]["lines"]
    assert c_cov["echo/echo_epoll.c"]["covered"] == 0  # no test here started it
    assert "TOTAL" in res.stdout

    assert usual.stat().st_mtime_ns == stamp, "the usual build was not put back unchanged"
    assert not list((workflow / "native" / "build").rglob("*.gcno"))
    assert not (workflow / "native" / "build.before-coverage").exists()


def test_repro_coverage_refuses_to_run_over_a_killed_runs_build(workflow: Path) -> None:
    (workflow / "native" / "build.before-coverage").mkdir(parents=True)
    res = subprocess.run(
        ["./repro", "coverage"], cwd=workflow, env=repro_env(workflow), capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 1
    assert res.stderr.strip().splitlines() == [
        "repro: native/build.before-coverage exists: a coverage run was killed; put it back with: "
        "rm -rf native/build && mv native/build.before-coverage native/build"
    ]
    assert os.listdir(workflow / "native" / "build.before-coverage") == []
