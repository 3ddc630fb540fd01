"""perftest's ib_send_lat and ib_send_bw between two ends of an RDMA device,
as HPC HUB measured M1's latency and bandwidth: the commands, the parser of
their tables, and the device facts recorded with them.

Both programs print a settings block ("Device : mlx4_0", "Link type : IB",
...) and then one table row per message size (``-a``: 2 B to 8 MiB). The
parser keeps every column under a stable name, and the settings verbatim.

``guest.py`` runs both ends in one QEMU guest over soft-RoCE, to test
this path on machines without RDMA hardware.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ... import atomic, readers
from ...formats import IB_COLUMNS, raw_format_line
from ...registry import REGISTRY
from ...runners import RunError, runner_for
from ...settings import IbSettings
from .. import Measured, Repetition, settings_of

PROGRAMS = ("ib_send_lat", "ib_send_bw")
# perftest's column headers -> ours.
COLUMNS = {
    "#bytes": "bytes",
    "#iterations": "iterations",
    "t_min[usec]": "t_min_us",
    "t_max[usec]": "t_max_us",
    "t_typical[usec]": "t_typical_us",
    "t_avg[usec]": "t_avg_us",
    "t_stdev[usec]": "t_stdev_us",
    "99% percentile[usec]": "p99_us",
    "99.9% percentile[usec]": "p999_us",
    "BW peak[MB/sec]": "bw_peak_mb_s",
    "BW average[MB/sec]": "bw_average_mb_s",
    "MsgRate[Mpps]": "msg_rate_mpps",
}
_HEADER_TOKEN = re.compile(r"\d+(?:\.\d+)?% percentile\[[^\]]+\]|BW (?:peak|average)\[[^\]]+\]|\S+")
_SETTING = re.compile(r"([A-Za-z][A-Za-z0-9 ./_*-]*?)\s*:\s*(\S[^\t]*?)\s*(?=\t|$)")


class PerftestError(ValueError):
    """perftest's output holds no result table; one line says why."""


@dataclass
class PerftestResult:
    program: str
    settings: dict[str, str]  # the settings block, as printed
    table: pd.DataFrame  # one row per message size
    warnings: list[str] = field(default_factory=list)  # the client's stderr, where kept apart


def parse(program: str, text: str) -> PerftestResult:
    """One run's output (the client's or the server's)."""
    lines = text.splitlines()
    header_at = next((i for i, ln in enumerate(lines) if ln.strip().startswith("#bytes")), None)
    if header_at is None:
        last = next((ln.strip() for ln in reversed(lines) if ln.strip()), "no output")
        raise PerftestError(f"{program} printed no result table: {last}")
    settings: dict[str, str] = {}
    for ln in lines[:header_at]:
        # The address blocks (local/remote LID, QPN, GID) describe one run's
        # queue pairs, not its settings.
        if ln.strip().startswith(("-", "GID:")) or "address:" in ln:
            continue
        for key, value in _SETTING.findall(ln):
            settings.setdefault(key.strip(), value.strip())
    names = _HEADER_TOKEN.findall(lines[header_at])
    unknown = [n for n in names if n not in COLUMNS]
    if unknown:
        raise PerftestError(f"{program}: unknown column {unknown[0]!r} in its table header")
    rows = []
    for ln in lines[header_at + 1 :]:
        cells = ln.split()
        if not cells or ln.strip().startswith("-"):
            break
        if len(cells) != len(names):
            raise PerftestError(f"{program}: a row has {len(cells)} values for {len(names)} columns: {ln.strip()}")
        rows.append([float(c) for c in cells])
    if not rows:
        raise PerftestError(f"{program}: the result table is empty")
    table = pd.DataFrame(rows, columns=[COLUMNS[n] for n in names])
    table = table.astype({"bytes": int, "iterations": int})
    # perftest prints inf (or nan) where its cycle-counter clock failed, as in
    # an emulated guest's largest messages: not a measurement, so missing,
    # and said so.
    values = table.drop(columns=["bytes", "iterations"])
    bad = ~np.isfinite(values)
    notes = [
        f"{program} printed {', '.join(f'{c}={row[c]}' for c in values.columns[bad.loc[i].to_numpy()])} "
        f"at {int(row['bytes'])} B: kept as missing"
        for i, row in table.iterrows()
        if bad.loc[i].any()
    ]
    table[values.columns] = values.mask(bad)
    return PerftestResult(program, settings, table, notes)


def tidy(results: Sequence[PerftestResult], context: Mapping[str, Any]) -> pd.DataFrame:
    """Both programs' tables as one tidy table: program, size, metric, value,
    with ``context`` (node, device, ...) on every row."""
    frames = []
    for r in results:
        long = r.table.melt(id_vars=["bytes", "iterations"], var_name="metric", value_name="value")
        frames.append(long.assign(program=r.program, **context))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


# --- device facts ----------------------------------------------------------------

# Per device under /sys/class/infiniband, and per port of it.
DEVICE_FILES = ("node_type", "fw_ver", "hca_type", "board_id", "node_desc")
PORT_FILES = ("rate", "state", "phys_state", "link_layer")

FACTS_SCRIPT = """for d in /sys/class/infiniband/*; do
  [ -e "$d" ] || continue
  n=${d##*/}
  for f in DEVICE_FILES; do [ -r "$d/$f" ] && echo "$n $f $(cat "$d/$f")"; done
  for p in "$d"/ports/*; do
    for f in PORT_FILES; do [ -r "$p/$f" ] && echo "$n port${p##*/}.$f $(cat "$p/$f")"; done
  done
done
""".replace("DEVICE_FILES", " ".join(DEVICE_FILES)).replace("PORT_FILES", " ".join(PORT_FILES))


def parse_facts(text: str) -> dict[str, dict[str, str]]:
    """``FACTS_SCRIPT``'s output: device -> {file: value}."""
    out: dict[str, dict[str, str]] = {}
    for ln in text.splitlines():
        parts = ln.split(" ", 2)
        if len(parts) == 3:
            out.setdefault(parts[0], {})[parts[1]] = parts[2].strip()
    return out


# --- the ib experiment: client on the node, server on its ib.peer ---------------

RAW_COLUMNS = IB_COLUMNS


def first_device(facts: Mapping[str, Mapping[str, str]]) -> str | None:
    """The first RDMA device with an active port, else the first at all."""
    active = [d for d, f in facts.items() if any(k.endswith(".state") and "ACTIVE" in v for k, v in f.items())]
    candidates = active or sorted(facts)
    return candidates[0] if candidates else None


def device_facts(runner: Any) -> dict[str, dict[str, str]]:
    res = runner.shell(FACTS_SCRIPT, timeout=60)
    return parse_facts(res.stdout) if res.returncode == 0 else {}


def argv(program: str, device: str, settings: IbSettings, server: str | None = None) -> list[str]:
    """One end's command, over every size from 2 B to 8 MiB (``-a``);
    ``server``: the client's target."""
    args = [program, "-d", device, "-n", str(settings.iterations), "-F"]
    if settings.gid_index is not None:
        args += ["-x", str(settings.gid_index)]
    args += ["-a"]
    return args + ([server] if server else [])


def run_experiment(
    settings: IbSettings,
    node: str,
    node_runner: Any,
    peer: str,
    peer_runner: Any,
    peer_address: str,
    output: Path,
    transcript: Path,
) -> dict[str, Any]:
    """Both programs, the server on the peer and the client here; the raw
    CSV (one row per program, size and metric) into ``output`` and both
    ends' output verbatim into ``transcript``. Without a device on either
    side, both files say why and hold no rows (not an error)."""
    here, there = device_facts(node_runner), device_facts(peer_runner)
    missing = [n for n, f in ((node, here), (peer, there)) if not f]
    with open(output, "w") as out, open(transcript, "w") as log:
        out.write(raw_format_line(REGISTRY["ib"].raw_format))
        if missing:
            reason = (
                f"no RDMA device under /sys/class/infiniband on {' or '.join(missing)} "
                "(InfiniBand or RoCE hardware, or rdma_rxe, is needed)"
            )
            out.write(f"# skipped={reason}\n" + ",".join(RAW_COLUMNS) + "\n")
            log.write(f"skipped: {reason}\n")
            return {"ib": {"available": False, "reason": reason}}
        device = settings.device or first_device(here)
        peer_device = settings.device or first_device(there)
        assert device and peer_device  # both fact maps are non-empty here
        out.write(",".join(RAW_COLUMNS) + "\n")
        commands = {}
        for program in PROGRAMS:
            server_argv = argv(program, peer_device, settings)
            client_argv = argv(program, device, settings, peer_address)
            client_out = _client_against_server(
                program, node_runner, peer_runner, server_argv, client_argv, float(settings.timeout), output.parent
            )
            log.write(f"=== {program} client on {node}: {' '.join(client_argv)}\n{client_out}\n")
            result = parse(program, client_out)
            for row in result.table.melt(id_vars=["bytes", "iterations"], var_name="metric").itertuples(index=False):
                out.write(f"{program},{row.bytes},{row.iterations},{row.metric},{row.value!r}\n")
            commands[program] = {"client": client_argv, "server": server_argv, "settings": result.settings}
    return {
        "ib": {
            "available": True,
            "device": {node: {"name": device, **here[device]}, peer: {"name": peer_device, **there[peer_device]}},
            "peer": peer,
            "peer_address": peer_address,
            "runs": commands,
        }
    }


def _client_against_server(
    program: str,
    node_runner: Any,
    peer_runner: Any,
    server_argv: list[str],
    client_argv: list[str],
    timeout: float,
    workdir: Path,
) -> str:
    """Start the server end on the peer, then the client here; the client
    retries while the server is not listening yet (perftest's client gives
    up at once)."""
    server = peer_runner.popen(server_argv)
    try:
        stdout_path = workdir / f".{program}.client.txt"
        last_error = ""
        for _ in range(20):
            try:
                node_runner.run(client_argv, stdout_path, timeout=timeout, name=f"{program} client")
                return stdout_path.read_text()
            except RunError as e:
                last_error = str(e)
                if server.poll() is not None:
                    err = (server.stderr.read() if server.stderr else "").strip().splitlines()
                    raise RunError(f"{program} server on the peer exited: {(err or ['no output'])[-1]}") from e
                if "connect" not in last_error.lower():
                    raise
                time.sleep(0.5)
        raise RunError(f"{program} client could not reach its server: {last_error}")
    finally:
        if server.poll() is None:
            peer_runner.terminate(server)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()


def run_repetition(rep: Repetition) -> Measured:
    """perftest with the client on the node and the server on its ib.peer."""
    if len(rep.peer_entries) != 1:
        raise RunError(f"ib on {rep.node.name}: the server end runs on the node's ib.peer (pass it with --peer-nodes)")
    peer = rep.peer_entries[0]
    with (
        runner_for(peer).session(()) as peer_runner,
        atomic.atomic_path(rep.output.with_name(rep.output.stem + ".perftest.txt")) as transcript,
    ):
        extra = run_experiment(
            settings_of(rep, IbSettings),
            rep.node.name,
            rep.runner,
            peer.name,
            peer_runner,
            str(peer.reach),
            rep.raw,
            transcript,
        )
    frame = readers.read_ib_csv(rep.raw)
    summary = (
        f"skipped: {extra['ib']['reason']}"
        if not extra["ib"]["available"]
        else f"{frame['bytes'].nunique()} sizes, {len(frame)} values"
    )
    return Measured(extra, ["ib_send_lat/ib_send_bw -a", f"(server on {peer.name})"], summary, {"peer": peer.name})
