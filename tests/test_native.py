"""The native programs: strict flags, documented help, stable raw schema,
and clean sanitizer builds."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from iolab import readers
from iolab.rooms.send_zc import tidy as send_zc_tidy

FLAGS = [
    "--batches",
    "--warmup-batches",
    "--batch-us",
    "--calls-per-batch",
    "--variants",
    "--seed",
    "--cpu",
    "--output",
    "--help",
    "--transports",
    "--ops",
    "--patterns",
    "--ack-modes",
    "--bytes",
    "--connections",
    "--presets",
    "--n",
    "--max-not-inline",
    "--starve",
    "--defaults",
]


def run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


def test_help_documents_every_flag(native_build: Path) -> None:
    res = run([str(native_build / "cost-probe"), "--help"])
    assert res.returncode == 0
    for flag in FLAGS:
        assert flag in res.stdout, flag
    src = (native_build.parent / "probes" / "cost_probe.c").read_text()
    declared = set(re.findall(r'\{ "([a-z-]+)", (?:required|no)_argument', src))
    assert {f"--{d}" for d in declared} == set(FLAGS)


@pytest.mark.parametrize(
    "argv,message",
    [
        (["syscall", "--batches", "x"], "--batches: 'x' is not an integer"),
        (["syscall", "--batches", "0"], "--batches: 0 is out of range"),
        (["syscall", "--variants", "fork"], "--variants: unknown value 'fork'"),
        (["warp"], "unknown mode 'warp'"),
        (["syscall", "--presets", "default"], "--presets does not apply to mode syscall"),
        (["sendrecv", "--bytes", "16,x"], "--bytes: 'x' is not an integer"),
        (["uring-batch", "--n", "0"], "--n: 0 is out of range"),
        (["uring-batch", "--max-not-inline", "1.5"], "--max-not-inline: '1.5' is not a fraction"),
        # NaN compares false with both ends of the range: it would switch the check off.
        (["uring-batch", "--max-not-inline", "nan"], "--max-not-inline: 'nan' is not a fraction"),
        (["nop", "--presets", "sqpoll"], "no usable ring preset"),
        (["send-zc", "--variants", "sendfile"], "--variants: unknown value 'sendfile'"),
        (["send-zc", "--bytes", "65536", "--calls-per-batch", "32"], "exceeds the 1 MiB a batch may queue"),
        (["send-zc", "--n", "4"], "--n does not apply to mode send-zc"),
        ([], "missing MODE"),
        (["syscall", "--cpu", "1000"], "--cpu 1000: cannot pin"),
        (["syscall", "--output", "/nonexistent/dir/x.csv"], "--output /nonexistent/dir/x.csv"),
        # A full disk: the raw writer names the file once, and the status is not 0.
        (
            ["syscall", "--batches", "1", "--warmup-batches", "0", "--output", "/dev/full"],
            "cost-probe: writing /dev/full: No space left on device",
        ),
    ],
)
def test_bad_input_is_one_line_and_nonzero(native_build: Path, argv: list[str], message: str) -> None:
    res = run([str(native_build / "cost-probe"), *argv])
    assert res.returncode != 0
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], res.stderr


@pytest.mark.parametrize("build", ["", "san"])
def test_syscall_output_schema_parses(native_build: Path, tmp_path: Path, build: str) -> None:
    exe = native_build / build / "cost-probe"
    out = tmp_path / "raw.csv"
    res = run([str(exe), "syscall", "--batches", "20", "--warmup-batches", "3", "--cpu", "0", "--output", str(out)])
    assert res.returncode == 0, res.stderr  # sanitizers abort with a report otherwise
    frame = readers.read_raw_csv(out)
    assert list(frame.columns) == readers.PROBE_COLUMNS
    assert len(frame) == 2 * 23
    assert frame.groupby("variant")["warmup"].sum().to_dict() == {"enosys": 3, "getppid": 3}
    assert set(frame["cpu"]) == {0}
    meta = readers.read_metadata(out)
    assert float(meta["timer_overhead_ns"]) > 0
    # Timer overhead under 5 % of every batch, as the probe promises.
    assert (frame["ns"] * 0.05 > float(meta["timer_overhead_ns"])).all()


def test_run_order_is_randomised_and_seeded(native_build: Path) -> None:
    def order(seed: str) -> list[str]:
        res = run(
            [
                str(native_build / "cost-probe"),
                "syscall",
                "--batches",
                "30",
                "--warmup-batches",
                "0",
                "--calls-per-batch",
                "10",
                "--seed",
                seed,
            ]
        )
        return [ln.split(",")[1] for ln in res.stdout.splitlines() if ln.startswith("syscall,")]

    a, b, c = order("7"), order("7"), order("8")
    assert a == b and a != c
    assert a != sorted(a)


@pytest.mark.parametrize("build", ["", "san"])
def test_sendrecv_covers_every_factor(native_build: Path, tmp_path: Path, build: str) -> None:
    out = tmp_path / "sr.csv"
    res = run(
        [
            str(native_build / build / "cost-probe"),
            "sendrecv",
            "--batches",
            "4",
            "--warmup-batches",
            "1",
            "--bytes",
            "16,512",
            "--connections",
            "8",
            "--calls-per-batch",
            "8",
            "--output",
            str(out),
        ]
    )
    assert res.returncode == 0, res.stderr
    frame = readers.read_raw_csv(out)
    cells = frame.groupby(["transport", "variant", "pattern", "ack", "bytes"]).size()
    # TCP: 2 ops x 2 patterns x 2 ACK regimes x 2 sizes; UNIX has no ACK regimes.
    assert len(cells) == 16 + 8 and (cells == 5).all()
    rr = frame[(frame["pattern"] == "roundrobin") & (frame["variant"] == "recv")]
    assert (rr["emptied"] == rr["calls"]).all() and (rr["calls"] == 8).all()
    single = frame[(frame["pattern"] == "single") & (frame["variant"] == "recv")]
    assert (single["emptied"] == 1).all()


@pytest.mark.parametrize("build", ["", "san"])
def test_uring_batch_completes_inline_and_reports_sqpoll(native_build: Path, tmp_path: Path, build: str) -> None:
    out = tmp_path / "ub.csv"
    res = run(
        [
            str(native_build / build / "cost-probe"),
            "uring-batch",
            "--batches",
            "4",
            "--warmup-batches",
            "1",
            "--n",
            "1,8",
            "--presets",
            "default,single_issuer_defer_taskrun,register_ring_fd,sqpoll",
            "--output",
            str(out),
        ]
    )
    assert res.returncode == 0, res.stderr
    frame = readers.read_raw_csv(out)
    assert frame["not_inline"].sum() == 0
    assert set(frame["pattern"]) == {"default", "single_issuer_defer_taskrun", "register_ring_fd"}
    unavailable = readers.read_unavailable(out)
    assert [u["preset"] for u in unavailable] == ["sqpoll"]
    assert "not applicable" in unavailable[0]["reason"]


def test_uring_batch_fails_loudly_when_sqes_do_not_complete_inline(native_build: Path) -> None:
    # RECV on sockets with nothing queued cannot complete inline: they are
    # armed for poll, so the interval is not t and the probe must say so.
    res = run(
        [
            str(native_build / "cost-probe"),
            "uring-batch",
            "--batches",
            "3",
            "--warmup-batches",
            "0",
            "--ops",
            "recv",
            "--n",
            "4",
            "--starve",
        ]
    )
    assert res.returncode == 1
    assert "12 of 12 SQEs (100.0%) did not complete inline" in res.stderr
    assert "not t(n)" in res.stderr


def test_nop_times_a_bare_enter_for_n_zero(native_build: Path, tmp_path: Path) -> None:
    out = tmp_path / "nop.csv"
    res = run(
        [
            str(native_build / "san" / "cost-probe"),
            "nop",
            "--batches",
            "5",
            "--warmup-batches",
            "1",
            "--n",
            "0,4",
            "--output",
            str(out),
        ]
    )
    assert res.returncode == 0, res.stderr
    frame = readers.read_raw_csv(out)
    assert sorted(set(frame["n"])) == [0, 4] and (frame["ns"] > 0).all()


@pytest.mark.parametrize("build", ["", "san"])
def test_send_zc_counts_the_sends_the_kernel_copied(native_build: Path, tmp_path: Path, build: str) -> None:
    # Loopback delivers to a local socket, which must get a copy of data
    # still in user pages: every zero-copy send reports it copied, and each
    # one's notification arrived (none is left outstanding or lost).
    out = tmp_path / "zc.csv"
    res = run(
        [
            str(native_build / build / "cost-probe"),
            "send-zc",
            "--batches",
            "4",
            "--warmup-batches",
            "1",
            "--bytes",
            "512,16384",
            "--calls-per-batch",
            "3",
            "--output",
            str(out),
        ]
    )
    assert res.returncode == 0, res.stderr
    assert readers.raw_format(out) == "cost-probe send-zc v2"
    frame = readers.read_raw_csv(out)
    cells = frame.groupby(["variant", "bytes"]).size()
    assert len(cells) == 6 and (cells == 5).all()
    assert (frame["calls"] == 3).all() and (frame["ns"] > 0).all()
    usage = send_zc_tidy.read_zc_usage(out)
    assert sorted(zip(usage["variant"], usage["bytes"], strict=True)) == [
        ("send_zc", 512),
        ("send_zc", 16384),
        ("send_zc_fixed", 512),
        ("send_zc_fixed", 16384),
    ]
    assert (usage["zc_notifications"] == 4 * 3).all()  # measured batches x sends
    assert (usage["zc_copied"] == usage["zc_notifications"]).all()


def test_the_compatibility_header_matches_the_kernel_abi() -> None:
    # Each constant the compatibility header supplies must be the kernel's
    # own value (linux-libc-dev's UAPI header, newer than liburing 2.3's).
    compat = (Path(__file__).resolve().parents[1] / "native" / "common" / "uring_compat.h").read_text()
    defined = re.findall(r"#define (IORING_\w+)\s+(\(.+?\))", compat)
    ours = dict(defined)
    assert ours, "the compatibility header defines nothing"
    # Each once, outside the others' guards: a definition nested in another
    # constant's #ifndef vanishes with a liburing that defines that one.
    assert len(defined) == len(ours), sorted(n for n, _ in defined if [d for d, _ in defined].count(n) > 1)
    uapi = Path("/usr/include/linux/io_uring.h").read_text()
    for name, value in ours.items():
        found = re.search(rf"#define {name}\s+(\(.+?\))", uapi)
        if not found and name in NEWER_THAN_THE_HEADER:
            # Newer than the installed header (Debian 12's is Linux 6.1):
            # the value the kernel's own header gives, from its release.
            found = re.match(r"(\(.+?\))", NEWER_THAN_THE_HEADER[name][1])
        assert found, f"{name} is not in the kernel's UAPI header"
        assert found.group(1).replace(" ", "") == value.replace(" ", ""), name


# Constants the compatibility header supplies that the installed UAPI header
# may predate: the Linux release that added each, and its value there
# (include/uapi/linux/io_uring.h). The feature each names is probed at run
# time; tests/test_echo_flags.py shows the feature working where it is set.
NEWER_THAN_THE_HEADER = {
    "IORING_FEAT_MIN_TIMEOUT": ("6.12", "(1U << 15)"),
    "IORING_RECVSEND_BUNDLE": ("6.10", "(1U << 4)"),
    "IORING_FEAT_RECVSEND_BUNDLE": ("6.10", "(1U << 14)"),
    "IORING_CQE_F_BUF_MORE": ("6.12", "(1U << 4)"),
}
