"""Node kind detection on synthetic observations."""

from __future__ import annotations

import os

import pytest

from iolab import hostfacts
from iolab.inventory import NodeEntry
from iolab.nodes import detect_kind, resolve_node

BARE_CPUINFO = "processor\t: 0\nflags\t\t: fpu vme de pse tsc msr sse sse2 avx2\n"
VM_CPUINFO = "processor\t: 0\nflags\t\t: fpu vme de pse tsc hypervisor avx2\n"


@pytest.mark.parametrize(
    "vm,ct,cpuinfo,dmi,kind,container",
    [
        # Real bare metal: detect-virt says none, DMI names a hardware vendor.
        (
            "none",
            "none",
            BARE_CPUINFO,
            {"sys_vendor": "Dell Inc.", "product_name": "PowerEdge R650"},
            "bare-metal",
            None,
        ),
        # KVM guest seen by systemd-detect-virt.
        ("kvm", "none", VM_CPUINFO, {"sys_vendor": "QEMU"}, "vm", None),
        # No systemd-detect-virt, but DMI says VMware.
        (None, None, BARE_CPUINFO, {"sys_vendor": "VMware, Inc.", "product_name": "VMware7,1"}, "vm", None),
        # Only the hypervisor CPU flag (e.g. Firecracker: no DMI at all).
        (None, None, VM_CPUINFO, {}, "vm", None),
        # Docker on bare metal.
        ("none", "docker", BARE_CPUINFO, {"sys_vendor": "Supermicro"}, "container", "docker"),
        # Docker inside a KVM guest: the hardware is virtual, the container is recorded.
        ("kvm", "docker", VM_CPUINFO, {}, "vm", "docker"),
        # Hyper-V guest via DMI product name.
        (
            "none",
            "none",
            BARE_CPUINFO,
            {"product_name": "Virtual Machine", "sys_vendor": "Microsoft Corporation"},
            "vm",
            None,
        ),
        # No evidence either way and no tools: bare metal, with the reason saying so.
        (None, None, BARE_CPUINFO, {}, "bare-metal", None),
    ],
)
def test_detect_kind(vm, ct, cpuinfo, dmi, kind, container) -> None:
    ev = detect_kind(vm, ct, cpuinfo, dmi)
    assert ev.kind == kind
    assert ev.container == container
    assert ev.reason


def test_hypervisor_word_elsewhere_is_not_the_flag() -> None:
    cpuinfo = "model name\t: hypervisor-free CPU\nflags\t\t: fpu sse\n"
    assert detect_kind(None, None, cpuinfo, {}).kind == "bare-metal"


def test_config_override_keeps_the_detected_kind_in_the_reason() -> None:
    detected = hostfacts.gather().kind()
    node = resolve_node(NodeEntry.of({"name": "n", "runner": "local", "kind": "bare-metal"}), detected)
    assert node.kind == "bare-metal"
    assert detected.kind in node.kind_reason


def test_auto_uses_detection() -> None:
    detected = hostfacts.gather().kind()
    node = resolve_node(NodeEntry.of({"name": "n", "runner": "local", "kind": "auto"}), detected)
    assert (node.kind, node.kind_reason) == (detected.kind, detected.reason)


def test_the_facts_script_sees_this_machine_as_python_does() -> None:
    # Provenance takes every node's CPUs from the script, this machine's too.
    facts = hostfacts.gather()
    assert facts.online_cpus == os.cpu_count()
    assert facts.allowed_cpus == sorted(os.sched_getaffinity(0))
    assert facts.cpu_count == len(os.sched_getaffinity(0))
    assert facts.get("kernel") == os.uname().release and facts.get("hostname") == os.uname().nodename
    with open("/proc/cpuinfo") as f:
        models = [ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")]
    assert facts.cpu_model == (models[0] if models else None)


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs to leave one out")
def test_the_facts_tell_the_online_cpus_from_the_allowed_ones() -> None:
    # A SLURM job (or taskset) narrows what a process may use, not what
    # the node has: provenance records both.
    before = os.sched_getaffinity(0)
    first = min(before)
    try:
        os.sched_setaffinity(0, {first})
        facts = hostfacts.gather()
    finally:
        os.sched_setaffinity(0, before)
    assert (facts.allowed_cpus, facts.cpu_count) == ([first], 1)
    assert facts.online_cpus == os.cpu_count()
