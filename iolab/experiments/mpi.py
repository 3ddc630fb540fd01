"""The MPI experiment: mpi-probe (and the OSU-style reference ping-pong) over
every transport and rank count, in a seeded random order.

Transports on one machine:
  shm        ranks on this host, Open MPI's shared-memory BTL (vader; sm in 5.x)
  tcp        ranks on this host, TCP BTL forced onto loopback
             (btl_tcp_if_include=lo: Open MPI excludes 127.0.0.0/8 by default)
  netns      one rank group per network namespace (iolab.runners.netns),
             TCP over veth + bridge: separate TCP/IP stacks
  netns_tbf  as netns with tbf rate shaping on every host's egress: a known
             bandwidth, the ground truth for t_w (ping-pong only)

Across machines:
  nodes      ranks in blocks over the node and its inventory ``mpi.peers``,
             mpirun on the node launching the peers over ssh
             (iolab.runners.mpigroup); TCP between nodes, shared memory
             within one

A node runs ``experiments.mpi.transports`` unless its ``mpi.transports``
says otherwise (``node_transports``).

One call measures one repetition and writes ``rep<N>.csv``: a ``transport``
column followed by mpi-probe's columns, one ``# launch: {json}`` line before
each launch's rows, and mpi-probe's own ``# meta:`` line. Reference ping-pong
rows have bench ``reference_pingpong``, one per timed loop (series), and ns =
the mean round trip of that loop (loop time / iterations), as osu_latency
computes it.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from .. import tables
from ..formats import MPI_COLUMNS, MPI_PROBE_COLUMNS, REFERENCE_BENCH
from ..inventory import NodeEntry
from ..runners import Capability, LocalRunner, Runner, runner_for
from ..runners.local import RunError
from ..runners.mpigroup import Member, MpiNodeGroup
from ..runners.netns import NetnsCluster, require_root_and_iproute2
from ..settings import MpiSettings
from . import REGISTRY, Measured, Repetition

TRANSPORTS = ("shm", "tcp", "netns", "netns_tbf", "nodes")
NETNS_TRANSPORTS = ("netns", "netns_tbf")
BENCHMARKS = ("pingpong", "bcast", "allreduce", "alltoall", "barrier")
# srun's process-management interface to Open MPI.
SRUN_MPI = "pmix"
Settings = Mapping[str, Any] | MpiSettings


@dataclass
class Launch:
    transport: str
    ranks: int
    program: str                       # "mpi-probe" or "mpi-pingpong-ref"
    benches: list[str] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    method: str = "probe"              # mpi-probe --method: probe or osu
    selection: str = "pinned"          # collective algorithms: pinned (as configured) or default

    def label(self) -> str:
        what = ",".join(self.benches) if self.program == "mpi-probe" else "reference ping-pong"
        how = " (OSU method)" if self.method == "osu" else ""
        algos = " (Open MPI's default algorithms)" if self.selection == "default" and self.program == "mpi-probe" \
            else ""
        return f"{self.transport} p={self.ranks} {what}{how}{algos}"


def selections(settings: Settings) -> list[str]:
    """The algorithm selections launches run: ``selections`` as configured,
    where "pinned" with nothing pinned is Open MPI's default selection."""
    typed = MpiSettings.of(settings)
    pinned = bool(typed.pinned_algorithms())
    return list(dict.fromkeys(s if pinned else "default" for s in typed.selections))


def default_sizes(settings: MpiSettings) -> list[int]:
    if settings.sizes:
        return sorted(settings.sizes)
    lo, hi = settings.min_bytes, settings.max_bytes
    out, m = [], 1
    while m <= hi:
        if m >= lo:
            out.append(m)
        m *= 2
    return out


def node_transports(entry: Mapping[str, Any] | NodeEntry, settings: Settings) -> tuple[list[str], list[str]]:
    """(transports this node runs, configured ones it leaves out).

    A node's ``mpi.transports`` is taken as written (the config check
    refuses what the node cannot do). Otherwise the experiment's list: the
    netns transports need this machine's namespaces, so an ssh node leaves
    them out, and a node with ``mpi.peers`` adds ``nodes``."""
    node = NodeEntry.of(entry)
    if node.mpi.transports:
        return list(node.mpi.transports), []
    configured = list(MpiSettings.of(settings).transports)
    remote = node.runner == "ssh"
    chosen = [t for t in configured if not (remote and t in NETNS_TRANSPORTS)]
    left_out = [t for t in configured if t not in chosen]
    if node.mpi.peers and "nodes" not in chosen:
        chosen.append("nodes")
    return chosen, left_out


def usable_cpus() -> int:
    return len(os.sched_getaffinity(0))


def plan(settings: Settings, seed: int) -> list[Launch]:
    """Every launch of one repetition, in a seeded random order.

    Ping-pong runs in the 2-rank launch only (with more ranks the others
    would just wait); the tbf-shaped cluster runs ping-pong at its own sizes.
    """
    settings = MpiSettings.of(settings)
    benches = [b for b in BENCHMARKS if b in settings.benchmarks]
    ranks = sorted(settings.ranks)
    sizes = default_sizes(settings)
    launches = []
    first, *others = selections(settings)
    for transport in settings.transports:
        if transport == "netns_tbf":
            launches.append(Launch(transport, 2, "mpi-probe", ["pingpong"],
                                   sorted(settings.netns.tbf_sizes), selection=first))
            continue
        for p in ranks:
            chosen = [b for b in benches if b != "pingpong" or p == 2]
            # Algorithms choose nothing for ping-pong: it runs once, in the
            # first selection's launch.
            for selection, picked in [(first, chosen), *((s, [b for b in chosen if b != "pingpong"])
                                                         for s in others)]:
                for method in settings.methods if picked else []:
                    launches.append(Launch(transport, p, "mpi-probe", picked, sizes, method, selection))
        if settings.reference.enabled and 2 in ranks:
            launches.append(Launch(transport, 2, "mpi-pingpong-ref", ["pingpong"],
                                   sorted(settings.reference.sizes), selection=first))
    random.Random(seed).shuffle(launches)
    return launches


def mpirun_version(mpirun: str) -> str:
    try:
        out = subprocess.run([mpirun, "--version"], capture_output=True, text=True, timeout=30,
                             check=False).stdout
    except OSError as e:
        raise RunError(f"cannot run {mpirun}: {e}; install openmpi-bin or set experiments.mpi.mpirun") from e
    return (out.strip().splitlines() or ["unknown"])[0]


def shm_btl(version: str) -> str:
    """Open MPI renamed the vader BTL to sm in 5.0."""
    m = re.search(r"(\d+)\.\d+", version)
    return "sm" if m and int(m.group(1)) >= 5 else "vader"


def probe_args(settings: MpiSettings, launch: Launch, seed: int) -> list[str]:
    if launch.program == "mpi-pingpong-ref":
        ref = settings.reference
        return ["--sizes", ",".join(map(str, launch.sizes)), "--iterations", str(ref.iterations),
                "--warmup", str(ref.warmup), "--series", str(ref.series)]
    if launch.method == "osu":
        # OSU's own skip and iteration counts, unless osu_iterations overrides
        # them as OSU's -i does; OSU synchronises with barriers only.
        counts = ["--iterations", str(settings.osu_iterations)] if settings.osu_iterations else []
        return ["--method", "osu", "--bench", ",".join(launch.benches),
                "--sizes", ",".join(map(str, launch.sizes)), *counts,
                "--series", str(settings.osu_series or settings.series), "--seed", str(seed)]
    return ["--bench", ",".join(launch.benches), "--sizes", ",".join(map(str, launch.sizes)),
            "--warmup", str(settings.warmup), "--iterations", str(settings.iterations),
            "--series", str(settings.series), "--large-bytes", str(settings.large_bytes),
            "--large-iterations", str(settings.large_iterations), "--sync", settings.sync,
            "--window-us", str(settings.window_us), "--seed", str(seed)]


def mca_params(settings: Settings, launch: Launch, btl_shm: str,
               cluster: NetnsCluster | None, oversubscribed: bool,
               group: MpiNodeGroup | None = None) -> dict[str, str]:
    """The MCA parameters of a launch (mpirun takes them as --mca, srun's
    ranks as OMPI_MCA_* variables)."""
    settings = MpiSettings.of(settings)
    mca: dict[str, str] = {}
    if launch.transport == "shm":
        mca["btl"] = f"self,{btl_shm}"
    elif launch.transport == "tcp":
        mca["btl"] = "self,tcp"
        mca["btl_tcp_if_include"] = settings.tcp_interface
    elif launch.transport == "nodes":
        assert group is not None
        per_node = max(group.distribution(launch.ranks))
        mca["btl"] = f"self,{btl_shm},tcp" if per_node > 1 else "self,tcp"
        if group.interface:
            mca["btl_tcp_if_include"] = group.interface
            mca["oob_tcp_if_include"] = group.interface
        mca["plm_rsh_agent"] = group.agent
        # Every daemon is started from the first node, where the agent is.
        mca["plm_rsh_no_tree_spawn"] = "1"
    else:
        assert cluster is not None
        per_host = -(-launch.ranks // cluster.hosts)
        mca["btl"] = f"self,{btl_shm},tcp" if per_host > 1 else "self,tcp"
        mca["btl_tcp_if_include"] = str(cluster.subnet)
        mca["oob_tcp_if_include"] = str(cluster.subnet)
        mca["plm_rsh_agent"] = str(cluster.agent_path)
    if oversubscribed:
        mca["mpi_yield_when_idle"] = "1"
    algorithms = settings.pinned_algorithms()
    if algorithms and launch.selection == "pinned":
        mca["coll_tuned_use_dynamic_rules"] = "1"
        for op, name in algorithms.items():
            mca[f"coll_tuned_{op}_algorithm"] = str(name)
    for key, value in settings.extra_mca.items():
        mca[str(key)] = str(value)
    return mca


def _mpirun_path(settings: MpiSettings, remote: bool) -> str:
    """mpirun as configured: looked up on this PATH here, on the node's PATH there."""
    return settings.mpirun if remote else shutil.which(settings.mpirun) or settings.mpirun


def _mpirun_head(settings: MpiSettings, remote: bool) -> list[str]:
    # Open MPI refuses root without the flag (remote: by the environment, _mpi_env).
    return [_mpirun_path(settings, remote), *(["--allow-run-as-root"] if not remote and os.geteuid() == 0 else [])]


def _placement_flags(oversubscribed: bool, binding: str, mca: Mapping[str, str]) -> list[str]:
    flags = ["--oversubscribe"] if oversubscribed else []
    flags += ["--bind-to", binding]
    for key, value in mca.items():
        flags += ["--mca", key, value]
    return flags


def mpirun_argv(settings: Settings, launch: Launch, program: Path | str, args: list[str],
                btl_shm: str, cluster: NetnsCluster | None, cpus: int | None = None,
                remote: bool = False) -> tuple[list[str], dict[str, Any]]:
    """The full command and what it decided (binding, oversubscription).
    ``cpus``: the node's usable CPUs (default: this machine's); ``remote``:
    mpirun is found on the node's PATH and root is allowed by environment."""
    settings = MpiSettings.of(settings)
    cpus = cpus if cpus is not None else usable_cpus()
    oversubscribed = launch.ranks > cpus
    argv = [*_mpirun_head(settings, remote), "-np", str(launch.ranks)]
    if cluster is not None:
        per_host = -(-launch.ranks // cluster.hosts)
        argv += ["--hostfile", str(cluster.hostfile(per_host))]
        # Every namespace looks like its own machine to Open MPI, so its
        # binding would pin each host's rank to the same core; the cluster
        # pins each host to its own CPU instead (taskset).
        binding = "host-cpu"
    else:
        binding = "none" if oversubscribed else "core"
    argv += _placement_flags(oversubscribed, "none" if binding == "host-cpu" else binding,
                             mca_params(settings, launch, btl_shm, cluster, oversubscribed))
    argv += [str(program), *args]
    if cluster is not None:
        argv = cluster.wrap(argv, host=0)
    decided = {"oversubscribed": oversubscribed, "yield_when_idle": oversubscribed,
               "binding": binding, "usable_cpus": cpus}
    return argv, decided


def nodes_mpirun_argv(settings: MpiSettings, launch: Launch, args: list[str], btl_shm: str,
                      group: MpiNodeGroup, remote: bool) -> tuple[list[str], dict[str, Any]]:
    """mpirun on the group's first node: the inventory's hostfile, the
    agent that reaches the peers, and one app context per node with that
    node's own build (iolab.runners.mpigroup)."""
    oversubscribed = group.oversubscribed(launch.ranks)
    binding = "none" if oversubscribed else group.bind_to
    argv = [*_mpirun_head(settings, remote), "--hostfile", group.hostfile,
            *_placement_flags(oversubscribed, binding,
                              mca_params(settings, launch, btl_shm, None, oversubscribed, group)),
            *group.contexts(launch.ranks, launch.program, args)]
    decided = {"oversubscribed": oversubscribed, "yield_when_idle": oversubscribed,
               "binding": binding, "usable_cpus": sum(m.slots for m in group.members)}
    return argv, decided


def srun_argv(settings: MpiSettings, launch: Launch, program: str, args: list[str],
              btl_shm: str, cpus: int | None = None) -> tuple[list[str], dict[str, Any]]:
    """Inside a SLURM job: launch the ranks with srun (PMIx), the MCA
    parameters passed as OMPI_MCA_* variables, since srun has no --mca."""
    cpus = cpus if cpus is not None else usable_cpus()
    oversubscribed = launch.ranks > cpus
    env = {f"OMPI_MCA_{key}": value
           for key, value in mca_params(settings, launch, btl_shm, None, oversubscribed).items()}
    # Binding is left to the cluster's TaskPlugin (task/affinity binds;
    # task/none cannot, and srun refuses --cpu-bind there).
    argv = ["srun", "--overlap", f"--mpi={SRUN_MPI}", "-n", str(launch.ranks),
            "--cpus-per-task=1"]
    if oversubscribed:
        argv.append("--overcommit")
    argv += [program, *args]
    # srun exports the whole environment by default; the values hold commas,
    # which --export=NAME=VALUE lists cannot carry.
    decided = {"oversubscribed": oversubscribed, "yield_when_idle": oversubscribed,
               "binding": "slurm TaskPlugin default", "usable_cpus": cpus, "launcher": "srun",
               "environment": env}
    return argv, decided


def mpi_error_line(stderr: str) -> str:
    """The line that says what went wrong, not Open MPI's help banner."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    for prefix in ("mpi-probe:", "mpi-pingpong-ref:"):
        for ln in lines:
            if ln.startswith(prefix):
                return ln
    for ln in lines:
        if not ln.startswith(("-", "[")) and "help message" not in ln and "MCA parameter" not in ln:
            return ln
    return lines[-1] if lines else "(no message)"


def _read_probe(path: Path) -> tuple[list[str], list[str]]:
    """(meta lines, data rows) of one mpi-probe output; checks the header."""
    meta, rows, header = [], [], None
    for line in path.read_text().splitlines():
        if line.startswith("#"):
            meta.append(line)
        elif header is None:
            header = line
        elif line:
            rows.append(line)
    if header != ",".join(MPI_PROBE_COLUMNS):
        raise RunError(f"mpi-probe wrote an unexpected header: {header!r}")
    return meta, rows


def _reference_rows(stdout: str, launch: Launch, expected_series: int) -> list[str]:
    lines = [ln for ln in stdout.strip().splitlines() if ln]
    if not lines or lines[0] != "series,bytes,iterations,latency_ns":
        raise RunError(f"mpi-pingpong-ref wrote unexpected output: {lines[:1]!r}")
    out = []
    for ln in lines[1:]:
        series, size, _iters, latency = ln.split(",")
        rtt = round(float(latency) * 2)
        out.append(f"{REFERENCE_BENCH},{size},{launch.ranks},{series},0,0,{rtt},0,0")
    if len(out) != len(launch.sizes) * int(expected_series):
        raise RunError(f"mpi-pingpong-ref reported {len(out)} of {len(launch.sizes) * expected_series} loops")
    return out


def run_launch(settings: MpiSettings, launch: Launch, seed: int, btl_shm: str,
               workdir: Path, out: TextIO, cluster: NetnsCluster | None = None,
               runner: Runner | None = None, cpus: int | None = None,
               launcher: str = "mpirun", group: MpiNodeGroup | None = None) -> dict[str, Any]:
    runner = runner or LocalRunner()
    remote = Capability.THIS_MACHINE not in runner.capabilities
    program = runner.exe(launch.program)
    if not remote and not Path(program).exists():
        raise RunError(f"{launch.program} not found: build it first (make -C native mpi)")
    args = probe_args(settings, launch, seed)
    if launch.transport == "nodes":
        if group is None:
            raise RunError("the nodes transport needs the node's mpi.peers")
        argv, decided = nodes_mpirun_argv(settings, launch, args, btl_shm, group, remote)
    elif launcher == "srun" and cluster is None:
        argv, decided = srun_argv(settings, launch, program, args, btl_shm, cpus)
    else:
        argv, decided = mpirun_argv(settings, launch, program, args, btl_shm, cluster, cpus, remote)
    stdout_path = workdir / "stdout.txt"
    result = runner.run(argv, stdout_path, timeout=float(settings.timeout),
                        error_line=mpi_error_line, env={**_mpi_env(), **decided.get("environment", {})},
                        name=launch.label())
    record: dict[str, Any] = {"transport": launch.transport, "ranks": launch.ranks,
                              "program": launch.program, "method": launch.method,
                              "selection": launch.selection, "benches": launch.benches,
                              "sizes": launch.sizes, "argv": result.argv, **decided,
                              "seconds": round(result.seconds, 3)}
    if cluster is not None:
        record["cluster"] = cluster.describe()
    if launch.transport == "nodes" and group is not None:
        record["group"] = group.describe(launch.ranks)
    if launch.program == "mpi-pingpong-ref":
        meta: list[str] = []
        rows = _reference_rows(stdout_path.read_text(), launch, settings.reference.series)
    else:
        meta, rows = _read_probe(stdout_path)
        parsed = [json.loads(m.split(":", 1)[1]) for m in meta if m.startswith("# meta:")]
        if parsed:
            record["probe_meta"] = parsed[0]
    out.write("# launch: " + json.dumps(record, sort_keys=True) + "\n")
    for m in meta:
        out.write(m + "\n")
    for row in rows:
        out.write(f"{launch.transport},{row}\n")
    return record


def _mpi_env() -> dict[str, str]:
    """Variables a launch adds to the node's environment."""
    if os.geteuid() == 0:
        # Open MPI refuses root without these (plus --allow-run-as-root for mpirun).
        return {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    return {}


def run_experiment(settings: Settings, seed: int, output: Path,
                   progress: bool = True, runner: Runner | None = None,
                   cpus: int | None = None, launcher: str = "mpirun",
                   group: MpiNodeGroup | None = None) -> dict[str, Any]:
    """Every launch of one repetition into ``output``; provenance extras back.
    ``runner``: the node mpirun runs on (default: here), ``cpus`` its CPUs;
    ``launcher``: mpirun, or srun inside a SLURM job (shm and tcp transports);
    ``group``: the node and its peers, for the nodes transport (prepared)."""
    settings = MpiSettings.of(settings)
    runner = runner or LocalRunner()
    remote = Capability.THIS_MACHINE not in runner.capabilities
    launches = plan(settings, seed)
    if any(lc.transport in NETNS_TRANSPORTS for lc in launches):
        if remote:
            raise RunError(f"node {getattr(runner, 'node', '?')}: the netns transports run on local "
                           "nodes only; drop netns and netns_tbf from this node's mpi.transports")
        require_root_and_iproute2()
    if any(lc.transport == "nodes" for lc in launches) and group is None:
        raise RunError("the nodes transport runs across a node and its mpi.peers; none are set")
    version = (runner.facts().get("mpirun") or "unknown") if remote else mpirun_version(settings.mpirun)
    btl_shm = shm_btl(version)
    records = []
    netns = settings.netns
    with tempfile.TemporaryDirectory(prefix="iolab-mpi-") as tmp, open(output, "w") as out:
        out.write(",".join(MPI_COLUMNS) + "\n")
        for i, launch in enumerate(launches, 1):
            if progress:
                print(f"iolab: mpi [{i}/{len(launches)}] {launch.label()}", flush=True)
            if launch.transport in ("netns", "netns_tbf"):
                rate = netns.tbf_rate_mbit if launch.transport == "netns_tbf" else None
                with NetnsCluster(min(netns.hosts, launch.ranks), subnet=netns.subnet,
                                  rate_mbit=rate, burst_bytes=netns.tbf_burst_bytes) as cluster:
                    records.append(run_launch(settings, launch, seed + i, btl_shm, Path(tmp), out,
                                              cluster))
            else:
                records.append(run_launch(settings, launch, seed + i, btl_shm, Path(tmp), out,
                                          runner=runner, cpus=cpus, launcher=launcher, group=group))
    return {"mpi": {"mpirun": _mpirun_path(settings, remote),
                    "mpirun_version": version, "mpicc": settings.mpicc, "shm_btl": btl_shm,
                    "usable_cpus": cpus if cpus is not None else usable_cpus(), "launcher": launcher,
                    "transports": list(settings.transports),
                    **({"group": group.describe()} if group is not None else {}),
                    "mca_environment": {k: v for k, v in os.environ.items() if k.startswith("OMPI_MCA_")},
                    "launches": records}}


def run_repetition(rep: Repetition) -> Measured:
    """Every launch of one repetition: the transports this node can run
    (mpirun here, or srun inside a SLURM job), with its peers for ``nodes``."""
    in_slurm_job = rep.node_entry.runner == "slurm" and "SLURM_JOB_ID" in os.environ
    interface = rep.node_entry.mpi.interface
    transports, left_out = node_transports(rep.node_entry, rep.settings)
    if left_out:
        print(f"iolab: mpi on {rep.node.name}: leaving out {', '.join(left_out)} (they need "
              "this machine's network namespaces; nodes[].mpi.transports chooses)", file=sys.stderr)
    settings = MpiSettings.of(rep.settings).model_copy(
        update={"transports": tuple(transports), **({"tcp_interface": interface} if interface else {})})
    with _node_group(rep, transports) as group:
        extra = run_experiment(settings, rep.seed, rep.raw, runner=rep.runner,
                               cpus=rep.facts.cpu_count,
                               launcher="srun" if in_slurm_job else "mpirun", group=group)
    extra["mpi"]["transports_left_out"] = left_out
    frame = tables.read_mpi_csv(rep.raw)
    if frame.empty:
        raise RunError(f"mpi on {rep.node.name}: no samples were written")
    placement = {"launches": [{k: r[k] for k in ("transport", "ranks", "binding", "oversubscribed")}
                              for r in extra["mpi"]["launches"]]}
    return Measured(extra, ["mpirun ... mpi-probe", "(one launch per transport and rank count)"],
                    f"{len(extra['mpi']['launches'])} launches, {len(frame)} samples", placement)


@contextlib.contextmanager
def _node_group(rep: Repetition, transports: Sequence[str]) -> Iterator[MpiNodeGroup | None]:
    """The node and its MPI peers, each peer's sources built in its own ssh
    session, the launch files written on this node; None without ``nodes``."""
    if "nodes" not in transports:
        yield None
        return
    name = rep.node_entry.name
    if not rep.peer_entries:
        raise RunError(f"mpi on {name}: the nodes transport needs mpi.peers (pass them with --peer-nodes)")
    if Capability.MPI_ACROSS_PEERS not in rep.runner.capabilities:
        raise RunError(f"mpi on {name}: mpirun across nodes starts on a local or ssh node")
    programs = REGISTRY["mpi"].programs
    with contextlib.ExitStack() as stack:
        peers = []
        for entry in rep.peer_entries:
            runner = runner_for(entry)
            if Capability.MPI_PEER not in runner.capabilities:
                raise RunError(f"mpi on {name}: peer {entry.name} is not an ssh node")
            session = stack.enter_context(runner.session(programs))
            peers.append(Member(entry, session, session.facts()))
        group = MpiNodeGroup(Member(rep.node_entry, rep.runner, rep.facts), peers)
        group.prepare()
        yield group
