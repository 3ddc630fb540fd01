"""Nodes: where experiments run, and what kind of machine each one is.

Kind detection is a pure function of three observations, so it can be tested
on synthetic inputs: systemd-detect-virt's answers, /proc/cpuinfo, and the DMI
strings under /sys/class/dmi/id. Hardware virtualization outranks a container
layer: a container on a VM is a ``vm`` node, with the container recorded.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from .inventory import NodeEntry

if TYPE_CHECKING:
    from .hostfacts import HostFacts

VM_TECHS = {
    "kvm",
    "qemu",
    "zvm",
    "vmware",
    "microsoft",
    "oracle",
    "powervm",
    "xen",
    "bochs",
    "uml",
    "parallels",
    "bhyve",
    "qnx",
    "acrn",
    "apple",
    "sre",
    "google",
    "amazon",
    "vm-other",
}
CONTAINER_TECHS = {
    "openvz",
    "lxc",
    "lxc-libvirt",
    "systemd-nspawn",
    "docker",
    "podman",
    "rkt",
    "wsl",
    "proot",
    "pouch",
    "container-other",
}
# Substrings of DMI vendor/product strings that mean a virtual machine.
DMI_VM_MARKERS = (
    "qemu",
    "kvm",
    "vmware",
    "virtualbox",
    "innotek",
    "xen",
    "bochs",
    "parallels",
    "bhyve",
    "amazon ec2",
    "google compute engine",
    "openstack",
    "firecracker",
    "virtual machine",
    "cloud hypervisor",
)
DMI_FIELDS = ("sys_vendor", "product_name", "bios_vendor", "board_vendor", "chassis_vendor")


@dataclass(frozen=True)
class KindEvidence:
    kind: str
    reason: str
    container: str | None = None
    hypervisor: str | None = None


def detect_kind(
    detect_virt_vm: str | None,
    detect_virt_container: str | None,
    cpuinfo: str,
    dmi: Mapping[str, str],
) -> KindEvidence:
    """Decide bare-metal / vm / container from raw observations.

    ``detect_virt_vm`` and ``detect_virt_container`` are the outputs of
    ``systemd-detect-virt --vm`` and ``--container`` (``"none"`` when nothing
    was found, ``None`` when the tool is absent).
    """
    vm_tech = (detect_virt_vm or "").strip().lower()
    ct_tech = (detect_virt_container or "").strip().lower()
    container = ct_tech if ct_tech in CONTAINER_TECHS else None

    hv_flag = any(
        line.startswith("flags") and " hypervisor" in f" {line.split(':', 1)[-1]} " for line in cpuinfo.splitlines()
    )
    dmi_hit = next(
        (f"{k}={v.strip()}" for k, v in sorted(dmi.items()) if any(m in v.lower() for m in DMI_VM_MARKERS)),
        None,
    )

    if vm_tech in VM_TECHS:
        return KindEvidence("vm", f"systemd-detect-virt --vm: {vm_tech}", container, vm_tech)
    if dmi_hit:
        return KindEvidence("vm", f"DMI: {dmi_hit}", container, dmi_hit)
    if hv_flag:
        return KindEvidence("vm", "cpuinfo: hypervisor flag set", container, "unknown")
    if container:
        return KindEvidence("container", f"systemd-detect-virt --container: {container}", container)
    if vm_tech == "none" or dmi:
        return KindEvidence("bare-metal", "no hypervisor flag, DMI or detect-virt evidence of virtualization")
    return KindEvidence("bare-metal", "no evidence of virtualization (systemd-detect-virt and DMI unavailable)")


@dataclass(frozen=True)
class Node:
    """One place experiments run, as a measurement sees it: its inventory
    ``entry``, its ``kind`` resolved (never ``auto``), and the host ``facts``
    gathered on it (None before they are)."""

    name: str
    runner: str
    kind: str
    kind_reason: str
    container: str | None = None
    hypervisor: str | None = None
    cpus: Mapping[str, int | str | None] = field(default_factory=dict)
    entry: NodeEntry | None = field(default=None, compare=False, repr=False)
    facts: HostFacts | None = field(default=None, compare=False, repr=False)

    def as_dict(self) -> dict[str, Any]:
        """What the provenance records of the node (its entry and facts
        have their own places there)."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("entry", "facts")}
        out["cpus"] = dict(self.cpus)
        return out


def resolve_node(node: NodeEntry, evidence: KindEvidence, facts: HostFacts | None = None) -> Node:
    """A config ``nodes[]`` entry with its kind detected on the node itself
    (``evidence`` from its host ``facts``, iolab.hostfacts) or overridden in
    the config."""
    kind: str = node.kind
    if kind == "auto":
        kind, reason = evidence.kind, evidence.reason
    else:
        reason = f"set in config (detected: {evidence.kind}, {evidence.reason})"
    return Node(
        name=node.name,
        runner=node.runner,
        kind=kind,
        kind_reason=reason,
        container=evidence.container,
        hypervisor=evidence.hypervisor,
        cpus=node.cpus.model_dump(),
        entry=node,
        facts=facts,
    )
