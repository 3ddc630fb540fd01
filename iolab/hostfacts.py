"""What a node is: the observations provenance and kind detection need,
gathered by one POSIX shell script that runs the same way on this machine
and, over ssh or in a guest, on any other node.

The script prints sections ``=== name`` followed by that section's raw text;
``parse`` turns them into a dict and ``HostFacts`` gives them names.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from .inventory import cpu_list
from .nodes import DMI_FIELDS, KindEvidence, detect_kind

SCRIPT = r"""
section() { echo "=== $1"; }
section hostname; uname -n
section kernel; uname -r
section boot_id; cat /proc/sys/kernel/random/boot_id 2>/dev/null
section kernel_version; uname -v
section machine; uname -m
section cmdline; cat /proc/cmdline 2>/dev/null
section cpuinfo; cat /proc/cpuinfo 2>/dev/null
section nproc; nproc 2>/dev/null || getconf _NPROCESSORS_ONLN
section cpu_online; getconf _NPROCESSORS_ONLN
section cpus_allowed; sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status 2>/dev/null
section detect_virt_vm; if command -v systemd-detect-virt >/dev/null 2>&1; then systemd-detect-virt --vm 2>/dev/null || true; else echo "@absent"; fi
section detect_virt_container; if command -v systemd-detect-virt >/dev/null 2>&1; then systemd-detect-virt --container 2>/dev/null || true; else echo "@absent"; fi
for f in __DMI__; do section "dmi.$f"; cat "/sys/class/dmi/id/$f" 2>/dev/null; done
for f in /sys/devices/system/cpu/vulnerabilities/*; do [ -r "$f" ] && { section "vuln.$(basename "$f")"; cat "$f"; }; done
section cc; cc --version 2>/dev/null | head -n 1
section mpirun; mpirun --version 2>/dev/null | head -n 1
section kvm; [ -e /dev/kvm ] && echo present || echo absent
section meminfo; sed -n 's/^MemTotal:[[:space:]]*//p' /proc/meminfo 2>/dev/null
section stat_cpu; head -n 1 /proc/stat 2>/dev/null
section go; go version 2>/dev/null | head -n 1
section bpftrace; bpftrace --version 2>/dev/null | head -n 1
section nics; for n in /sys/class/net/*; do [ -e "$n" ] || continue; d=$(readlink "$n/device/driver" 2>/dev/null); v=0; [ -e "$n/device/physfn" ] && v=1; echo "${n##*/} ${d##*/} $v"; done
section kvm_modules; cat /proc/modules 2>/dev/null | awk '$1 ~ /^kvm/ {print $1}'
section rdma_ports; for p in /sys/class/infiniband/*/ports/*; do [ -r "$p/link_layer" ] || continue; d=${p%/ports/*}; echo "${d##*/} ${p##*/} $(cat "$p/link_layer") $(cat "$p/state" 2>/dev/null)"; done
true
""".replace("__DMI__", " ".join(DMI_FIELDS))


# The first processor's identity lines of /proc/cpuinfo, by the name the
# paper gives them.
CPU_IDENTITY = {
    "vendor": "vendor_id",
    "family": "cpu family",
    "model": "model",
    "stepping": "stepping",
    "microcode": "microcode",
    "mhz": "cpu MHz",
    "cache": "cache size",
}
SYSTEM_PATH = ("/usr/local/bin", "/usr/bin", "/bin", "/usr/sbin", "/sbin")


def parse(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    name: str | None = None
    lines: list[str] = []
    for line in text.splitlines():
        if line.startswith("=== "):
            if name is not None:
                out[name] = "\n".join(lines).strip()
            name, lines = line[4:].strip(), []
        else:
            lines.append(line)
    if name is not None:
        out[name] = "\n".join(lines).strip()
    return out


@dataclass(frozen=True)
class HostFacts:
    raw: Mapping[str, str] = field(default_factory=dict)

    def get(self, key: str) -> str | None:
        v = self.raw.get(key)
        return v if v else None

    @property
    def detect_virt(self) -> tuple[str | None, str | None]:
        def one(key: str) -> str | None:
            v = self.raw.get(key, "")
            return None if v == "@absent" else (v or "none")

        return one("detect_virt_vm"), one("detect_virt_container")

    @property
    def dmi(self) -> dict[str, str]:
        return {k.split(".", 1)[1]: v for k, v in self.raw.items() if k.startswith("dmi.") and v}

    @property
    def vulnerabilities(self) -> dict[str, str]:
        return {k.split(".", 1)[1]: v for k, v in self.raw.items() if k.startswith("vuln.")}

    @property
    def cpu_model(self) -> str | None:
        for line in self.raw.get("cpuinfo", "").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
        return None

    @property
    def cpu_identity(self) -> dict[str, str]:
        """The first processor's vendor, family, model, stepping, microcode,
        MHz and cache size, as /proc/cpuinfo gives them (those it gives)."""
        first = self.raw.get("cpuinfo", "").split("\n\n")[0]
        fields = {k.strip(): v.strip() for k, _, v in (ln.partition(":") for ln in first.splitlines()) if v}
        return {name: fields[key] for name, key in CPU_IDENTITY.items() if fields.get(key)}

    @property
    def memory_kb(self) -> int | None:
        """MemTotal, in kB."""
        head = self.raw.get("meminfo", "").split()
        return int(head[0]) if head and head[0].isdigit() else None

    @property
    def cpu_jiffies(self) -> tuple[int, int] | None:
        """(steal, total) CPU time since boot, in jiffies, summed over CPUs
        (/proc/stat's first line); None where it was not read."""
        parts = self.raw.get("stat_cpu", "").split()
        if len(parts) < 9 or parts[0] != "cpu" or not all(p.isdigit() for p in parts[1:]):
            return None
        values = [int(p) for p in parts[1:]]
        # guest and guest_nice (fields 9 and 10) are already in user and nice.
        return values[7], sum(values[:8])

    @property
    def cpu_count(self) -> int | None:
        """The CPUs a process started there may use (nproc: its affinity,
        e.g. a SLURM job's share)."""
        return self._int("nproc")

    @property
    def online_cpus(self) -> int | None:
        """The node's online CPUs."""
        return self._int("cpu_online")

    @property
    def allowed_cpus(self) -> list[int] | None:
        """Which CPUs a process started there may use."""
        listed = self.raw.get("cpus_allowed", "")
        return cpu_list(listed) if listed else None

    def _int(self, key: str) -> int | None:
        try:
            return int(self.raw.get(key, ""))
        except ValueError:
            return None

    @property
    def nics(self) -> dict[str, dict[str, str | bool]]:
        """Network interfaces: name -> {"driver", "vf" (an SR-IOV virtual
        function: the device has a physfn), "kind" (``nic_kind``)}."""
        out: dict[str, dict[str, str | bool]] = {}
        for line in self.raw.get("nics", "").splitlines():
            name, _, rest = line.partition(" ")
            driver, _, vf = rest.rpartition(" ")
            if name:
                out[name] = {"driver": driver, "vf": vf == "1", "kind": nic_kind(name, driver, vf == "1")}
        return out

    @property
    def nic_summary(self) -> str:
        """The kinds of this node's network interfaces besides loopback and
        software bridges ("" where none was read)."""
        kinds = sorted({str(v["kind"]) for v in self.nics.values()} - {"loopback", "software"})
        return ", ".join(kinds)

    @property
    def rdma_ports(self) -> list[dict[str, str]]:
        """The RDMA ports the node's kernel shows (/sys/class/infiniband):
        device, port, link layer ("InfiniBand", "Ethernet" for RoCE) and
        state ("4: ACTIVE")."""
        out = []
        for line in self.raw.get("rdma_ports", "").splitlines():
            parts = line.split(" ", 3)
            if len(parts) >= 3:
                out.append(
                    {
                        "device": parts[0],
                        "port": parts[1],
                        "link_layer": parts[2],
                        "state": parts[3] if len(parts) > 3 else "",
                    }
                )
        return out

    @property
    def infiniband_active(self) -> bool:
        """Whether a port with an InfiniBand link layer is up here."""
        return any(p["link_layer"] == "InfiniBand" and "ACTIVE" in p["state"] for p in self.rdma_ports)

    def kind(self) -> KindEvidence:
        vm, ct = self.detect_virt
        return detect_kind(vm, ct, self.raw.get("cpuinfo", ""), self.dmi)


# NIC drivers by what they are to a guest: a paravirtual device, an emulated
# one, or (with a physfn) an SR-IOV virtual function of a physical NIC.
PARAVIRTUAL_DRIVERS = ("virtio_net", "vmxnet3", "netvsc", "xen-netfront", "ena", "gve")
EMULATED_DRIVERS = ("e1000", "e1000e", "rtl8139", "8139cp", "ne2k-pci", "pcnet32", "tulip")


def nic_kind(name: str, driver: str, vf: bool) -> str:
    """One network interface's kind: "sr-iov vf", "paravirtual", "emulated",
    "physical", "loopback" or "software" (veth, bridges, tunnels: no device)."""
    if name == "lo":
        return "loopback"
    if vf or driver.endswith("vf") or driver in ("mlx5_core_vf", "ixgbevf", "iavf", "i40evf"):
        return "sr-iov vf"
    if not driver:
        return "software"
    if driver in PARAVIRTUAL_DRIVERS:
        return "paravirtual"
    if driver in EMULATED_DRIVERS:
        return "emulated"
    return "physical"


def gather(run_shell: Callable[[str], subprocess.CompletedProcess[str]] | None = None) -> HostFacts:
    """Run the script through ``run_shell`` (a node's shell; default: here)."""
    if run_shell is None:
        # The script needs only POSIX tools: it finds them in the system
        # directories even where the caller's PATH leaves those out.
        path = ":".join([os.environ.get("PATH", ""), *SYSTEM_PATH])
        try:
            res = subprocess.run(
                ["/bin/sh", "-c", SCRIPT],
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
                env={**os.environ, "PATH": path},
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            raise RuntimeError(f"could not gather host facts: {e}") from e
    else:
        res = run_shell(SCRIPT)
    if res.returncode != 0:
        last = (res.stderr.strip().splitlines() or [f"status {res.returncode}"])[-1]
        raise RuntimeError(f"could not gather host facts: {last}")
    return HostFacts(parse(res.stdout))
