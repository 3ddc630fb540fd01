"""The cheapest ring's server CPU per request over epoll's, under our load
generator and under one this project did not write, in the same rounds.

    python benchmarks/peer_client.py [--rounds N] [--duration S] [--connections 50,500]
                                     [--bytes B] [--a epoll] [--b defer_taskrun_multishot]
                                     [--our-client MODEL] [--layout pinned|shared]
                                     [--out DIR] [--from-cells CSV]

The other client is crates.io's ``tcp-echo-benchmark`` 0.1.0 (installed here
with ``cargo install --locked`` into native/build/peers on first use; Rust's
cargo must be on PATH). Like ours it is closed loop, one request in flight
per connection, TCP_NODELAY; unlike ours it runs each connection as a tokio
task that writes its message, then awaits the whole echo.

Each round measures, for each connection count and each client (in a random
order), one ABBA quartet of cells: A B B A, A the epoll server, B the ring
(``--bytes`` per request, ``--duration`` whole seconds a cell; server on CPU
0 and client on CPU 1, or with ``--layout shared`` neither pinned, as the
sources ran; ``--our-client thread-per-connection`` is the sources' model,
in which the claims' cells are measured). Server CPU per request is the server's CPU time over
the requests it echoed, whole life included, for either client. A quartet
gives log(B/A) with a linear drift cancelled; across rounds, its median and
95 % distribution-free interval (iolab.estimation.intervals.across_reps; at 6
rounds it runs from the smallest round to the largest). The two clients' ratios are compared round by round (their
quotient and its interval). What each client does is read from the same
cells: the server's waits per request and events per wait (how the client's
sends arrive in batches), and the client's CPU per request.

Writes DIR/cells.csv and DIR/summary.md; ``--from-cells`` prints the summary
of a cells.csv again without measuring. Run it on a quiet machine with the
native programs built (``make -C native``).
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import random
import re
import shutil
import statistics
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from iolab import config, paths
from iolab.cli import ints
from iolab.estimation.intervals import abba_log_ratio, across_reps
from iolab.experiments.echo import cell as echo_cell
from iolab.presets import preset_server
from iolab.runners import LocalRunner
from iolab.settings import EchoSetup

PEER_CRATE, PEER_VERSION = "tcp-echo-benchmark", "0.1.0"
PEER_ROOT = paths.NATIVE_BUILD / "peers"
CLIENTS = ("ours", "peer")
# The pinned layout: server on CPU 0, client on CPU 1 (shared: neither pinned).
PINNED = {"server": 0, "client": 1}
_TOTAL = re.compile(r"^Total: (\d+) requests, (\d+) responses$", re.M)


class PeerError(RuntimeError):
    pass


def ensure_peer(root: Path = PEER_ROOT) -> Path:
    """The peer client's binary, installed from crates.io (its own Cargo.lock) on first use."""
    exe = root / "bin" / PEER_CRATE
    stamp = root / ".crates.toml"
    if exe.is_file() and stamp.is_file() and f'"{PEER_CRATE} {PEER_VERSION} ' in stamp.read_text():
        return exe
    cargo = shutil.which("cargo")
    if cargo is None:
        raise PeerError(
            f"cargo is not on PATH: install Rust (https://rustup.rs) so that {PEER_CRATE} {PEER_VERSION} "
            "can be installed from crates.io"
        )
    argv = [cargo, "install", "--locked", "--quiet", "--version", PEER_VERSION, "--root", str(root), PEER_CRATE]
    res = subprocess.run(argv, capture_output=True, text=True, check=False)
    if res.returncode != 0 or not exe.is_file():
        last = (res.stderr.strip().splitlines() or ["no output"])[-1]
        raise PeerError(f"cargo install {PEER_CRATE} {PEER_VERSION} failed: {last}")
    return exe


def parse_peer(output: str) -> tuple[int, int]:
    """(requests written, responses read) from the peer's last report line."""
    m = _TOTAL.search(output)
    if not m:
        raise PeerError(f"{PEER_CRATE} printed no 'Total:' line: {output.strip()[-200:]!r}")
    return int(m.group(1)), int(m.group(2))


def run_peer(
    exe: Path, port: int, connections: int, size: int, duration: int, cpu: int | str | None
) -> dict[str, float]:
    """Drive a server with the peer client (pinned to ``cpu``, or not); its counts and CPU."""
    argv = [*(["taskset", "-c", str(cpu)] if cpu is not None else []), str(exe), "-a", f"127.0.0.1:{port}"]
    argv += ["-l", str(size), "-c", str(connections), "-t", str(duration)]
    with tempfile.TemporaryFile("w+") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, text=True)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read()
    if proc.returncode != 0:
        raise PeerError(f"{PEER_CRATE} exited with status {proc.returncode}: {text.strip()[-200:]!r}")
    requests, responses = parse_peer(text)
    return {
        "rps": responses / duration,
        "client_cpu_ns": (usage.ru_utime + usage.ru_stime) * 1e9,
        "client_switches": usage.ru_nvcsw + usage.ru_nivcsw,
        "client_requests": requests,
        "client_responses": responses,
    }


def peer_cell(cell: echo_cell.Cell, exe: Path, duration: int) -> dict[str, float]:
    """One cell under the peer client: the server's report merged with the client's."""
    runner = LocalRunner()
    placed = cell.placement(PINNED)
    proc, port = echo_cell.start_server(cell, placed["server"], runner)
    try:
        client = run_peer(exe, port, cell.connections, cell.bytes, duration, placed["client"])
    except PeerError:
        proc.kill()
        proc.wait()
        raise
    server = echo_cell.stop_server(proc, runner)
    return {
        **client,
        "server_cpu_ns": server["user_cpu_ns"] + server["sys_cpu_ns"],
        "server_bytes": server["bytes"],
        "waits": server["waits"],
        "events": server["events"],
    }


def our_cell(cell: echo_cell.Cell, duration: int, histogram: Path) -> dict[str, float]:
    got = echo_cell.measure_cell(cell, echo_cell.LoadgenRun(duration, 0.5), PINNED, histogram)
    return {**got, "client_switches": math.nan}


def per_request(got: dict[str, float], size: int) -> dict[str, float]:
    requests = got["server_bytes"] / size
    return {
        "server_ns": got["server_cpu_ns"] / requests,
        "client_ns": got["client_cpu_ns"] / requests,
        "waits_per_request": got["waits"] / requests,
        "events_per_wait": got["events"] / got["waits"] if got["waits"] else math.nan,
        "switches_per_request": got["client_switches"] / requests,
        "rps": got["rps"],
        # The counts behind them: what the server echoed, what the client read.
        "server_requests": requests,
        "client_responses": got.get("client_responses", got.get("requests", math.nan)),
        "client_requests": got.get("client_requests", math.nan),
    }


def interval(logs: Sequence[float]) -> tuple[float, float, float]:
    """exp of the median log ratio over rounds and of its 95 % interval, the
    one way the project computes every interval (a round is a repetition)."""
    e = across_reps(logs, predict=False)
    return math.exp(e.value), math.exp(e.low), math.exp(e.high)


def quartet_log_ratio(quartet: Sequence[dict], q: str) -> float:
    """log(B/A) of ``q`` over an ABBA quartet's cells, in order."""
    return abba_log_ratio(*(x[q] for x in quartet))


def quartet_logs(cells: list[dict], q: str) -> dict[tuple[int, str], dict[int, float]]:
    """(connections, client) -> round -> the quartet's log(B/A) of ``q``."""
    keyed: dict[tuple[int, str, int], list[dict]] = {}
    for x in cells:
        keyed.setdefault((x["connections"], x["client"], x["round"]), []).append(x)
    logs: dict[tuple[int, str], dict[int, float]] = {}
    for (c, client, r), quartet in keyed.items():
        logs.setdefault((c, client), {})[r] = quartet_log_ratio(sorted(quartet, key=lambda x: x["position"]), q)
    return logs


def ratios(logs: dict[tuple[int, str], dict[int, float]], c: int) -> list[tuple[str, int, float, float, float]]:
    """Each client's (client, rounds, ratio, low, high) at ``c``, then the peer's
    over ours from the rounds both measured ("peer / ours")."""
    out = []
    for client in CLIENTS:
        got = logs.get((c, client), {})
        if got:
            out.append((client, len(got), *interval(list(got.values()))))
    ours, peer = logs.get((c, "ours"), {}), logs.get((c, "peer"), {})
    rounds = sorted(set(ours) & set(peer))
    if rounds:
        out.append(("peer / ours", len(rounds), *interval([peer[r] - ours[r] for r in rounds])))
    return out


def requests_block(cells: list[dict], connections: list[int]) -> list[str]:
    """The same comparison for requests/s, which the claims in the sources' setup read."""
    logs = quartet_logs(cells, "rps")
    lines = [
        "",
        "Requests/s, B over A, the same quartets:",
        "",
        "| c | quantity | client | rounds | ratio | 95 % interval |",
    ]
    lines.append("|---|---|---|---|---|---|")
    for c in connections:
        for who, n, ratio, low, high in ratios(logs, c):
            lines.append(f"| {c} | requests/s | {who} | {n} | {ratio:.3f} | {low:.3f}–{high:.3f} |")
    return lines


def summarise(cells: list[dict], a: str, b: str) -> str:
    # Files from before the setup was recorded: our event loop, pinned.
    our_model = next((str(x.get("model", "event-loop")) for x in cells if x["client"] == "ours"), "event-loop")
    lines = [
        f"{b} / {a}, server CPU per request; median over rounds of each ABBA quartet's ratio, "
        "95 % distribution-free interval",
        f"(ours: loadgen's {our_model} client; {cells[0].get('layout', 'pinned')} CPUs)",
        "",
        "| c | client | rounds | ratio | 95 % interval |",
        "|---|---|---|---|---|",
    ]
    connections = sorted({x["connections"] for x in cells})
    logs = quartet_logs(cells, "server_ns")
    by_c = {c: ratios(logs, c) for c in connections}
    for c in connections:
        for who, n, ratio, low, high in by_c[c]:
            if who in CLIENTS:
                lines.append(f"| {c} | {who} | {n} | {ratio:.3f} | {low:.3f}–{high:.3f} |")
    lines += [
        "",
        "The peer's ratio over ours, round by round:",
        "",
        "| c | rounds | quotient | 95 % interval | agree |",
    ]
    lines.append("|---|---|---|---|---|")
    for c in connections:
        for who, n, q, low, high in by_c[c]:
            if who not in CLIENTS:
                agree = "yes" if low <= 1 <= high else "no"
                lines.append(f"| {c} | {n} | {q:.3f} | {low:.3f}–{high:.3f} | {agree} |")
    lines += requests_block(cells, connections)
    lines += [
        "",
        "What each client does (medians over cells): the server's waits per request and events per wait,",
        "the client's CPU per request (and its context switches per request, where measured)",
        "",
        "| c | client | server | requests/s | server ns/req | waits/req | events/wait | client ns/req | switches/req |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for c in connections:
        for client in CLIENTS:
            for preset in (a, b):
                rows = [x for x in cells if (x["connections"], x["client"], x["preset"]) == (c, client, preset)]
                if not rows:
                    continue
                med = {k: statistics.median(x[k] for x in rows) for k in rows[0] if k in MEASURES}
                switches = "—" if math.isnan(med["switches_per_request"]) else f"{med['switches_per_request']:.4f}"
                lines.append(
                    f"| {c} | {client} | {preset} | {med['rps']:,.0f} | {med['server_ns']:,.0f} | "
                    f"{med['waits_per_request']:.3f} | {med['events_per_wait']:.2f} | "
                    f"{med['client_ns']:,.0f} | {switches} |"
                )
    return "\n".join(lines) + "\n"


TEXT_COLUMNS = ("client", "preset", "model", "layout")
MEASURES = ("server_ns", "client_ns", "waits_per_request", "events_per_wait", "switches_per_request", "rps")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--duration", type=int, default=2, help="whole seconds per cell (the peer takes whole seconds)")
    parser.add_argument("--connections", type=ints, default=[50, 500])
    parser.add_argument("--bytes", type=int, default=128)
    parser.add_argument("--a", default="epoll", help="preset A (the denominator)")
    parser.add_argument("--b", default="defer_taskrun_multishot", help="preset B (the numerator)")
    parser.add_argument(
        "--our-client", choices=EchoSetup.client_models(), default="event-loop", help="our load generator's model"
    )
    parser.add_argument("--layout", choices=EchoSetup.layouts(), default="pinned", help="CPUs pinned apart or not")
    parser.add_argument("--out", type=Path, default=paths.REPO / "results" / "peer-client")
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--from-cells", type=Path, help="summarise this cells.csv again instead of measuring")
    args = parser.parse_args()
    if args.from_cells:
        with args.from_cells.open() as f:
            rows = list(csv.DictReader(f))
        if not rows:
            parser.error(f"--from-cells {args.from_cells}: no cells")
        ints_of = ("round", "connections", "position")
        saved = [
            {k: int(v) if k in ints_of else v if k in TEXT_COLUMNS else float(v) for k, v in r.items()} for r in rows
        ]
        order = list(dict.fromkeys(str(r["preset"]) for r in sorted(saved, key=lambda r: r["position"])))
        print(summarise(saved, order[0], order[1]), end="")
        return
    if args.duration < 1:
        parser.error(f"--duration {args.duration}: {PEER_CRATE} measures whole seconds; give 1 or more")
    presets = config.load()["experiments"]["echo"]["presets"]
    for name in (args.a, args.b):
        if name not in presets:
            parser.error(f"preset {name!r} is not in experiments.echo.presets; choose one of {', '.join(presets)}")
    try:
        exe = ensure_peer()
    except PeerError as e:
        parser.exit(1, f"peer_client.py: {e}\n")
    flags = {name: preset_server(name, presets[name])[1] for name in (args.a, args.b)}
    rng = random.Random(args.seed)
    cells: list[dict] = []
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(1, args.rounds + 1):
            blocks = [(c, client) for c in args.connections for client in CLIENTS]
            rng.shuffle(blocks)
            for c, client in blocks:
                for position, preset in enumerate((args.a, args.b, args.b, args.a)):
                    cell = echo_cell.Cell(preset, flags[preset], c, args.bytes, args.our_client, layout=args.layout)
                    try:
                        got = (
                            peer_cell(cell, exe, args.duration)
                            if client == "peer"
                            else our_cell(cell, args.duration, Path(tmp) / "h.csv")
                        )
                    except (PeerError, echo_cell.CellError) as e:
                        parser.exit(1, f"peer_client.py: round {r}, {cell.label()} under {client}: {e}\n")
                    row = {"round": r, "connections": c, "client": client, "position": position, "preset": preset}
                    row |= {"model": PEER_CRATE if client == "peer" else cell.client, "layout": cell.layout}
                    cells.append({**row, **per_request(got, args.bytes)})
            print(f"round {r}/{args.rounds} measured", flush=True)
    with (args.out / "cells.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(cells[0]))
        w.writeheader()
        w.writerows(cells)
    summary = summarise(cells, args.a, args.b)
    (args.out / "summary.md").write_text(summary)
    print(summary, end="")


if __name__ == "__main__":
    main()
