"""The vm runner: hardware-KVM detection, and a real QEMU TCG boot of the
pinned Debian kernel that runs a probe inside the guest."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import REPO, copy_workflow, snakemake

from iolab import readers, runners, tables
from iolab.inventory import NodeEntry
from iolab.runners import qemu as vm

CPU_NO_VMX = "processor\t: 0\nflags\t\t: fpu vme sse2 hypervisor avx2\n"
CPU_VMX = "processor\t: 0\nflags\t\t: fpu vme sse2 vmx avx2\n"
can_boot = pytest.mark.skipif(
    shutil.which(vm.QEMU) is None or vm.guest_kernel() is None or shutil.which("busybox") is None,
    reason="qemu-system-x86, linux-image-amd64 or busybox-static missing",
)


def test_kvm_detection_on_synthetic_inputs() -> None:
    ok, why = vm.kvm_status(CPU_NO_VMX, "", dev_kvm=True)
    assert not ok and why == (
        "no hardware virtualization: the CPU has neither vmx nor svm "
        "(this /dev/kvm is not backed by hardware virtualization)"
    )
    ok, why = vm.kvm_status(CPU_VMX, "kvm_intel 401408 0 - Live 0x0\nkvm 1138688 1 kvm_intel\n", dev_kvm=True)
    assert ok and why == "hardware KVM: vmx, kvm_intel"
    assert vm.kvm_status(CPU_VMX, "kvm 1 0\n", dev_kvm=True) == (
        False,
        "the CPU has vmx but neither kvm_intel nor kvm_amd is loaded",
    )
    assert vm.kvm_status(CPU_VMX, "kvm_intel 1 0\n", dev_kvm=False)[1].endswith(
        "/dev/kvm is missing (load kvm_intel or kvm_amd)"
    )


def test_this_machines_dev_kvm_is_refused_with_the_reason() -> None:
    cpuinfo = Path("/proc/cpuinfo").read_text()
    if " vmx" in cpuinfo or " svm" in cpuinfo:
        pytest.skip("this machine has hardware virtualization")
    reason = vm.skip_reason(NodeEntry.of({"name": "g", "runner": "vm", "vm": {"accel": "kvm"}}))
    assert reason is not None and "neither vmx nor svm" in reason
    assert runners.skip_reason(NodeEntry.of({"name": "g", "runner": "vm", "vm": {"accel": "kvm"}})) == reason
    assert runners.skip_reason(NodeEntry.of({"name": "l", "runner": "local"})) is None


@can_boot
def test_tcg_guest_runs_a_probe_and_returns_its_output(tmp_path: Path) -> None:
    subprocess.run(["make", "-s", "-C", str(REPO / "native"), "build/cost-probe"], check=True)
    res = vm.run_in_guest(
        [str(REPO / "native" / "build" / "cost-probe")],
        ["/iolab/cost-probe", "syscall", "--batches", "20", "--warmup-batches", "2"],
        accel="tcg",
        cmdline="mitigations=off",
        memory_mb=512,
        cpus=1,
        timeout=300,
    )
    assert res.status == 0, res.stderr
    assert "mitigations=off" in res.cmdline
    out = tmp_path / "guest.csv"
    out.write_text(res.stdout)
    frame = readers.read_raw_csv(out)
    assert len(frame) >= 20 and (frame["ns"] > 0).all()
    # A failing command in the guest reports its status and message.
    bad = vm.run_in_guest(
        [str(REPO / "native" / "build" / "cost-probe")],
        ["/iolab/cost-probe", "syscall", "--batches", "nope"],
        accel="tcg",
        memory_mb=512,
        cpus=1,
        timeout=300,
    )
    assert bad.status == 2 and "--batches" in bad.stderr


@can_boot
def test_tcg_measurement_is_labelled_and_kept_out_of_performance_tables(tmp_path: Path) -> None:
    subprocess.run(["make", "-s", "-C", str(REPO / "native"), "build/cost-probe"], check=True)
    node = {
        "name": "guest",
        "runner": "vm",
        "kind": "auto",
        "vm": {"accel": "tcg", "cmdline": "mitigations=off", "memory_mb": 512, "cpus": 1},
    }
    settings = {"batches": 20, "warmup_batches": 2, "batch_us": 50, "variants": ["getppid"]}
    out = tmp_path / "guest" / "syscall" / "k" / "rep1.csv"
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "iolab.measure",
            "syscall",
            "--node",
            json.dumps(node),
            "--settings",
            json.dumps(settings),
            "--rep",
            "1",
            "--seed",
            "1",
            "--output",
            str(out),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stderr
    side = json.loads(out.with_name("rep1.provenance.json").read_text())
    assert side["accel"] == "tcg" and side["vm"]["performance"] is False
    assert side["node"]["kind"] == "vm"  # detected inside the guest
    assert side["mitigations"]["state"] == "off"  # the guest's own command line
    assert side["host"]["kernel"].startswith("6.1.")  # the pinned Debian kernel, not the host's
    everything = tables.load("syscall", tmp_path, include_emulated=True)
    assert set(everything["accel"]) == {"tcg"} and len(everything) > 0
    assert tables.load("syscall", tmp_path).empty


def test_pipeline_skips_a_kvm_node_without_hardware_virtualization(tmp_path: Path) -> None:
    if vm.kvm_status()[0]:
        pytest.skip("this machine has hardware KVM")
    wd = copy_workflow(tmp_path / "iolab")
    nodes = {"nodes": [{"name": "local", "runner": "local"}, {"name": "guest", "runner": "vm", "vm": {"accel": "kvm"}}]}
    (wd / "config" / "test-nodes.yaml").write_text(yaml.safe_dump(nodes))
    res = snakemake(wd, "results/nodes.json", "--cores", "1", "--configfile", "config/test-nodes.yaml")
    assert res.returncode == 0, res.stderr[-3000:]
    assert "iolab: skipping node guest: no hardware virtualization" in res.stderr
    status = json.loads((wd / "results" / "nodes.json").read_text())
    assert status["guest"]["status"] == "skipped" and "neither vmx nor svm" in status["guest"]["reason"]
    assert status["local"]["status"] == "measured"
    plan = snakemake(wd, "-n", "--cores", "1", "--configfile", "config/test-nodes.yaml")
    assert plan.returncode == 0 and "data/raw/guest" not in plan.stdout
