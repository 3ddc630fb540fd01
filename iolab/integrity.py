"""Raw files stay as measured, or say so. When a measurement finishes, its
sidecar records each file's SHA-256, size and row count (``fingerprints``,
written with it, before either is renamed into place); every reader checks
them (``verify``), so an edited number or a deleted row stops the build with
one line naming the file. A change made on purpose is accepted explicitly
(``accept``: who and when go into the provenance):

    python -m iolab.integrity verify RAW...
    python -m iolab.integrity accept RAW...      # ./repro figures --accept-edited RAW

Write protection does not stop root, and this package runs as root.
"""

from __future__ import annotations

import argparse
import functools
import getpass
import hashlib
import json
import os
import re
import socket
import stat
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from . import atomic, paths
from .provenance import sidecar_for, utc_now

# The sidecar key that holds the fingerprints: file name -> fingerprint.
KEY = "integrity"
# The commit from which every sidecar records them: a sidecar written by it
# or a later commit that has none lost them after it was written.
FINGERPRINTS_SINCE = "dbe1f42b518ac9f423603966d951d3b86f29251a"


class EditedRawError(ValueError):
    """A raw file no longer matches its fingerprint."""


def fingerprint(path: Path, name: str | None = None) -> dict[str, Any]:
    """SHA-256, bytes and data rows (a CSV's lines that are neither comments
    nor its header; any other file's lines). ``name``: the file's final name,
    where ``path`` is a temporary."""
    h = hashlib.sha256()
    rows = lines = 0
    header_seen = False
    csv = (name or path.name).endswith(".csv")
    with open(path, "rb") as f:
        for line in f:
            h.update(line)
            lines += 1
            if csv and not line.startswith(b"#") and line.strip():
                if header_seen:
                    rows += 1
                header_seen = True
    return {"sha256": h.hexdigest(), "bytes": path.stat().st_size, "rows": rows if csv else lines}


def fingerprints(files: Mapping[str, Path]) -> dict[str, dict[str, Any]]:
    """Each file's fingerprint under the name it will have (``files``: final
    name -> the path its bytes are at now, e.g. a temporary)."""
    return {name: fingerprint(path, name) for name, path in sorted(files.items()) if path.exists()}


def _differences(raw: Path, recorded: Mapping[str, Mapping[str, Any]]) -> list[str]:
    out = []
    for name, want in recorded.items():
        path = raw.with_name(name)
        if not path.exists():
            out.append(f"{paths.relative(path)} is missing")
            continue
        got = fingerprint(path)
        if got["sha256"] == want["sha256"] and want.get("rows") not in (None, got["rows"]):
            # The bytes are as measured, so the sidecar's count is wrong (made by hand).
            out.append(f"{paths.relative(path)}: its sidecar records {want['rows']} rows, the file has {got['rows']}")
        elif got["sha256"] != want["sha256"]:
            rows = (
                f"{want['rows']} rows recorded, {got['rows']} now"
                if got["rows"] != want["rows"]
                else f"{got['rows']} rows as recorded"
            )
            out.append(
                f"{paths.relative(path)} changed after it was measured ({rows}; SHA-256 "
                f"{want['sha256'][:12]} recorded, {got['sha256'][:12]} now)"
            )
    return out


def verify(raw: str | Path) -> None:
    """Raise EditedRawError, one line, when ``raw`` or a file measured with
    it differs from what its sidecar recorded. A sidecar from before
    fingerprints were recorded has nothing to check."""
    raw = Path(raw)
    side = json.loads(sidecar_for(raw).read_text())
    if KEY not in side:
        commit = str((side.get("git") or {}).get("commit") or "")
        if _records_fingerprints(commit):
            print(
                f"iolab: warning: {paths.relative(raw)}: its sidecar has no fingerprints, though the commit "
                f"that wrote it ({commit[:12]}) records them; its bytes cannot be checked",
                file=sys.stderr,
            )
    problems = _differences(raw, side.get(KEY) or {})
    if problems:
        rel = paths.relative(raw)
        raise EditedRawError(
            f"{problems[0]}: re-measure it (remove {rel} and its sidecar, then run again) "
            f"or accept the change with: ./repro figures --accept-edited {rel}"
        )


@functools.cache
def _records_fingerprints(commit: str) -> bool:
    """Whether ``commit`` (a sidecar's) is FINGERPRINTS_SINCE or descends
    from it in this checkout's history; False when git cannot tell."""
    if not re.fullmatch(r"[0-9a-f]{40}", commit):
        return False
    try:
        res = subprocess.run(
            ["git", "merge-base", "--is-ancestor", "--end-of-options", FINGERPRINTS_SINCE, commit],
            cwd=paths.REPO,
            capture_output=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return res.returncode == 0


def accept(raw: str | Path, who: str | None = None) -> dict[str, Any]:
    """Record ``raw``'s files as they are now, and who accepted the change
    and when, in its sidecar; returns the acceptance."""
    raw = Path(raw)
    side_path = sidecar_for(raw)
    side = json.loads(side_path.read_text())
    recorded = side.get(KEY) or {}
    if not recorded:
        raise EditedRawError(f"{paths.relative(raw)}: its sidecar records no fingerprints to accept a change to")
    now = fingerprints({name: raw.with_name(name) for name in recorded})
    entry = {
        "who": who or f"{getpass.getuser()}@{socket.gethostname()}",
        "when": utc_now(),
        "files": {
            name: {"recorded": recorded[name], "now": now.get(name)}
            for name in recorded
            if recorded[name] != now.get(name)
        },
    }
    side.setdefault("accepted_edits", []).append(entry)
    side[KEY] = now
    mode = stat.S_IMODE(side_path.stat().st_mode)
    atomic.write_json(side_path, side)
    os.chmod(side_path, mode)  # a protected sidecar stays protected
    return entry


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m iolab.integrity", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("action", choices=["verify", "accept"])
    ap.add_argument("raw", nargs="+", type=Path)
    args = ap.parse_args(argv)
    try:
        for raw in args.raw:
            if args.action == "verify":
                verify(raw)
            else:
                entry = accept(raw)
                print(
                    f"iolab: accepted the change to {paths.relative(raw)} ({entry['who']}, {entry['when']}); "
                    "its provenance records it",
                    file=sys.stderr,
                )
    except (EditedRawError, OSError, json.JSONDecodeError) as e:
        print(f"iolab: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
