"""Crafted crates: a real crate with members added, replaced or turned
into links, and its metadata edited, as someone sharing a crate could."""

from __future__ import annotations

import hashlib
import json
import stat
import zipfile
from collections.abc import Callable
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
) -> Path:
    """A copy of the crate ``base`` with members added (listed in the
    metadata with their true checksum and size unless ``list_added`` is
    False), symbolic-link members, members replaced (their checksums
    re-recorded), and the metadata edited last."""
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
    method = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
    with zipfile.ZipFile(out, "w", method) as dst:
        dst.writestr(METADATA, json.dumps(meta))
        for name, data in {**members, **add}.items():
            dst.writestr(name, data)
        for name, target in links.items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            dst.writestr(info, target)
    return out
