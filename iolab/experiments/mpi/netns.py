"""A cluster of network namespaces on this machine: separate TCP/IP hosts.

``NetnsCluster(hosts=2)`` creates namespaces ``iol<pid>-<i>``, each with a
veth pair whose other end joins a bridge ``iol<pid>br``, addresses from one
private /24 of its own, optional tbf rate shaping on every host's egress, and
an ``/etc/netns/<ns>/hosts`` file so the host names resolve inside each
namespace. Commands run in a host through ``ip netns exec`` plus a private
UTS namespace whose hostname is the host name, so MPI sees separate nodes.
``agent_path`` is a ``plm_rsh_agent`` for Open MPI: it takes ``HOST CMD...``
like ssh and runs CMD in that namespace, so no ssh is needed.

Everything is torn down on exit from the ``with`` block, also when the run
inside failed or was interrupted, and leftovers of a killed earlier run (its
owner pid is gone) are removed before a new cluster is made. Nothing outside
the cluster's own subnet, interfaces and files is touched: the bridge in the
root namespace carries no address, and the root namespace's routes and
addresses are only read, to pick a subnet nobody uses.
"""

from __future__ import annotations

import ipaddress
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType

from ... import live
from ...runners import RunError

PREFIX = "iol"
NETNS_ETC = Path("/etc/netns")
# 10.213.<n>.0/24 candidates: a fixed, documented range, checked against the
# host's addresses and routes before use.
CANDIDATE_SUPERNET = ipaddress.IPv4Network("10.213.0.0/16")
_OWNED = re.compile(rf"^{PREFIX}(\d+)(?:-\d+|br|h\d+|n\d+)$")

AGENT = """#!/bin/sh
# plm_rsh_agent for iolab's netns cluster: "AGENT HOST COMMAND..." runs
# COMMAND, like ssh would, inside the network namespace named HOST with its
# own hostname, on that host's CPUs.
host="$1"; shift
case "$host" in
{cases}
  *) echo "netns-agent: unknown host '$host'" >&2; exit 255 ;;
esac
exec {ip} netns exec "$host" {taskset} -c "$cpus" {unshare} --uts sh -c 'hostname "$0" && eval "$1"' "$host" "$*"
"""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30, check=False)
    if check and proc.returncode != 0:
        msg = (proc.stderr.strip().splitlines() or ["(no message)"])[-1]
        raise RunError(f"netns: 'ip {' '.join(args)}' failed: {msg}")
    return proc


def require_root_and_iproute2() -> None:
    """Refuse, in one line, where the cluster cannot be built."""
    if os.geteuid() != 0:
        raise RunError(
            "netns transport needs root (it creates network namespaces); "
            "run as root or drop 'netns' from experiments.mpi.transports"
        )
    for tool, package in (("ip", "iproute2"), ("unshare", "util-linux"), ("taskset", "util-linux")):
        if shutil.which(tool) is None:
            raise RunError(f"netns transport needs '{tool}'; install it with: apt-get install {package}")


def owned_namespaces() -> list[str]:
    out = _ip("netns", "list", check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line and _OWNED.match(line.split()[0])]


def owned_links() -> list[str]:
    out = _ip("-o", "link", "show", check=False).stdout
    names = []
    for line in out.splitlines():
        parts = line.split(":", 2)
        if len(parts) >= 2:
            name = parts[1].strip().split("@")[0]
            if _OWNED.match(name):
                names.append(name)
    return names


def leftovers() -> list[str]:
    """Namespaces, links and /etc/netns entries of any cluster (tests use this)."""
    etc = [p.name for p in NETNS_ETC.glob(f"{PREFIX}*")] if NETNS_ETC.is_dir() else []
    return sorted(set(owned_namespaces()) | set(owned_links()) | {f"/etc/netns/{e}" for e in etc if _OWNED.match(e)})


def _kill_namespace_processes(ns: str) -> None:
    pids = _ip("netns", "pids", ns, check=False).stdout.split()
    for pid in pids:
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass


def remove_cluster(owner: int) -> None:
    """Delete everything cluster ``owner`` made; each step tolerates absence."""
    tag = f"{PREFIX}{owner}"
    for ns in owned_namespaces():
        if ns.startswith(tag + "-"):
            _kill_namespace_processes(ns)
            # Deleting the namespace deletes its veth end, and with it the peer.
            _ip("netns", "delete", ns, check=False)
            shutil.rmtree(NETNS_ETC / ns, ignore_errors=True)
    for link in owned_links():
        m = _OWNED.match(link)
        if m and int(m.group(1)) == owner:
            _ip("link", "delete", link, check=False)
    if NETNS_ETC.is_dir():
        for entry in NETNS_ETC.glob(f"{tag}-*"):
            shutil.rmtree(entry, ignore_errors=True)


def remove_stale_clusters() -> tuple[list[int], list[str]]:
    """Remove clusters whose creating process is gone (a killed earlier
    run): the owners whose clusters are gone now, and one line for each
    whose namespaces, links or files are still there."""
    owners = set()
    for name in [
        *owned_namespaces(),
        *owned_links(),
        *([p.name for p in NETNS_ETC.glob(f"{PREFIX}*")] if NETNS_ETC.is_dir() else []),
    ]:
        m = _OWNED.match(name)
        if m:
            owners.add(int(m.group(1)))
    stale = sorted(o for o in owners if not live.pid_alive(o))
    removed, failed = [], []
    for owner in stale:
        remove_cluster(owner)
        left = [name for name in leftovers() if (m := _OWNED.match(Path(name).name)) and int(m.group(1)) == owner]
        if left:
            failed.append(f"could not remove what process {owner} left: {', '.join(left)}")
        else:
            removed.append(owner)
    return removed, failed


def _used_networks() -> list[ipaddress.IPv4Network]:
    nets = []
    for args in (("-4", "-o", "addr", "show"), ("-4", "route", "show", "table", "all")):
        for token in _ip(*args, check=False).stdout.split():
            try:
                if "/" in token:
                    nets.append(ipaddress.ip_network(token, strict=False))
                else:
                    nets.append(ipaddress.ip_network(token + "/32"))
            except ValueError:
                continue
    return [n for n in nets if isinstance(n, ipaddress.IPv4Network)]


def pick_subnet(requested: str | None = None) -> ipaddress.IPv4Network:
    """A /24 no address or route on this machine overlaps (or the one asked for)."""
    used = _used_networks()
    if requested and requested != "auto":
        net = ipaddress.ip_network(requested, strict=True)
        if not isinstance(net, ipaddress.IPv4Network) or not net.is_private or net.prefixlen > 29:
            raise RunError(f"netns: subnet {requested} must be a private IPv4 network of /29 or larger")
        clash = [u for u in used if u.overlaps(net) and u.prefixlen > 0]
        if clash:
            raise RunError(
                f"netns: subnet {requested} overlaps {clash[0]} on this machine; "
                "pick another in experiments.mpi.netns.subnet"
            )
        return net
    for net in CANDIDATE_SUPERNET.subnets(new_prefix=24):
        if not any(u.overlaps(net) for u in used if u.prefixlen > 0):
            return net
    raise RunError(f"netns: every /24 in {CANDIDATE_SUPERNET} is in use; set experiments.mpi.netns.subnet")


class NetnsCluster:
    """``hosts`` namespaces on one bridge; see the module docstring."""

    def __init__(
        self,
        hosts: int,
        subnet: str | None = None,
        rate_mbit: float | None = None,
        burst_bytes: int = 32768,
        latency_ms: float = 50.0,
        cpus: list[int] | None = None,
    ) -> None:
        if hosts < 2:
            raise RunError("netns: a cluster needs at least 2 hosts")
        self.hosts = hosts
        self.requested_subnet = subnet
        self.rate_mbit = rate_mbit
        self.burst_bytes = burst_bytes
        self.latency_ms = latency_ms
        # Host i runs on CPU cpus[i % len(cpus)], like one machine per CPU;
        # default: every CPU this process may use, in order.
        usable = sorted(os.sched_getaffinity(0))
        self.cpus = list(cpus) if cpus else usable
        self.owner = os.getpid()
        self.tag = f"{PREFIX}{self.owner}"
        self.bridge = f"{self.tag}br"
        self.names = [f"{self.tag}-{i}" for i in range(hosts)]
        self.subnet: ipaddress.IPv4Network | None = None
        self.addresses: list[str] = []
        self._dir: tempfile.TemporaryDirectory[str] | None = None

    # -- life cycle -------------------------------------------------------
    def __enter__(self) -> NetnsCluster:
        require_root_and_iproute2()
        removed, failed = remove_stale_clusters()
        for owner in removed:
            print(f"iolab: removed network namespaces left by process {owner}, which no longer runs")
        for line in failed:
            print(f"iolab: {line}")
        self.subnet = pick_subnet(self.requested_subnet)
        if self.hosts > self.subnet.num_addresses - 2:
            raise RunError(f"netns: {self.hosts} hosts do not fit in {self.subnet}")
        hosts = list(self.subnet.hosts())
        self.addresses = [str(hosts[i]) for i in range(self.hosts)]
        try:
            self._build()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        remove_cluster(self.owner)
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None

    def _build(self) -> None:
        assert self.subnet is not None
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("link", "set", self.bridge, "up")
        prefix = self.subnet.prefixlen
        hosts_file = "127.0.0.1 localhost\n" + "".join(
            f"{addr} {name}\n" for addr, name in zip(self.addresses, self.names, strict=True)
        )
        for i, (ns, addr) in enumerate(zip(self.names, self.addresses, strict=True)):
            outer, inner = f"{self.tag}h{i}", f"{self.tag}n{i}"
            _ip("netns", "add", ns)
            _ip("link", "add", outer, "type", "veth", "peer", "name", inner)
            _ip("link", "set", outer, "master", self.bridge, "up")
            _ip("link", "set", inner, "netns", ns)
            _ip("-n", ns, "link", "set", "lo", "up")
            _ip("-n", ns, "addr", "add", f"{addr}/{prefix}", "dev", inner)
            _ip("-n", ns, "link", "set", inner, "up")
            if self.rate_mbit:
                self._shape(ns, inner)
            etc = NETNS_ETC / ns
            etc.mkdir(parents=True, exist_ok=True)
            (etc / "hosts").write_text(hosts_file)
        self._dir = tempfile.TemporaryDirectory(prefix=f"{self.tag}-")
        agent = Path(self._dir.name) / "netns-agent"
        cases = "\n".join(f"  {name}) cpus={self.host_cpu(i)} ;;" for i, name in enumerate(self.names))
        agent.write_text(
            AGENT.format(
                cases=cases, ip=shutil.which("ip"), taskset=shutil.which("taskset"), unshare=shutil.which("unshare")
            )
        )
        agent.chmod(stat.S_IRWXU)
        self._wait_reachable()

    def _shape(self, ns: str, dev: str) -> None:
        # tbf on each host's egress: every byte that leaves a host is paced,
        # so both directions of a transfer see the rate.
        rate = f"{self.rate_mbit}mbit"
        proc = subprocess.run(
            [
                "ip",
                "netns",
                "exec",
                ns,
                "tc",
                "qdisc",
                "add",
                "dev",
                dev,
                "root",
                "tbf",
                "rate",
                rate,
                "burst",
                str(self.burst_bytes),
                "latency",
                f"{self.latency_ms}ms",
            ],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        if proc.returncode != 0:
            msg = (proc.stderr.strip().splitlines() or ["(no message)"])[-1]
            raise RunError(f"netns: tbf shaping at {rate} failed on {dev}: {msg} (is sch_tbf available?)")

    def _wait_reachable(self, timeout: float = 10.0) -> None:
        # The links come up asynchronously: from the first host, connect to
        # a closed port on the last one until the connection is refused.
        deadline = time.monotonic() + timeout
        target = self.addresses[-1]
        probe = (
            "import socket, sys\n"
            "s = socket.socket(); s.settimeout(1)\n"
            "try: s.connect((sys.argv[1], 9))\n"
            "except ConnectionRefusedError: sys.exit(0)\n"
            "except OSError: sys.exit(1)\n"
        )
        while True:
            proc = subprocess.run(
                ["ip", "netns", "exec", self.names[0], sys.executable, "-c", probe, target],
                capture_output=True,
                timeout=30,
                check=False,
            )
            if proc.returncode == 0:
                return
            if time.monotonic() > deadline:
                raise RunError(f"netns: {self.names[0]} cannot reach {target} after {timeout:.0f} s")
            time.sleep(0.1)

    # -- use --------------------------------------------------------------
    @property
    def agent_path(self) -> Path:
        if self._dir is None:
            raise RunError("netns: cluster is not set up")
        return Path(self._dir.name) / "netns-agent"

    def hostfile(self, slots_per_host: int) -> Path:
        """An Open MPI hostfile listing every host with ``slots_per_host`` slots."""
        if self._dir is None:
            raise RunError("netns: cluster is not set up")
        path = Path(self._dir.name) / "hostfile"
        path.write_text("".join(f"{name} slots={slots_per_host}\n" for name in self.names))
        return path

    def host_cpu(self, host: int) -> int:
        return self.cpus[host % len(self.cpus)]

    def wrap(self, argv: list[str], host: int = 0) -> list[str]:
        """``argv`` run in host ``host`` under its own hostname, on its CPU."""
        ip, unshare, taskset = shutil.which("ip"), shutil.which("unshare"), shutil.which("taskset")
        if ip is None or unshare is None or taskset is None:
            raise RunError("netns: 'ip', 'taskset' or 'unshare' disappeared from PATH")
        name = self.names[host]
        return [
            ip,
            "netns",
            "exec",
            name,
            taskset,
            "-c",
            str(self.host_cpu(host)),
            unshare,
            "--uts",
            "sh",
            "-c",
            'hostname "$0" && exec "$@"',
            name,
            *argv,
        ]

    def describe(self) -> dict[str, object]:
        return {
            "hosts": self.names,
            "addresses": self.addresses,
            "subnet": str(self.subnet),
            "host_cpus": [self.host_cpu(i) for i in range(self.hosts)],
            "bridge": self.bridge,
            "rate_mbit": self.rate_mbit,
            "tbf": ({"burst_bytes": self.burst_bytes, "latency_ms": self.latency_ms} if self.rate_mbit else None),
        }
