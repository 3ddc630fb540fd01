"""The cluster study (`snakemake study`, ./repro study): each node of the
inventory one occasion, the claims' verdicts pooled over the nodes. End to
end, over this machine and an OpenSSH node in a network namespace of its
own (own address and hostname, the same kernel), which the test starts and
stops: the study pools both nodes and, because they share one kernel,
decides nothing."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from conftest import copy_workflow, module_cli, snakemake, write_sshd_files

from iolab.archive import study
from iolab.claims import kind_verdicts as pooled
from iolab.experiments.mpi.netns import NetnsCluster, _ip
from iolab.inventory import NodeEntry
from iolab.runners import RunError, SshRunner

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"
needs_services = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("ip") is None or not os.path.exists(SSHD),
    reason="needs root, iproute2 and openssh-server",
)
PROBES = ["syscall", "sendrecv", "uring_batch"]


def _node(name: str, boot_id: str, hostname: str = "h") -> study.NodeRun:
    return study.NodeRun(name, "2026-12-02T10:00:00", hostname, boot_id, "cpu", 3)


def test_nodes_are_independent_only_on_separate_kernels() -> None:
    two = {"a": _node("a", "boot-1", "ha"), "b": _node("b", "boot-2", "hb")}
    assert study.independence(two, ["a", "b"]) == (True, [])
    # Namespaces of one VM: their own hostnames, one kernel.
    netns = {"a": _node("a", "boot-1", "ha"), "b": _node("b", "boot-1", "hb")}
    assert study.independence(netns, ["a", "b"]) == (False, [["a", "b"]])
    # Sidecars from before the boot id: one hostname is one machine.
    old = {"a": _node("a", "", "h"), "b": _node("b", "", "h"), "c": _node("c", "", "other")}
    assert study.independence(old, ["a", "b", "c"]) == (False, [["a", "b"]])
    # One node, or a node whose sidecars are missing, is no study.
    assert study.independence(two, ["a"]) == (False, [])
    assert study.independence(two, ["a", "b", "c"])[0] is False


def test_machine_identity_negative_control() -> None:
    # Identity by hostname alone would count namespaces as machines: the
    # boot id is what the study must compare.
    netns = {"a": _node("a", "boot-1", "ha"), "b": _node("b", "boot-1", "hb")}
    by_hostname = {n: r.hostname for n, r in netns.items()}
    assert len(set(by_hostname.values())) == 2
    assert study.shared_machines(netns) == [["a", "b"]]


def test_nodes_of_one_boot_plan_as_one_launch() -> None:
    """The planner takes a part's spread from its launches only once 4 hold
    it: four nodes of which three share a boot (namespaces of one VM) are
    two launches, so the shipped estimate plans. Negative control: four
    separate machines are four launches, and their own spread plans."""
    from iolab.claims.verdicts import Rule
    from iolab.planning import launches as planning

    def part(identity: dict[str, study.NodeRun]) -> pooled.PooledPart:
        values = [
            pooled.RunValue(f"node:{n}", "", 1.1 * math.exp(x), 1, identity[n].machine)
            for n, x in zip("abcd", (-0.3, -0.1, 0.1, 0.3), strict=True)
        ]
        return pooled.PooledPart("Z", "p", Rule("above", 1.0), values=values, group="claims:echo:ratio")

    shared_boot = {n: _node(n, "boot-1" if n != "d" else "boot-2", f"h{n}") for n in "abcd"}
    shared = planning.plan_claim("Z", [part(shared_boot)], lambda p: 0.01)
    assert part(shared_boot).k == 2
    assert shared.parts[0].sigma_from == "estimate" and shared.parts[0].sigma == 0.01
    apart = {n: _node(n, f"boot-{n}", f"h{n}") for n in "abcd"}
    assert planning.plan_claim("Z", [part(apart)], lambda p: 0.01).parts[0].sigma_from == "launches"


def test_a_study_without_the_cost_probes_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert study.main(["--tables", str(tmp_path), "--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("study: the study needs the cost probes' tables"), err
    assert not (tmp_path / "out").exists()


@pytest.fixture()
def netns_node(tmp_path: Path):
    d = tmp_path / "sshd"
    d.mkdir()
    write_sshd_files(d, "Port 22\nPidFile none\n")
    # A cluster is two hosts at least; the study uses the first.
    with NetnsCluster(2) as cluster:
        assert cluster.subnet is not None
        gateway = str(list(cluster.subnet.hosts())[-1])
        _ip("addr", "add", f"{gateway}/{cluster.subnet.prefixlen}", "dev", cluster.bridge)
        sshd = subprocess.Popen(
            cluster.wrap([SSHD, "-D", "-e", "-f", str(d / "sshd_config")], host=0),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            pub = (d / "host_key.pub").read_text().split()
            (d / "known_hosts").write_text(f"{cluster.addresses[0]} {pub[0]} {pub[1]}\n")
            cpu = cluster.host_cpu(0)
            node = {
                "name": "nsa",
                "runner": "ssh",
                "user": "root",
                "host": cluster.addresses[0],
                "identity_file": str(d / "user_key"),
                "known_hosts": str(d / "known_hosts"),
                "connect_timeout": 5,
                # The namespace's sshd runs on one CPU: everything there does.
                "cpus": {"probe": cpu, "server": cpu, "client": cpu},
                "experiments": PROBES,
            }
            deadline = time.monotonic() + 20
            while True:
                try:
                    SshRunner(NodeEntry.of(node)).check_reachable()
                    break
                except RunError:
                    if time.monotonic() > deadline or sshd.poll() is not None:
                        raise
                    time.sleep(0.2)
            yield node, cluster.names[0]
        finally:
            sshd.terminate()
            sshd.wait(timeout=10)


@needs_services
def test_a_study_over_a_local_and_a_netns_node_pools_both_and_decides_nothing(
    netns_node: tuple[dict, str], tmp_path: Path
) -> None:
    node, ns_hostname = netns_node
    wd = copy_workflow(tmp_path / "iolab")
    inventory = {
        "nodes": [
            {"name": "here", "runner": "local", "cpus": {"probe": 1, "server": 0, "client": 1}, "experiments": PROBES},
            node,
        ]
    }
    # A JSON round trip writes each node's list out in full: our configs refuse YAML aliases.
    (wd / "config" / "study-nodes.yaml").write_text(yaml.safe_dump(json.loads(json.dumps(inventory))))
    res = snakemake(
        wd, "study", "--cores", "all", "--configfile", "config/overlays/smoke.yaml", "config/study-nodes.yaml"
    )
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    # Both nodes measured through the workflow, into raw files of their own.
    for name in ("here", "nsa"):
        assert list((wd / "data" / "raw" / name / "syscall").glob("*/rep1.csv")), name
    doc = json.loads((wd / "results" / "study" / "verdicts.json").read_text())
    nodes = {n["node"]: n for n in doc["nodes"]}
    assert set(nodes) == {"here", "nsa"}
    # The namespace has its own hostname, yet one kernel: not independent.
    assert nodes["nsa"]["hostname"] == ns_hostname != nodes["here"]["hostname"]
    assert (
        nodes["nsa"]["boot_id"]
        == nodes["here"]["boot_id"]
        == Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    )
    assert doc["independent"] is False and doc["shared_machines"] == [["here", "nsa"]]
    assert doc["decided"] == 0
    assert {v["outcome"] for v in doc["claims"].values()} == {study.NOT_INDEPENDENT}
    # Each node is one run of the pooled verdict: C1's ratio parts hold two.
    c1 = doc["claims"]["C1"]
    counted = [p for p in c1["parts"] if p["rule"] and not p["context"]]
    assert counted and all(p["runs"] == 2 for p in counted), counted
    page = (wd / "results" / "study" / "index.html").read_text()
    assert "not independent occasions" in page and "nsa" in page
    assert (wd / "results" / "study" / "assets" / "style.css").exists()
    report = (wd / "results" / "study" / "verdicts.md").read_text()
    assert "study: 0 claim(s) decided over 2 node(s)" in report
    # A planned test is judged on exactly its nodes: a third planned node
    # that measured nothing stops it, in one line, and the study stays.
    again = module_cli("iolab.archive.study", wd, "--planned", "here,nsa,gone", "--out", str(tmp_path / "again"))
    assert again.returncode == 1 and again.stderr.count("\n") == 1, again.stderr
    assert again.stderr.startswith("study: the study planned node(s) gone, here, nsa and the tables hold"), again.stderr
    assert not (tmp_path / "again").exists()
