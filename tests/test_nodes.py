"""Node kind detection on synthetic observations."""

from __future__ import annotations

import os

import pytest

from iolab import hostfacts, provenance
from iolab.inventory import NodeEntry
from iolab.nodes import detect_kind, resolve_node
from iolab.rooms import context

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


def test_the_facts_identify_the_cpu_memory_tools_and_the_time_stolen() -> None:
    # What the paper's machine line needs beyond a model name (issue 67):
    # vendor, family, model, stepping, microcode, clock, cache; memory; the
    # tools; and, between two readings, the share of CPU time stolen.
    facts = hostfacts.gather()
    with open("/proc/cpuinfo") as f:
        first = f.read().split("\n\n")[0]
    fields = {k.strip(): v.strip() for k, _, v in (ln.partition(":") for ln in first.splitlines())}
    identity = facts.cpu_identity
    assert identity.get("vendor") == fields.get("vendor_id") and identity.get("family") == fields.get("cpu family")
    assert identity.get("microcode") == fields.get("microcode") and identity.get("stepping") == fields.get("stepping")
    with open("/proc/meminfo") as f:
        assert facts.memory_kb == int(next(ln for ln in f if ln.startswith("MemTotal")).split()[1])
    steal, total = facts.cpu_jiffies or (None, None)
    assert steal is not None and total is not None and 0 <= steal <= total
    later = hostfacts.HostFacts({**facts.raw, "stat_cpu": "cpu  200 0 100 700 0 0 0 100 0 0"})
    earlier = hostfacts.HostFacts({**facts.raw, "stat_cpu": "cpu  100 0 50 300 0 0 0 50 0 0"})
    assert provenance.steal_share(earlier, later) == pytest.approx(50 / 600, abs=1e-6)
    assert provenance.steal_share(later, earlier) is None and provenance.steal_share(earlier, None) is None
    assert (
        context.cpu_identity(
            {
                "vendor": "GenuineIntel",
                "family": "6",
                "model": "167",
                "stepping": "1",
                "microcode": "0x1",
                "mhz": "2599.998",
            }
        )
        == "GenuineIntel family 6 model 167 stepping 1, microcode 0x1, 2600 MHz"
    )


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
