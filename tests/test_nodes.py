"""Node kind detection on synthetic observations."""

from __future__ import annotations

import pytest

from iolab.nodes import detect_kind, observe_local, resolve_node

BARE_CPUINFO = "processor\t: 0\nflags\t\t: fpu vme de pse tsc msr sse sse2 avx2\n"
VM_CPUINFO = "processor\t: 0\nflags\t\t: fpu vme de pse tsc hypervisor avx2\n"


@pytest.mark.parametrize(
    "vm,ct,cpuinfo,dmi,kind,container",
    [
        # Real bare metal: detect-virt says none, DMI names a hardware vendor.
        ("none", "none", BARE_CPUINFO, {"sys_vendor": "Dell Inc.", "product_name": "PowerEdge R650"},
         "bare-metal", None),
        # KVM guest seen by systemd-detect-virt.
        ("kvm", "none", VM_CPUINFO, {"sys_vendor": "QEMU"}, "vm", None),
        # No systemd-detect-virt, but DMI says VMware.
        (None, None, BARE_CPUINFO, {"sys_vendor": "VMware, Inc.", "product_name": "VMware7,1"},
         "vm", None),
        # Only the hypervisor CPU flag (e.g. Firecracker: no DMI at all).
        (None, None, VM_CPUINFO, {}, "vm", None),
        # Docker on bare metal.
        ("none", "docker", BARE_CPUINFO, {"sys_vendor": "Supermicro"}, "container", "docker"),
        # Docker inside a KVM guest: the hardware is virtual, the container is recorded.
        ("kvm", "docker", VM_CPUINFO, {}, "vm", "docker"),
        # Hyper-V guest via DMI product name.
        ("none", "none", BARE_CPUINFO, {"product_name": "Virtual Machine",
                                        "sys_vendor": "Microsoft Corporation"}, "vm", None),
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
    node = resolve_node({"name": "n", "runner": "local", "kind": "bare-metal"})
    detected = detect_kind(*observe_local())
    assert node.kind == "bare-metal"
    assert detected.kind in node.kind_reason


def test_auto_uses_detection() -> None:
    node = resolve_node({"name": "n", "runner": "local", "kind": "auto"})
    assert node.kind == detect_kind(*observe_local()).kind
