"""Crafted crates: a real crate with members added, replaced or turned
into links, and its metadata edited, as someone sharing a crate could."""

from __future__ import annotations

import hashlib
import json
import stat
import zipfile
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

METADATA = "ro-crate-metadata.json"


def craft(
    base: Path,
    out: Path,
    *,
    add: dict[str, bytes] | None = None,
    list_added: bool = True,
    links: dict[str, str] | None = None,
    replace: dict[str, bytes] | None = None,
    edit_metadata: Callable[[dict], None] | None = None,
    compress: bool = True,
    encrypted: set[str] | None = None,
    method: dict[str, int] | None = None,
) -> Path:
    """A copy of the crate ``base`` with members added (listed in the
    metadata with their true checksum and size unless ``list_added`` is
    False), symbolic-link members, members replaced (their checksums
    re-recorded), and the metadata edited last. Members in ``encrypted``
    carry the zip's encryption flag; ``method`` rewrites a member's
    compression method in its headers (a stored member, so the bytes stay
    what they were)."""
    add, links, replace = add or {}, links or {}, replace or {}
    with zipfile.ZipFile(base) as src:
        meta = json.loads(src.read(METADATA))
        members = {i.filename: src.read(i.filename) for i in src.infolist() if i.filename != METADATA}
    members.update(replace)
    by_id = {e["@id"]: e for e in meta["@graph"]}
    for name, data in {**replace, **(add if list_added else {})}.items():
        entity = by_id.get(name)
        if entity is None:
            entity = {"@id": name, "@type": "File"}
            meta["@graph"].append(entity)
        entity.update(sha256=hashlib.sha256(data).hexdigest(), contentSize=len(data))
    if edit_metadata:
        edit_metadata(meta)
    default_method = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
    with zipfile.ZipFile(out, "w", default_method) as dst:
        dst.writestr(METADATA, json.dumps(meta))
        for name, data in {**members, **add}.items():
            info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_STORED if name in (method or {}) else default_method
            dst.writestr(info, data)
        for name, target in links.items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            dst.writestr(info, target)
    # zipfile writes neither an encryption flag nor an unknown method: both
    # go into the headers afterwards, as another zip tool could write them.
    for name in encrypted or set():
        _patch_header(out, name, flags=0x1)
    for name, number in (method or {}).items():
        _patch_header(out, name, method=number)
    return out


def _patch_header(path: Path, name: str, method: int | None = None, flags: int = 0) -> None:
    """Set ``flags`` in ``name``'s general-purpose bits and write compression
    ``method`` into its local and central headers, in place."""
    with zipfile.ZipFile(path) as z:
        offset = z.getinfo(name).header_offset
    data = bytearray(path.read_bytes())

    def patch(at: int, flag_at: int, method_at: int) -> None:
        old = int.from_bytes(data[at + flag_at : at + flag_at + 2], "little")
        data[at + flag_at : at + flag_at + 2] = (old | flags).to_bytes(2, "little")
        if method is not None:
            data[at + method_at : at + method_at + 2] = method.to_bytes(2, "little")

    assert data[offset : offset + 4] == b"PK\x03\x04"
    patch(offset, 6, 8)
    central = data.find(b"PK\x01\x02")
    encoded = name.encode()
    while central != -1:
        length = int.from_bytes(data[central + 28 : central + 30], "little")
        if data[central + 46 : central + 46 + length] == encoded:
            patch(central, 8, 10)
            break
        central = data.find(b"PK\x01\x02", central + 4)
    else:
        raise AssertionError(f"{name} not in the central directory")
    path.write_bytes(bytes(data))


def raw_copy(base: Path, tag: str) -> dict[str, bytes]:
    """A ``replace`` for ``craft`` that gives every raw measurement file
    other bytes (a trailing comment naming ``tag``): what a copier does to
    make one run look like several. By identity (iolab.claims.records)
    the result is still ``base``'s run: its launch, first start and
    findings are the same."""
    with zipfile.ZipFile(base) as z:
        return {
            n: z.read(n) + f"# crafted run {tag}\n".encode()
            for n in z.namelist()
            if n.startswith("data/raw/") and n.endswith(".csv") and "/rep" in n and n.count("/") == 5
        }


def another_run(base: Path, tag: int, numbers: dict | None = None) -> tuple[dict[str, bytes], Callable[[dict], None]]:
    """``replace`` and ``edit_metadata`` for ``craft`` that make ``base``
    another run on another launch: other raw bytes, another boot id, a first
    start ``tag`` + 1 days earlier, and its findings' values moved by a
    thousandth per ``tag`` + 1 (``numbers``: the numbers to write, else
    ``base``'s)."""
    with zipfile.ZipFile(base) as z:
        numbers = numbers if numbers is not None else json.loads(z.read("paper/generated/numbers.json"))
        environment = json.loads(z.read("archive/environment.json"))
    factor = 1 + 0.001 * (tag + 1)
    for f in numbers.get("findings", {}).get("value", []):
        f["per_rep"] = [v * factor if isinstance(v, int | float) else v for v in f.get("per_rep") or []]
    for facts in environment.get("nodes", {}).values():
        facts["boot_id"] = f"00000000-0000-4000-8000-{tag:012d}"
    replace = {
        **raw_copy(base, str(tag)),
        "paper/generated/numbers.json": json.dumps(numbers).encode(),
        "archive/environment.json": json.dumps(environment).encode(),
    }

    def later(meta: dict) -> None:
        for e in meta["@graph"]:
            for key in ("startTime", "endTime"):
                if isinstance(e.get(key), str):
                    t = datetime.fromisoformat(e[key].replace("Z", "+00:00"))
                    e[key] = (t - timedelta(days=tag + 1)).isoformat()

    return replace, later
