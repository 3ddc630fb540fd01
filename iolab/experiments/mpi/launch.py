"""One MPI launch: the mpirun (or srun) command line that runs it (MCA
parameters, binding, oversubscription, the app contexts of a group of
nodes), its run, and the rows it adds to the raw file: mpi-probe's own,
or the reference ping-pong's output turned into them (one row per timed
loop, ns = the mean round trip of that loop, as osu_latency computes it).
The experiment's plan, which makes the launches, is in ``__init__``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from ... import live
from ...formats import MPI_PROBE_COLUMNS, REFERENCE_BENCH
from ...runners import Capability, LocalRunner, RunError, Runner
from ...settings import MpiSettings
from .group import MpiNodeGroup
from .netns import NetnsCluster

# srun's process-management interface to Open MPI.
SRUN_MPI = "pmix"
Settings = MpiSettings


@dataclass
class Launch:
    transport: str
    ranks: int
    program: str  # "mpi-probe" or "mpi-pingpong-ref"
    benches: list[str] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    method: str = "probe"  # mpi-probe --method: probe or osu
    selection: str = "pinned"  # collective algorithms: pinned (as configured) or default

    def label(self) -> str:
        what = ",".join(self.benches) if self.program == "mpi-probe" else "reference ping-pong"
        how = " (OSU method)" if self.method == "osu" else ""
        algos = (
            " (Open MPI's default algorithms)" if self.selection == "default" and self.program == "mpi-probe" else ""
        )
        return f"{self.transport} p={self.ranks} {what}{how}{algos}"


def usable_cpus() -> int:
    return len(os.sched_getaffinity(0))


def mpirun_version(mpirun: str) -> str:
    try:
        out = subprocess.run([mpirun, "--version"], capture_output=True, text=True, timeout=30, check=False).stdout
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
        return [
            "--sizes",
            ",".join(map(str, launch.sizes)),
            "--iterations",
            str(ref.iterations),
            "--warmup",
            str(ref.warmup),
            "--series",
            str(ref.series),
        ]
    if launch.method == "osu":
        # OSU's own skip and iteration counts, unless osu_iterations overrides
        # them as OSU's -i does; OSU synchronises with barriers only.
        counts = ["--iterations", str(settings.osu_iterations)] if settings.osu_iterations else []
        return [
            "--method",
            "osu",
            "--bench",
            ",".join(launch.benches),
            "--sizes",
            ",".join(map(str, launch.sizes)),
            *counts,
            "--series",
            str(settings.osu_series or settings.series),
            "--seed",
            str(seed),
        ]
    return [
        "--bench",
        ",".join(launch.benches),
        "--sizes",
        ",".join(map(str, launch.sizes)),
        "--warmup",
        str(settings.warmup),
        "--iterations",
        str(settings.iterations),
        "--series",
        str(settings.series),
        "--large-bytes",
        str(settings.large_bytes),
        "--large-iterations",
        str(settings.large_iterations),
        "--sync",
        settings.sync,
        "--window-us",
        str(settings.window_us),
        "--seed",
        str(seed),
    ]


def mca_params(
    settings: Settings,
    launch: Launch,
    btl_shm: str,
    cluster: NetnsCluster | None,
    oversubscribed: bool,
    group: MpiNodeGroup | None = None,
) -> dict[str, str]:
    """The MCA parameters of a launch (mpirun takes them as --mca, srun's
    ranks as OMPI_MCA_* variables)."""
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


def fabric(mca: Mapping[str, str], infiniband_seen: Mapping[str, bool] | None = None) -> dict[str, Any]:
    """What carried a launch's messages: the pml (a btl list implies ob1),
    the btl list and interface as requested, and the kind. An RDMA
    transport (the ucx pml, the openib or uct btl) is "infiniband" only
    where every node of the launch showed an active InfiniBand port
    (``infiniband_seen``: node -> seen, from its host facts); else "ucx"
    for the ucx pml (UCX picks TCP or shared memory without one) and
    "rdma, no InfiniBand port seen" for the btls. Otherwise "tcp", "shared
    memory", or "default" (Open MPI chose; nothing recorded forces one)."""
    btl = mca.get("btl", "")
    pml = mca.get("pml", "ob1" if btl else "")
    parts = set(btl.split(",")) - {"", "self"}
    rdma = pml == "ucx" or bool(parts & {"openib", "uct"})
    seen = dict(infiniband_seen or {})
    if rdma:
        kind = (
            "infiniband" if seen and all(seen.values()) else "ucx" if pml == "ucx" else "rdma, no InfiniBand port seen"
        )
    else:
        kind = "tcp" if "tcp" in parts else "shared memory" if parts else "default"
    out: dict[str, Any] = {"kind": kind, "pml": pml, "btl": btl, "interface": mca.get("btl_tcp_if_include", "")}
    if rdma:
        out["infiniband_seen"] = seen
    return out


def mpirun_path(settings: MpiSettings, remote: bool) -> str:
    """mpirun as configured: looked up on this PATH here, on the node's PATH there."""
    return settings.mpirun if remote else shutil.which(settings.mpirun) or settings.mpirun


def _mpirun_head(settings: MpiSettings, remote: bool) -> list[str]:
    # Open MPI refuses root without the flag (remote: by the environment, _mpi_env).
    return [mpirun_path(settings, remote), *(["--allow-run-as-root"] if not remote and os.geteuid() == 0 else [])]


def _placement_flags(oversubscribed: bool, binding: str, mca: Mapping[str, str]) -> list[str]:
    flags = ["--oversubscribe"] if oversubscribed else []
    flags += ["--bind-to", binding]
    for key, value in mca.items():
        flags += ["--mca", key, value]
    return flags


def mpirun_argv(
    settings: Settings,
    launch: Launch,
    program: Path | str,
    args: list[str],
    btl_shm: str,
    cluster: NetnsCluster | None,
    cpus: int | None = None,
    remote: bool = False,
) -> tuple[list[str], dict[str, Any]]:
    """The full command and what it decided (binding, oversubscription).
    ``cpus``: the node's usable CPUs (default: this machine's); ``remote``:
    mpirun is found on the node's PATH and root is allowed by environment."""
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
    mca = mca_params(settings, launch, btl_shm, cluster, oversubscribed)
    argv += _placement_flags(oversubscribed, "none" if binding == "host-cpu" else binding, mca)
    argv += [str(program), *args]
    if cluster is not None:
        argv = cluster.wrap(argv, host=0)
    decided = {
        "oversubscribed": oversubscribed,
        "yield_when_idle": oversubscribed,
        "binding": binding,
        "usable_cpus": cpus,
        "fabric": fabric(mca),
    }
    return argv, decided


def nodes_mpirun_argv(
    settings: MpiSettings, launch: Launch, args: list[str], btl_shm: str, group: MpiNodeGroup, remote: bool
) -> tuple[list[str], dict[str, Any]]:
    """mpirun on the group's first node: the inventory's hostfile, the
    agent that reaches the peers, and one app context per node with that
    node's own build (iolab.experiments.mpi.group)."""
    oversubscribed = group.oversubscribed(launch.ranks)
    binding = "none" if oversubscribed else group.bind_to
    mca = mca_params(settings, launch, btl_shm, None, oversubscribed, group)
    argv = [
        *_mpirun_head(settings, remote),
        "--hostfile",
        group.hostfile,
        *_placement_flags(oversubscribed, binding, mca),
        *group.contexts(launch.ranks, launch.program, args),
    ]
    decided = {
        "oversubscribed": oversubscribed,
        "yield_when_idle": oversubscribed,
        "binding": binding,
        "usable_cpus": sum(m.slots for m in group.members),
        "fabric": fabric(mca, group.infiniband_seen()),
    }
    return argv, decided


def srun_argv(
    settings: MpiSettings, launch: Launch, program: str, args: list[str], btl_shm: str, cpus: int | None = None
) -> tuple[list[str], dict[str, Any]]:
    """Inside a SLURM job: launch the ranks with srun (PMIx), the MCA
    parameters passed as OMPI_MCA_* variables, since srun has no --mca."""
    cpus = cpus if cpus is not None else usable_cpus()
    oversubscribed = launch.ranks > cpus
    mca = mca_params(settings, launch, btl_shm, None, oversubscribed)
    env = {f"OMPI_MCA_{key}": value for key, value in mca.items()}
    # Binding is left to the cluster's TaskPlugin (task/affinity binds;
    # task/none cannot, and srun refuses --cpu-bind there).
    argv = ["srun", "--overlap", f"--mpi={SRUN_MPI}", "-n", str(launch.ranks), "--cpus-per-task=1"]
    if oversubscribed:
        argv.append("--overcommit")
    argv += [program, *args]
    # srun exports the whole environment by default; the values hold commas,
    # which --export=NAME=VALUE lists cannot carry.
    decided = {
        "oversubscribed": oversubscribed,
        "yield_when_idle": oversubscribed,
        "binding": "slurm TaskPlugin default",
        "usable_cpus": cpus,
        "launcher": "srun",
        "environment": env,
        "fabric": fabric(mca),
    }
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


def run_launch(
    settings: MpiSettings,
    launch: Launch,
    seed: int,
    btl_shm: str,
    workdir: Path,
    out: TextIO,
    cluster: NetnsCluster | None = None,
    runner: Runner | None = None,
    cpus: int | None = None,
    launcher: str = "mpirun",
    group: MpiNodeGroup | None = None,
) -> dict[str, Any]:
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
    own_session_files = not remote and decided.get("launcher") != "srun"
    result = runner.run(
        argv,
        stdout_path,
        timeout=float(settings.timeout),
        error_line=mpi_error_line,
        # Here, mpirun, its daemons and PMIx keep their session files in the
        # launch's own directory (srun's PMIx is slurmstepd's; a node
        # reached over ssh has its own temporary directory).
        env={**_mpi_env(workdir if own_session_files else None), **decided.get("environment", {})},
        name=launch.label(),
    )
    record: dict[str, Any] = {
        "transport": launch.transport,
        "ranks": launch.ranks,
        "program": launch.program,
        "method": launch.method,
        "selection": launch.selection,
        "benches": launch.benches,
        "sizes": launch.sizes,
        "argv": result.argv,
        **decided,
        "seconds": round(result.seconds, 3),
    }
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


def _mpi_env(private_tmp: Path | None = None) -> dict[str, str]:
    """Variables a launch adds to the node's environment; ``private_tmp``: a
    directory of this user's alone (mode 0700) for Open MPI's session
    directory and PMIx's files, whose names in the shared temporary
    directory (``ompi.<host>.<uid>``, the netns hosts' names known in
    advance) another user could make first."""
    env = live.private_tmp_env(private_tmp) if private_tmp is not None else {}
    if os.geteuid() == 0:
        # Open MPI refuses root without these (plus --allow-run-as-root for mpirun).
        env.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"})
    return env
