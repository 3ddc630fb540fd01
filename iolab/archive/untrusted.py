"""A crate from someone else, read as untrusted data.

A crate is a zip whose ``ro-crate-metadata.json`` lists every file with its
SHA-256 and size. Whoever made it controls both the zip and the metadata,
so nothing in it is trusted before it is checked, and nothing from it is
ever executed, imported, used as a parameter name or as a path outside the
place it belongs:

- every member's name is a plain relative path (no ``..``, no absolute or
  drive names, no backslashes, no hidden or empty parts, a conservative set
  of characters), appears once, and is a regular file or a directory (never
  a link or a device);
- every file but the metadata itself is listed in the metadata with its
  SHA-256 and size, and its bytes are checked against both while they are
  streamed (never read whole into memory);
- what the members may expand to is bounded (``max_bytes`` in all, a
  listed size per member, at most ``MAX_RATIO`` times its compressed size),
  so a small crate cannot fill the disk or the memory;
- a member is written only under a directory the caller names, after the
  resolved target is checked to lie inside it and no part of the way there
  is a symbolic link.

Every refusal is one line (``CrateError``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from ..readers import sha256

METADATA = "ro-crate-metadata.json"
# The metadata of a default run's crate is about 1 MB; a crate of many
# runs' worth of raw files stays far below this.
MAX_METADATA_BYTES = 64 << 20
# What a whole crate may expand to unless the caller allows more: a default
# run's crate expands to about 60 MB, a paper-overlay run's to a few
# hundred; 4 GiB leaves room and still stops a zip bomb.
DEFAULT_MAX_BYTES = 4 << 30
_CHUNK = 1 << 20
# Deflate shrinks the raw CSVs, sidecars and notebooks of real runs by
# 2-12x (the tests' smoke crate: at most 11x); long runs of one byte, what a
# zip bomb is made of, shrink 1000x. A member past a mebibyte that shrank
# more than this is refused.
MAX_RATIO = 100
# One part of a member's name: starts with a letter or digit (so never ".",
# "..", or hidden), then letters, digits and ._+=@,- only.
_PART = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+=@,-]*")
_SHA256 = re.compile(r"[0-9a-f]{64}")
# A git commit as a crate or a sidecar may name it: 7 to 40 lowercase hex
# digits. Anything else never reaches git (it could be read as an option).
_COMMIT = re.compile(r"[0-9a-f]{7,40}")
# What a crate built outside a git checkout records instead of a commit.
NO_COMMIT = "unknown"
# Spaces that print as spaces (the thin space of our thousands, no-break
# spaces): kept; every other unprintable character is escaped.
_SPACES = "\u2009\u202f\u00a0"


class CrateError(RuntimeError):
    """Why a crate cannot be built, read or trusted: one line."""


@dataclass(frozen=True)
class Listed:
    """A file the metadata lists: its recorded checksum and size."""

    name: str
    sha256: str
    size: int | None  # None: the metadata records none


def shown(text: object, limit: int = 120) -> str:
    """A string from a crate as it may be printed: control characters
    escaped, cut at ``limit`` characters."""
    s = str(text)
    cut = s[:limit]
    return "".join(c if c.isprintable() or c in _SPACES else repr(c)[1:-1] for c in cut) + (
        "…" if len(s) > limit else ""
    )


def display_safe(text: str) -> str:
    """A string from a crate as a page shows it: every character that is
    not printable (ESC and the other controls, the bidirectional overrides
    and isolates such as U+202E, zero-width and other format characters,
    line and paragraph separators) written as its escape (``\\x1b``,
    ``\\u202e``), so that nothing a crate holds changes how the text
    around it reads. Tabs, newlines and the spaces we print are kept: HTML
    shows them as spaces. Nothing is cut."""
    return "".join(c if c.isprintable() or c in _SPACES or c in "\t\n" else repr(c)[1:-1] for c in text)


def display_safe_tree(value: Any) -> Any:
    """``value`` (JSON-like data from a crate: a chart's spec) with every
    string in it, keys too, made ``display_safe``."""
    if isinstance(value, str):
        return display_safe(value)
    if isinstance(value, dict):
        return {display_safe_tree(k): display_safe_tree(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [display_safe_tree(v) for v in value]
    return value


def commit_or_none(value: object) -> str | None:
    """``value`` if it is a git commit (7-40 hex digits), else None."""
    return value if isinstance(value, str) and _COMMIT.fullmatch(value) else None


def crate_commit(value: object, where: object) -> str:
    """A crate's recorded commit, checked to its type: 7-40 hex digits, or
    ``NO_COMMIT`` for a crate built outside a checkout; CrateError otherwise,
    so that no crate value can reach git as an option or a range."""
    if value == NO_COMMIT or commit_or_none(value) is not None:
        return str(value)
    raise CrateError(f"{where}: its version {shown(value, 60)!r} is not a git commit (7-40 hex digits); refused")


def name_problem(name: str) -> str | None:
    """Why a member name is not a plain relative path (None: it is)."""
    if not name or len(name) > 1024:
        return "an empty or over-long name"
    if "\\" in name or "\0" in name:
        return "a backslash or NUL in its name"
    if name.startswith("/") or re.match(r"[A-Za-z]:", name):
        return "an absolute name"
    parts = name.rstrip("/").split("/")
    if ".." in parts:
        return "'..' in its name"
    bad = next((p for p in parts if not _PART.fullmatch(p)), None)
    if bad is not None:
        return f"a name part {bad[:40]!r} that is not letters, digits and ._+=@,-"
    return None


# The compression methods Python's zipfile reads; a crate of ours uses deflate.
_METHODS = {zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA}


def _kind_problem(info: zipfile.ZipInfo) -> str | None:
    """Why a member is not a plain readable file or a directory (None: it
    is one): a link, a special file, an encrypted member, or a compression
    method this reader does not know."""
    if info.flag_bits & 0x1:
        return "an encrypted member (a crate is never encrypted)"
    if info.compress_type not in _METHODS:
        return f"an unknown compression method ({info.compress_type})"
    mode = info.external_attr >> 16
    kind = stat.S_IFMT(mode)
    if kind in (0, stat.S_IFREG, stat.S_IFDIR):
        return None
    return "a symbolic link" if kind == stat.S_IFLNK else f"a special file (mode {oct(kind)})"


def _listed_files(graph: Any) -> dict[str, Listed]:
    """The File entities of a metadata ``@graph`` that carry a checksum."""
    if not isinstance(graph, list):
        raise CrateError(f"{METADATA}: its @graph is {type(graph).__name__}, not a list of entities")
    listed: dict[str, Listed] = {}
    for entity in graph:
        if not isinstance(entity, dict):
            raise CrateError(f"{METADATA}: an entity of its @graph is {type(entity).__name__}, not an object")
        ident, types = entity.get("@id"), entity.get("@type")
        types = types if isinstance(types, list) else [types]
        if "File" not in types or "sha256" not in entity:
            continue
        digest, size = entity.get("sha256"), entity.get("contentSize")
        if not isinstance(ident, str) or not isinstance(digest, str) or not _SHA256.fullmatch(digest):
            raise CrateError(
                f"{METADATA}: the File {str(ident)[:80]!r} has no valid @id or SHA-256 (sha256: {str(digest)[:80]!r})"
            )
        if isinstance(size, str) and size.isdigit():
            size = int(size)
        # A size is optional (RO-Crate does not require one); one that is
        # there must be a size.
        if size is not None and (not isinstance(size, int) or isinstance(size, bool) or size < 0):
            raise CrateError(
                f"{METADATA}: the File {shown(ident, 80)!r} has no valid contentSize ({shown(size, 40)!r})"
            )
        # A data entity's @id is its path, percent-encoded (RO-Crate 1.1; ro-crate-py
        # writes profiles/default/config.v9+.yaml as config.v9%2B.yaml): the
        # member it names is the decoded path, which the members' own checks judge.
        name = unquote(ident)
        if name in listed:
            raise CrateError(f"{METADATA}: the File {ident[:80]!r} is listed twice")
        listed[name] = Listed(name, digest, size)
    return listed


class Crate:
    """An opened crate whose structure has been checked: ``problems`` says
    what is wrong with it (unsafe or unlisted members, sizes past the
    bound); ``checksum_problems()`` then streams every listed file."""

    def __init__(self, path: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.path = Path(path)
        self.max_bytes = max_bytes
        try:
            self._zip = zipfile.ZipFile(self.path)
        except (OSError, zipfile.BadZipFile) as e:
            raise CrateError(f"{self.path}: not a readable zip ({e})") from e
        try:
            self._check_structure()
        except BaseException:
            self._zip.close()
            raise

    def __enter__(self) -> Crate:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._zip.close()

    def _check_structure(self) -> None:
        infos = self._zip.infolist()
        self.problems: list[str] = []
        seen: set[str] = set()
        folded: dict[str, str] = {}
        self._infos: dict[str, zipfile.ZipInfo] = {}
        for info in infos:
            name = info.filename
            problem = name_problem(name) or _kind_problem(info)
            if problem is None and name in seen:
                problem = "it appears twice in the zip"
            # Two names one file system may take for one (Local/ and local/).
            twin = folded.setdefault(name.rstrip("/").casefold(), name)
            if problem is None and twin != name:
                problem = f"its name differs from {shown(twin, 80)!r} only by case"
            seen.add(name)
            if problem:
                self.problems.append(f"{shown(name)}: refused, {problem}")
            elif not info.is_dir():
                self._infos[name] = info
        meta = self._infos.get(METADATA)
        if meta is None:
            refused = next((p for p in self.problems if p.startswith(f"{METADATA}:")), None)
            raise CrateError(f"{self.path}: {refused or f'no {METADATA}: not an RO-Crate zip'}")
        if meta.file_size > MAX_METADATA_BYTES:
            raise CrateError(
                f"{self.path}: {METADATA} would expand to {meta.file_size} bytes, more than {MAX_METADATA_BYTES}"
            )
        try:
            document = json.loads(self._read_bounded(meta, MAX_METADATA_BYTES))
        except (ValueError, UnicodeDecodeError, RecursionError) as e:
            raise CrateError(f"{self.path}: {METADATA} is not JSON ({shown(e, 80)})") from e
        if not isinstance(document, dict):
            raise CrateError(f"{self.path}: {METADATA} is {type(document).__name__}, not an object")
        graph: Any = document.get("@graph")  # _listed_files checks it is a list
        self.listed = _listed_files(graph)
        self.entities = {e["@id"]: e for e in graph if isinstance(e.get("@id"), str)}
        root = self.entities.get("./")
        self.root: dict[str, Any] = root if isinstance(root, dict) else {}
        total = 0
        # Members under the per-member floor that each shrank past the ratio:
        # many of them together are a bomb of small pieces.
        small_bombs = small_packed = 0
        for name, info in sorted(self._infos.items()):
            if name == METADATA:
                continue
            entry = self.listed.get(name)
            if entry is None:
                where = " (raw data)" if name.startswith("data/raw/") else ""
                self.problems.append(f"{name}: in the zip but not listed in the metadata with a SHA-256{where}")
            elif entry.size is not None and info.file_size != entry.size:
                self.problems.append(
                    f"{name}: the zip says it expands to {info.file_size} bytes, the metadata records {entry.size}"
                )
            elif info.file_size > _CHUNK and info.file_size > MAX_RATIO * max(info.compress_size, 1):
                self.problems.append(
                    f"{name}: refused, {info.compress_size} bytes would expand to "
                    f"{info.file_size} (more than {MAX_RATIO} times: a zip bomb)"
                )
            elif info.file_size <= _CHUNK and info.file_size > MAX_RATIO * max(info.compress_size, 1):
                small_bombs += info.file_size
                small_packed += info.compress_size
            total += info.file_size
        # The same bound over the small members together: each under the
        # floor, they must not add up to a bomb either.
        if small_bombs > _CHUNK:
            self.problems.append(
                f"refused, members under {_CHUNK} bytes that each shrank more than {MAX_RATIO} times would "
                f"expand from {small_packed} bytes to {small_bombs} (more than {MAX_RATIO} times in all: a zip bomb)"
            )
        if total + meta.file_size > self.max_bytes:
            self.problems.append(
                f"the members would expand to {total + meta.file_size} bytes, more than the "
                f"{self.max_bytes} allowed (--max-bytes)"
            )
        for name in sorted(set(self.listed) - set(self._infos)):
            self.problems.append(f"{shown(name)}: listed in the crate but missing from the zip")

    def _read_bounded(self, info: zipfile.ZipInfo, limit: int) -> bytes:
        try:
            with self._zip.open(info) as f:
                data = f.read(limit + 1)
        except (OSError, zipfile.BadZipFile, EOFError, RuntimeError, NotImplementedError, zlib.error) as e:
            raise CrateError(f"{info.filename}: unreadable in the zip ({shown(e, 80)})") from e
        if len(data) > limit:
            raise CrateError(f"{info.filename}: expands past {limit} bytes")
        return data

    def _stream(self, name: str) -> Iterator[bytes]:
        """A listed member's bytes in chunks, checked against its recorded
        size and SHA-256 as they pass (CrateError at the end if they differ)."""
        entry = self.listed.get(name)
        info = self._infos.get(name)
        if entry is None or info is None:
            raise CrateError(f"{shown(name)}: not a file the crate's metadata lists with a SHA-256")
        # The metadata's size where it records one, else the zip's (already
        # bounded by max_bytes and MAX_RATIO).
        limit = entry.size if entry.size is not None else info.file_size
        h, size = hashlib.sha256(), 0
        try:
            with self._zip.open(info) as f:
                while chunk := f.read(_CHUNK):
                    size += len(chunk)
                    if size > limit:
                        raise CrateError(f"{name}: expands past its recorded {limit} bytes")
                    h.update(chunk)
                    yield chunk
        except (OSError, zipfile.BadZipFile, EOFError, RuntimeError, NotImplementedError, zlib.error) as e:
            raise CrateError(f"{name}: unreadable in the zip ({shown(e, 80)})") from e
        if size != limit:
            raise CrateError(f"{name}: expands to {size} bytes, the metadata records {limit}")
        if h.hexdigest() != entry.sha256:
            raise CrateError(f"{name}: SHA-256 {h.hexdigest()[:16]}… does not match the recorded {entry.sha256[:16]}…")

    def checksum_problems(self) -> list[str]:
        """Each listed file whose bytes differ from its recorded SHA-256
        and size ([] when all match)."""
        problems = []
        for name in sorted(set(self.listed) & set(self._infos)):
            try:
                for _ in self._stream(name):
                    pass
            except CrateError as e:
                problems.append(str(e))
        return problems

    def files(self, prefix: str = "") -> list[str]:
        """The listed files present in the zip whose names start with ``prefix``."""
        return sorted(n for n in self.listed if n in self._infos and n.startswith(prefix))

    def first_started(self) -> str:
        """When the run's first action (a measurement or notebook) started,
        as the metadata recorded it: the date a run is placed at; "" if no
        action recorded one."""
        started = sorted(
            str(e["startTime"])
            for e in self.entities.values()
            if e.get("@type") == "CreateAction" and isinstance(e.get("startTime"), str)
        )
        return started[0] if started else ""

    def has(self, name: str) -> bool:
        return name in self.listed and name in self._infos

    def read_json(self, name: str, limit: int = 256 << 20) -> Any:
        """A listed JSON member, checked, parsed (CrateError if it is not JSON)."""
        known = self.listed[name].size if name in self.listed else None
        if known is not None and known > limit:
            raise CrateError(f"{name}: {known} bytes, more than the {limit} a JSON file may have")
        try:
            return json.loads(b"".join(self._stream(name)))
        except (ValueError, UnicodeDecodeError, RecursionError) as e:
            raise CrateError(f"{name}: not JSON ({shown(e, 80)})") from e

    def extract(self, name: str, under: Path, root: Path) -> bool:
        """Write the listed member ``name`` to ``root / name``, which must
        lie under the directory ``under`` (inside ``root``) with no symbolic
        link on the way. Streams through a temporary beside the target and
        renames it into place only once its checksum matched. A target that
        is there with the same bytes is left (False); with other bytes it
        stops (nothing measured is overwritten)."""
        under_abs = Path(os.path.abspath(under))
        target = Path(os.path.abspath(root / name))
        if under_abs not in target.parents:
            raise CrateError(f"{name}: would be written outside {under}")
        # Every directory from `under` down to the target: real directories.
        here = under_abs
        for part in target.relative_to(under_abs).parts[:-1]:
            if here.is_symlink():
                raise CrateError(f"{name}: {here} is a symbolic link; refused")
            here = here / part
        if here.is_symlink() or target.is_symlink():
            raise CrateError(f"{name}: a symbolic link is on its way; refused")
        if target.exists():
            if sha256(target) != self.listed[name].sha256:
                raise CrateError(
                    f"{name} exists in this checkout with other bytes: re-analyse in a fresh clone "
                    "(git clone, then ./repro reanalyse)"
                )
            return False
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{os.getpid()}.partial")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        try:
            with os.fdopen(fd, "wb") as out:
                for chunk in self._stream(name):
                    out.write(chunk)
            os.replace(tmp, target)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return True


def verify(path: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> tuple[list[str], int]:
    """Everything wrong with a crate, and how many listed files it holds:
    unsafe or unlisted members, sizes past the bound, and every listed file
    whose bytes differ from its recorded SHA-256."""
    with Crate(path, max_bytes) as crate:
        return crate.problems + crate.checksum_problems(), len(crate.files())
