"""Numbers quoted from the source articles (shared/seeds/), in one place.

The paper shows these beside our measurements, always labelled as quoted.
Nothing here is a measurement of ours.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Quoted:
    """A figure as the source prints it: ``text`` keeps its significant digits."""

    text: str
    unit: str
    source: str
    setup: str

    @property
    def value(self) -> float:
        return float(self.text.replace(" ", ""))

    @property
    def number(self) -> str:
        """The printed figure, thousands separated by thin spaces."""
        whole, _, frac = self.text.replace(" ", "").partition(".")
        return f"{int(whole):,}".replace(",", "\u2009") + (f".{frac}" if frac else "")

    @property
    def display(self) -> str:
        """``number`` with its unit."""
        return self.number + (f" {self.unit}" if self.unit else "")


OPENANOLIS = "OpenAnolis io_uring vs epoll cost study (seed 003)"
HPCHUB = "HPC HUB virtual cluster study (seed 004)"

QUOTED: dict[str, Quoted] = {
    "c1_s_mitigations_on_ns": Quoted(
        "700", "ns", OPENANOLIS, "s with CPU mitigations on; Xeon E5-2682 v4, measured by a dedicated program"
    ),
    "c1_s_mitigations_off_ns": Quoted("230", "ns", OPENANOLIS, "s with CPU mitigations off; Xeon E5-2682 v4"),
    "c1_w_ns": Quoted(
        "1500",
        "ns",
        OPENANOLIS,
        "w, kernel work of one send/recv, 16 B (bpftrace kprobes on __sys_sendto/__sys_recvfrom)",
    ),
    "c1_t1_ns": Quoted("1900", "ns", OPENANOLIS, "t at n = 1 (bpftrace kprobe on io_submit_sqes, per SQE)"),
    "m1_latency_native_us": Quoted(
        "0.83", "µs", HPCHUB, "ib_send_lat small-message latency, bare metal, ConnectX-3 FDR InfiniBand"
    ),
    "m1_latency_vm_us": Quoted("1.10", "µs", HPCHUB, "ib_send_lat latency between KVM guests with SR-IOV VFs"),
    "m1_latency_ratio": Quoted("0.75", "", HPCHUB, "native/VM ib_send_lat latency"),
    "m1_bandwidth_ratio": Quoted("0.99", "", HPCHUB, "VM/native ib_send_bw bandwidth (6053.6 vs 6116.4 MB/s)"),
    "m2_bcast_worst_ratio": Quoted(
        "0.55", "", HPCHUB, "native/VM bcast time, worst (16-32 KB), 2 nodes x 20 ranks, OpenMPI 1.10, OSU 5.3.1"
    ),
    "m2_allreduce_worst_ratio": Quoted("0.7", "", HPCHUB, "native/VM allreduce time, worst"),
    "m2_alltoall_worst_ratio": Quoted("0.87", "", HPCHUB, "native/VM alltoall time, worst"),
    "m2_bcast_mostly": Quoted("0.8", "", HPCHUB, "native/VM bcast time ratio at most sizes (\u2265 0.8 mostly)"),
    "m2_allreduce_mostly": Quoted(
        "0.8", "", HPCHUB, "native/VM allreduce time ratio at most sizes (\u2265 0.8 mostly)"
    ),
    "m2_alltoall_mostly": Quoted(
        "0.88", "", HPCHUB, "native/VM alltoall time ratio at most sizes (\u2265 0.88 mostly)"
    ),
    "m2_mean_penalty": Quoted("0.20", "", HPCHUB, "average VM time penalty over collectives"),
    "u1_uring_c50_128": Quoted(
        "249297", "", "Habr io_uring part 1 (seed 002)", "io_uring echo req/s, c = 50, 128 B, i5-7500, Linux 5.11"
    ),
    "u1_epoll_c50_128": Quoted(
        "223135", "", "Habr io_uring part 1 (seed 002)", "epoll echo req/s, c = 50, 128 B, i5-7500, Linux 5.11"
    ),
}

# Requests/s from the Habr io_uring series, as printed (rust_echo_bench, 60 s,
# i5-7500, Linux 5.11). Keys: (connections, bytes).
U1_RPS: dict[str, dict[tuple[int, int], float]] = {
    "io_uring": {
        (50, 128): 249297,
        (50, 512): 252822,
        (500, 128): 193452,
        (500, 512): 179966,
        (1000, 128): 158911,
        (1000, 512): 163111,
    },
    "epoll": {
        (50, 128): 223135,
        (50, 512): 227143,
        (500, 128): 173357,
        (500, 512): 173772,
        (1000, 128): 156449,
        (1000, 512): 155492,
    },
}

# Part 3's reactor benchmark (Go). The article's printed header is garbled
# ("c: 100 bytes: 128 | c: 50 bytes: 1024 | c: 500 bytes: 128 | c: 1000 bytes: 128 |
# c: 1000 bytes: 128 | c: 1000 bytes: 1024": c = 50 and a repeated label). The
# article links go-uring's example/echo-server-multi-thread/Benchmark.md as
# "the full description of the testing": "5 runs for each combination of 128
# and 1024 bytes message size with 100, 500 and 1000 clients", and its own
# table's header is {100, 500, 1000} x {128, 1024} in that order, with the
# same net/http row as the article (132 664 ... 139 617). Those are the cells.
U2_COLUMNS = ["c=100 128 B", "c=100 1024 B", "c=500 128 B", "c=500 1024 B", "c=1000 128 B", "c=1000 1024 B"]
U2_RPS: dict[str, list[float]] = {
    "net/http (epoll netpoller)": [132664, 139206, 133039, 139171, 133480, 139617],
    "go-uring reactor": [34202, 33159, 147362, 139313, 158483, 154194],
    "go-uring reactor, SQ_POLL": [24406, 22847, 134863, 130668, 127896, 122601],
}


def cell_of(label: str) -> tuple[int, int]:
    c, b = label.replace("c=", "").replace(" B", "").split()
    return int(c), int(b)


def quoted_ratio(claim: str, connections: int, bytes_: int) -> str:
    """The source's own ratio in a cell we also measured, as printed from its
    tables ("" where the source has no such cell): U1 io_uring/epoll (part 1),
    U2 reactor/net (part 3), U3 SQ_POLL reactor/reactor (part 3)."""
    if claim == "U1":
        u, e = U1_RPS["io_uring"].get((connections, bytes_)), U1_RPS["epoll"].get((connections, bytes_))
        if u is None or e is None:
            return ""
        return f"{u / e:.2f} ({u:,.0f}/{e:,.0f})".replace(",", "\u2009")
    rows = {
        "U2": ("go-uring reactor", "net/http (epoll netpoller)"),
        "U3": ("go-uring reactor, SQ_POLL", "go-uring reactor"),
    }.get(claim)
    if rows is None:
        return ""
    for i, label in enumerate(U2_COLUMNS):
        if cell_of(label) == (connections, bytes_):
            num, den = U2_RPS[rows[0]][i], U2_RPS[rows[1]][i]
            return f"{num / den:.2f} ({num:,.0f}/{den:,.0f})".replace(",", "\u2009")
    return ""


# How each source measured, as its text says (DESIGN.md, claims table), for
# the paper's "setup compared" table; "not stated" where the source is silent.
@dataclass(frozen=True)
class SourceSetup:
    system: str
    hardware: str
    kernel: str
    client: str
    layout: str
    cells: str
    duration: str = "not stated"


_OPENANOLIS_HW = "Xeon E5-2682 v4 2.50 GHz"
_PART3 = SourceSetup(
    "Go io_uring reactor (rings = 2 x cores - 2, fd -> ring granule 75) against Go's net package; per "
    "go-uring's Benchmark.md and example server: 6 rings, 2 shared worker pools, GOMAXPROCS = 2 x NumCPU "
    "in the io_uring modes only, SQ_POLL mode with 2 rings; its net server took each connection's "
    "File().Fd(), which makes the socket blocking",
    "i5-7500, 4 cores (per Benchmark.md: in a VirtualBox VM)",
    "5.16 (per Benchmark.md)",
    "rust_echo_bench (thread per connection) on the same VM; per Benchmark.md 5 runs per cell "
    "(the statistic is not stated)",
    "not stated; client and server on one VM, so we infer nothing pinned",
    "c 100/500/1000 x 128/1024 B (cells per Benchmark.md; the article's header is garbled)",
    "60 s per run (per Benchmark.md)",
)
SOURCE_SETUPS: dict[str, SourceSetup] = {
    "C1": SourceSetup(
        "s: a dedicated program (not shown); w, t: bpftrace kprobes on __sys_sendto/__sys_recvfrom "
        "and io_submit_sqes (t per SQE) in single-threaded C echo servers",
        _OPENANOLIS_HW,
        "not stated",
        "not stated (about 1000 TPS)",
        "not stated",
        "1 connection, 16 B",
        "bpftrace printed every 5 s, 13-17 intervals",
    ),
    "C2": SourceSetup(
        "the cost model epoll = s + w, io_uring = (t + s)/n, with C1's values",
        _OPENANOLIS_HW,
        "not stated",
        "-",
        "-",
        "model only",
    ),
    "C3": SourceSetup(
        "single-threaded C echo servers: io_uring with SEND and RECV completing in "
        "io_submit_sqes (its 'multi-shot mode', no task work), no io-wq, against epoll",
        _OPENANOLIS_HW,
        "not stated",
        "not stated",
        "not stated",
        "1000 connections",
    ),
    "U1": SourceSetup(
        "C echo servers on liburing (default ring) and on epoll",
        "i5-7500, 4 cores, 16 GB",
        "5.11",
        "rust_echo_bench (thread per connection)",
        "not stated; one machine, so we infer nothing pinned",
        "c 50/500/1000 x 128/512 B",
        "60 s per cell",
    ),
    "U2": _PART3,
    "U3": _PART3,
    "C4": SourceSetup(
        "the cost model's conclusion: if w is large, io_uring and epoll are close",
        _OPENANOLIS_HW,
        "not stated",
        "-",
        "-",
        "model only",
    ),
    "C5": SourceSetup(
        "the cost model's conclusion: which of io_uring and epoll wins is decided by s, w, t and n",
        _OPENANOLIS_HW,
        "not stated",
        "-",
        "-",
        "model only",
    ),
    "U4": SourceSetup(
        "the part 3 reactor with each ring option",
        "i5-7500, 4 cores, in a VirtualBox VM",
        "5.16",
        "rust_echo_bench",
        "not stated",
        "the author's opinion, no table",
    ),
    "U5": SourceSetup(
        "the part 3 reactor's design: rings = 2 x cores - 2, fd -> ring granule 75, several "
        "rings rather than one with IOSQE_ASYNC, shared io-wq pools (ATTACH_WQ)",
        "i5-7500, 4 cores, in a VirtualBox VM",
        "5.16",
        "rust_echo_bench",
        "not stated",
        "the author's opinion, no table",
    ),
    "U6": SourceSetup(
        "the author's reply under part 1: 'ps auxf | grep io_wqe_' shows the workers of a ring without SQPOLL",
        "i5-7500, 4 cores, 16 GB",
        "5.11",
        "-",
        "-",
        "a comment, no measurement",
    ),
    "M1": SourceSetup(
        "perftest ib_send_lat/ib_send_bw, bare metal against KVM guests with SR-IOV VFs",
        "ConnectX-3 FDR InfiniBand",
        "not stated",
        "-",
        "one process per node",
        "perftest -a",
        "perftest's defaults",
    ),
    "M2": SourceSetup(
        "OSU 5.3.1 bcast/allreduce/alltoall, Open MPI 1.10 default algorithms, mean of the 3 smallest of 10-20 runs",
        "2 nodes per kind, ConnectX-3 FDR, SR-IOV, KVM",
        "not stated",
        "-",
        "20 ranks per node",
        "OSU's sizes",
        "10-20 runs per size",
    ),
    "M3": SourceSetup(
        "OSU 5.3.1 collectives and perftest, bare metal against KVM guests with SR-IOV VFs",
        "2 nodes per kind, ConnectX-3 FDR, SR-IOV, KVM",
        "not stated",
        "-",
        "20 ranks per node",
        "OSU's sizes",
        "10-20 runs per size",
    ),
}
