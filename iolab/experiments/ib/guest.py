"""Both ends of ib_send_lat and ib_send_bw in one QEMU guest over a
soft-RoCE (rdma_rxe) device on a dummy interface: functional only (TCG or
not, one machine's loopback says nothing about a fabric), for testing the
ib experiment's whole path on machines without RDMA hardware."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...runners import VmError, guest_kernel, guest_modules, run_in_guest
from . import FACTS_SCRIPT, PROGRAMS, PerftestResult, parse, parse_facts

# crc32_generic: rxe asks the crypto API for "crc32" when a link is added, and
# with no modprobe in the guest the kernel cannot load it on demand.
SOFT_ROCE_MODULES = ("crc32_generic", "rdma_rxe", "dummy")
GUEST_ADDRESS = "10.231.0.1"
SECTION = "@@perftest@@"


def soft_roce_files() -> dict[str, str]:
    """Guest path -> host path: perftest, the rdma tool, the rxe verbs
    provider (loaded by libibverbs at run time, so no ldd finds it)."""
    files: dict[str, str] = {}
    for prog in (*PROGRAMS, "rdma"):
        path = shutil.which(prog) or shutil.which(prog, path="/usr/sbin:/sbin:/usr/bin")
        if path is None:
            package = "perftest" if prog in PROGRAMS else "iproute2"
            raise VmError(f"{prog} is missing; install it with: apt-get install {package}")
        files[f"/usr/bin/{prog}"] = path
    providers = sorted(Path("/usr/lib/x86_64-linux-gnu/libibverbs").glob("librxe-rdmav*.so"))
    driver = Path("/etc/libibverbs.d/rxe.driver")
    if not providers or not driver.exists():
        raise VmError("the rxe verbs provider is missing; install it with: apt-get install ibverbs-providers")
    files[str(providers[-1])] = str(providers[-1])
    files[str(driver)] = str(driver)
    return files


def soft_roce_script(modules: Sequence[str], iterations: int, sizes: str = "-a") -> str:
    """Load the modules, make rxe0 on dummy0, print the device facts, then
    run each program's server in the background and its client against it.
    The client's stderr gets its own section: perftest warns there (e.g.
    "Correlation coefficient r^2: ... < 0.9" when it cannot pin the CPU
    clock), and on one console those lines land inside the result table."""
    lines = ["set -e"]
    for m in modules:
        name = Path(m).name
        lines.append(f"insmod /modules/{name}" + (" numdummies=1" if name.startswith("dummy.") else ""))
    lines += [
        "ip link set lo up",
        f"ip addr add {GUEST_ADDRESS}/24 dev dummy0",
        "ip link set dummy0 up",
        "rdma link add rxe0 type rxe netdev dummy0",
        f"echo {SECTION} facts",
        FACTS_SCRIPT.rstrip(),
    ]
    for prog in PROGRAMS:
        common = f"-d rxe0 {sizes} -n {iterations} -F"
        lines += [
            f"/usr/bin/{prog} {common} > /tmp/{prog}.server 2>&1 &",
            "sleep 1",
            f"echo {SECTION} {prog}",
            f"/usr/bin/{prog} {common} {GUEST_ADDRESS} 2> /tmp/{prog}.client.err",
            "wait",
            f"echo {SECTION} {prog}.stderr",
            f"cat /tmp/{prog}.client.err",
        ]
    return "\n".join(lines) + "\n"


def soft_roce_guest(
    iterations: int = 20, accel: str = "tcg", timeout: float = 900.0, kernel: str | None = None
) -> tuple[list[PerftestResult], dict[str, dict[str, str]], Any]:
    """Both ends of ib_send_lat and ib_send_bw in one guest over rdma_rxe:
    (results, device facts, the guest run). Functional only."""
    kernel = kernel or guest_kernel()
    if kernel is None:
        raise VmError("no guest kernel: install linux-image-amd64 or set vm.kernel")
    modules = guest_modules(kernel, SOFT_ROCE_MODULES)
    files = {**soft_roce_files(), **{f"/modules/{Path(m).name}": m for m in modules}}
    run = run_in_guest(
        [],
        [],
        accel=accel,
        kernel=kernel,
        memory_mb=1024,
        cpus=2,
        timeout=timeout,
        extra_files=files,
        script=soft_roce_script(modules, iterations),
    )
    if run.status != 0:
        last = (run.stderr.strip().splitlines() or run.stdout.strip().splitlines() or ["no output"])[-1]
        raise VmError(f"the soft-RoCE guest failed (status {run.status}): {last}")
    sections = dict(part.split("\n", 1) for part in run.stdout.split(SECTION + " ")[1:])
    facts = parse_facts(sections.get("facts", ""))
    results = [parse(p, sections.get(p, "")) for p in PROGRAMS]
    for r in results:
        r.warnings += [ln.strip() for ln in sections.get(f"{r.program}.stderr", "").splitlines() if ln.strip()]
    return results, facts, run
