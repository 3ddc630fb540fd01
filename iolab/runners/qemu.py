"""The vm runner: the same probes inside a QEMU guest.

A guest boots a pinned Debian kernel (``linux-image-amd64``'s
``/boot/vmlinuz-*``, or the node's ``vm.kernel``) with a small initramfs
that holds busybox, the probe, and the shared libraries it links; its init
runs one command, prints the output between markers on the serial console,
and powers off. The guest's kernel command line is configurable
(``vm.cmdline``, e.g. ``mitigations=off``), which tests claims C1/C2 on one
host.

Performance numbers need hardware KVM (vmx or svm in the CPU and the
kvm_intel or kvm_amd module). Without it a ``kvm`` node is skipped with the
reason, and the rest of the run continues. ``accel: tcg`` (emulation) exists
for functional tests only: its results are labelled accel=tcg and kept out
of every performance figure.
"""

from __future__ import annotations

import glob
import gzip
import io
import os
import re
import shutil
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .. import live
from ..inventory import NodeEntry

BEGIN, END, STATUS = "@@iolab-begin@@", "@@iolab-end@@", "@@iolab-status="
QEMU = "qemu-system-x86_64"


class VmError(RuntimeError):
    """The guest could not run the command; one line says why."""


def kvm_status(cpuinfo: str | None = None, modules: str | None = None, dev_kvm: bool | None = None) -> tuple[bool, str]:
    """Whether hardware KVM is usable, and why not. Arguments default to this
    machine's /proc/cpuinfo, /proc/modules and /dev/kvm (tests pass synthetic ones)."""
    if cpuinfo is None:
        cpuinfo = Path("/proc/cpuinfo").read_text(errors="replace")
    if modules is None:
        try:
            modules = Path("/proc/modules").read_text()
        except OSError:
            modules = ""
    if dev_kvm is None:
        dev_kvm = os.path.exists("/dev/kvm")
    flags: set[str] = set()
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            flags |= set(line.split(":", 1)[-1].split())
    hw = sorted(flags & {"vmx", "svm"})
    loaded = sorted(
        {m.split()[0] for m in modules.splitlines() if m.split() and m.split()[0] in ("kvm_intel", "kvm_amd")}
    )
    if not hw:
        extra = " (this /dev/kvm is not backed by hardware virtualization)" if dev_kvm else ""
        return False, f"no hardware virtualization: the CPU has neither vmx nor svm{extra}"
    if not dev_kvm:
        return False, f"the CPU has {hw[0]} but /dev/kvm is missing (load kvm_intel or kvm_amd)"
    if not loaded:
        return False, f"the CPU has {hw[0]} but neither kvm_intel nor kvm_amd is loaded"
    return True, f"hardware KVM: {hw[0]}, {loaded[0]}"


def skip_reason(node: NodeEntry) -> str | None:
    """Why a vm node cannot run here (None: it can)."""
    accel = node.vm.accel
    if shutil.which(QEMU) is None:
        return f"{QEMU} is missing; install it with: apt-get install qemu-system-x86"
    if guest_kernel(node.vm.kernel) is None:
        return "no guest kernel: install linux-image-amd64 or set vm.kernel"
    if accel == "kvm":
        ok, why = kvm_status()
        if not ok:
            return f"{why}; the vm runner needs hardware KVM (accel: tcg is for functional tests only)"
    return None


def guest_kernel(chosen: str | None = None) -> str | None:
    """The guest kernel image: ``chosen`` (a node's vm.kernel) if it exists,
    else the newest /boot/vmlinuz-*."""
    if chosen:
        return chosen if os.path.exists(chosen) else None
    kernels = sorted(glob.glob("/boot/vmlinuz-*"), key=_version_key)
    return kernels[-1] if kernels else None


def _version_key(path: str) -> list[int]:
    return [int(x) for x in re.findall(r"\d+", path)]


# ---- initramfs ---------------------------------------------------------------


def _cpio_newc(entries: Sequence[tuple[str, int, bytes]]) -> bytes:
    """A newc cpio archive of (path, mode, data) entries; directories have mode 0o40755."""
    out = io.BytesIO()
    ino = 1
    for name, mode, data in [*entries, ("TRAILER!!!", 0, b"")]:
        name_b = name.encode() + b"\0"
        header = "070701" + "".join(f"{v:08x}" for v in (ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(name_b), 0))
        out.write(header.encode() + name_b)
        out.write(b"\0" * ((4 - (110 + len(name_b)) % 4) % 4))
        out.write(data)
        out.write(b"\0" * ((4 - len(data) % 4) % 4))
        ino += 1
    return out.getvalue()


def _shared_libraries(binary: str) -> list[str]:
    res = subprocess.run(["ldd", binary], capture_output=True, text=True, check=False)
    libs = []
    for line in res.stdout.splitlines():
        m = re.search(r"(/\S+)", line.split("=>")[-1])
        if m and os.path.exists(m.group(1)):
            libs.append(m.group(1))
    return libs


INIT = """#!/bin/busybox sh
/bin/busybox --install -s /bin
/bin/busybox mkdir -p /proc /sys /dev /tmp
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t sysfs sys /sys
/bin/busybox mount -t devtmpfs dev /dev 2>/dev/null
echo {begin}
{command} > /tmp/out 2>/tmp/err
status=$?
/bin/busybox cat /tmp/out
echo {end}
/bin/busybox cat /tmp/err
echo "{status_marker}$status"
/bin/busybox poweroff -f
"""


def kernel_release(kernel: str) -> str:
    """The release a Debian kernel image belongs to (/boot/vmlinuz-RELEASE)."""
    name = Path(kernel).name
    if not name.startswith("vmlinuz-"):
        raise VmError(f"cannot tell the release of kernel {kernel} (expected /boot/vmlinuz-RELEASE)")
    return name.removeprefix("vmlinuz-")


def guest_modules(kernel: str, names: Sequence[str]) -> list[str]:
    """Host paths of the modules ``names`` (e.g. "rdma_rxe") of the guest
    kernel's release, each after the modules it depends on (modules.dep)."""
    release = kernel_release(kernel)
    root = Path("/lib/modules") / release
    try:
        dep_lines = (root / "modules.dep").read_text().splitlines()
    except OSError as e:
        raise VmError(f"no module list for guest kernel {release}: install linux-image-{release}") from e
    deps: dict[str, list[str]] = {}
    for line in dep_lines:
        mod, _, rest = line.partition(":")
        deps[mod] = rest.split()
    by_name = {Path(m).name.split(".ko")[0].replace("-", "_"): m for m in deps}
    order: list[str] = []

    def visit(mod: str) -> None:
        for d in deps.get(mod, []):
            visit(d)
        if mod not in order:
            order.append(mod)

    for name in names:
        if name.replace("-", "_") not in by_name:
            raise VmError(f"guest kernel {release} has no module {name}")
        visit(by_name[name.replace("-", "_")])
    return [str(root / m) for m in order]


def build_initramfs(
    programs: Sequence[str],
    command: Sequence[str],
    dest: Path,
    extra_files: Mapping[str, str] | None = None,
    script: str | None = None,
) -> Path:
    """An initramfs running ``command`` (paths inside the guest) once, or the
    shell ``script`` instead. ``extra_files``: guest path -> host path; the
    shared libraries of executables among them come along."""
    busybox = shutil.which("busybox")
    if busybox is None:
        raise VmError("busybox is missing; install it with: apt-get install busybox-static")
    files: dict[str, str] = {"/bin/busybox": busybox}
    for prog in programs:
        files[f"/iolab/{Path(prog).name}"] = prog
        for lib in _shared_libraries(prog):
            files[lib] = lib
    for guest_path, host_path in (extra_files or {}).items():
        files[guest_path] = host_path
        if not host_path.endswith((".ko", ".driver")):
            for lib in _shared_libraries(host_path):
                files[lib] = lib
    dirs = sorted({str(p) for f in files for p in Path(f).parents if str(p) != "/"})
    entries: list[tuple[str, int, bytes]] = [(d.lstrip("/"), 0o40755, b"") for d in dirs]
    for dest_path, src in sorted(files.items()):
        entries.append((dest_path.lstrip("/"), 0o100755, Path(src).read_bytes()))
    body = script if script is not None else " ".join(_sh_quote(a) for a in command)
    if script is not None:
        entries.append(("iolab-script", 0o100755, ("#!/bin/busybox sh\n" + script).encode()))
        body = "/bin/busybox sh /iolab-script"
    init = INIT.format(begin=BEGIN, end=END, status_marker=STATUS, command=body)
    entries.append(("init", 0o100755, init.encode()))
    dest.write_bytes(gzip.compress(_cpio_newc(entries), compresslevel=1))
    return dest


def _sh_quote(arg: str) -> str:
    return arg if re.fullmatch(r"[A-Za-z0-9_./=,:-]+", arg) else "'" + arg.replace("'", "'\\''") + "'"


@dataclass
class GuestResult:
    stdout: str
    stderr: str
    status: int
    seconds: float
    accel: str
    kernel: str
    cmdline: str


def run_in_guest(
    programs: Sequence[str],
    command: Sequence[str],
    accel: str = "kvm",
    kernel: str | None = None,
    cmdline: str = "",
    memory_mb: int = 1024,
    cpus: int = 2,
    timeout: float = 600.0,
    extra_files: Mapping[str, str] | None = None,
    script: str | None = None,
) -> GuestResult:
    """Boot a guest that runs ``command`` (or ``script``) once and return
    its output (``build_initramfs`` for ``extra_files``)."""
    qemu = shutil.which(QEMU)
    if qemu is None:
        raise VmError(f"{QEMU} is missing; install it with: apt-get install qemu-system-x86")
    kernel = kernel or guest_kernel()
    if kernel is None:
        raise VmError("no guest kernel: install linux-image-amd64 or set vm.kernel")
    if accel == "kvm":
        ok, why = kvm_status()
        if not ok:
            raise VmError(why)
    full_cmdline = f"console=ttyS0 panic=-1 rdinit=/init quiet {cmdline}".strip()
    with live.tempdir("iolab-vm-") as tmp:
        initrd = build_initramfs(programs, command, Path(tmp) / "initrd.gz", extra_files, script)
        argv = [
            qemu,
            "-machine",
            f"q35,accel={accel}",
            "-m",
            str(memory_mb),
            "-smp",
            str(cpus),
            "-kernel",
            kernel,
            "-initrd",
            str(initrd),
            "-append",
            full_cmdline,
            "-nographic",
            "-no-reboot",
            "-nodefaults",
            "-serial",
            "stdio",
            "-monitor",
            "none",
        ]
        if accel == "tcg":
            argv[3:3] = ["-cpu", "max"]
        start = time.monotonic()
        try:
            res = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False, errors="replace")
        except subprocess.TimeoutExpired as e:
            raise VmError(f"the guest did not finish within {timeout:.0f} s") from e
        seconds = time.monotonic() - start
    console = res.stdout.replace("\r\n", "\n")
    if BEGIN not in console or STATUS not in console:
        last = (res.stderr.strip().splitlines() or console.strip().splitlines() or ["no output"])[-1]
        raise VmError(f"the guest did not run the command (qemu status {res.returncode}): {last}")
    body = console.split(BEGIN, 1)[1]
    out, rest = body.split(END, 1) if END in body else (body, "")
    err, status_text = rest.split(STATUS, 1) if STATUS in rest else (rest, "1")
    status_digits = re.match(r"\d+", status_text.strip())
    status = int(status_digits.group(0)) if status_digits else 1
    return GuestResult(out.lstrip("\n"), err.strip(), status, seconds, accel, kernel, full_cmdline)
