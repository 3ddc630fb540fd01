"""Where things live in the repository (one place, so rules, notebooks and
tests agree)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
NATIVE_BUILD = REPO / "native" / "build"
# The config's JSON Schema: what is valid, and every default.
CONFIG_SCHEMA = REPO / "config" / "schema.yaml"
# The named overlays (--configfile config/overlays/<name>.yaml); each file's
# stem is a valid config `overlay`.
OVERLAYS = REPO / "config" / "overlays"
# One manifest per experiment (iolab.manifests): config/experiments/<name>.yaml.
EXPERIMENT_MANIFESTS = REPO / "config" / "experiments"


def resolve(path: str | Path) -> Path:
    """A path relative to the repository root, whatever the current directory
    (notebooks run from notebooks/ by hand and from the root under papermill)."""
    p = Path(path)
    return p if p.is_absolute() else REPO / p


def relative(path: str | Path) -> str:
    """A repository-relative POSIX path for manifests and provenance."""
    p = Path(path).resolve()
    try:
        return p.relative_to(REPO).as_posix()
    except ValueError:
        return p.as_posix()


def room_packages() -> list[str]:
    """The read side's rooms (iolab/rooms/<room>/, see iolab.rooms), as
    dotted package names in name order."""
    rooms = REPO / "iolab" / "rooms"
    return sorted(f"iolab.rooms.{p.parent.name}" for p in rooms.glob("*/tidy.py"))


def caption(figure: str) -> Path:
    """A figure's caption file, by who declares the figure: one an
    experiment's manifest declares has it in that experiment's room
    (iolab/rooms/<room>/<figure>.rst, iolab.registry.figure_room); a
    notebook's own figure over several experiments in
    report/captions/<figure>.rst. The path returned may not exist (the
    report names it in its error)."""
    from .registry import figure_room  # imported here: the registry imports this module

    room = figure_room(figure)
    return (REPO / "iolab" / "rooms" / room if room else REPO / "report" / "captions") / f"{figure}.rst"


# The read side's layers, bottom up (DESIGN.md, The package): a module
# imports from its own layer and those below, never from one above
# (tests/test_layers.py). Rooms are vertical: a room's tidy step sits under
# the tables, its statistics above the shared estimation, its present*.py
# with the report. A path's layer is the first pattern it matches (fnmatch:
# "*" crosses folders); the rest of iolab is the base and the run side.
READ_LAYERS = ("tidy", "tables", "estimation", "rooms", "claims", "planning", "procedure", "report", "archive")
LAYER_PATTERNS = (
    ("iolab/rooms/*/tidy.py", "tidy"),
    ("iolab/rooms/*/present*.py", "report"),
    ("iolab/rooms/*/*.py", "rooms"),
    ("iolab/rooms/*.py", "tidy"),
    ("iolab/tables.py", "tables"),
    ("iolab/estimation/*.py", "estimation"),
    ("iolab/claims/*.py", "claims"),
    ("iolab/planning/*.py", "planning"),
    ("iolab/procedure/*.py", "procedure"),
    ("iolab/report/*.py", "report"),
    ("iolab/archive/*.py", "archive"),
)


def read_layer(path: str) -> str | None:
    """The read-side layer of a repository-relative module path (None: the
    base or the run side)."""
    from fnmatch import fnmatchcase

    return next((layer for pattern, layer in LAYER_PATTERNS if fnmatchcase(path, pattern)), None)


def read_side_modules(below: str = "") -> list[str]:
    """Dotted names of every read-side module, or of those in layers below
    ``below``, in path order."""
    top = READ_LAYERS.index(below) if below else len(READ_LAYERS)
    found = []
    for path in sorted((REPO / "iolab").rglob("*.py")):
        layer = read_layer(path.relative_to(REPO).as_posix())
        if layer is not None and READ_LAYERS.index(layer) < top:
            found.append(".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__"))
    return found


def _module_file(module: str) -> Path | None:
    parts = module.split(".")
    if parts[0] != "iolab":
        return None
    base = REPO.joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.exists():
            return candidate
    return None


def imports_of(path: Path) -> list[Path]:
    """The iolab modules the file at ``path`` imports itself (at its top or
    inside a function), each package on the way included. The rooms' tidy
    modules, which ``iolab.rooms`` imports by name at run time, count as
    imported by it."""
    import ast

    root = REPO / "iolab"
    found: list[Path] = []
    if path == root / "rooms" / "__init__.py":
        found += [f for room in room_packages() if (f := _module_file(f"{room}.tidy")) is not None]
    # The package a relative import starts from (for __init__.py, itself).
    package = ".".join(path.relative_to(REPO).with_suffix("").parts).rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text())):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base]) if base else ".".join(anchor)
            names = [base, *(f"{base}.{a.name}" for a in node.names)]
        for name in names:
            f = _module_file(name)
            if f is not None and f.is_relative_to(root):
                found.append(f)
    return found


def module_closure(packages: list[str], modules: Sequence[str] = ()) -> list[str]:
    """Repository-relative paths of every iolab module that ``packages``
    (dotted names, each with every module in it) and ``modules`` (each
    alone) import, directly or not, themselves included: the code an
    analysis step runs, so editing any of it re-runs the step."""
    pending = [f for p in packages if (f := _module_file(p)) is not None]
    pending += [f for p in packages for f in sorted((REPO.joinpath(*p.split("."))).glob("*.py"))]
    pending += [f for m in modules if (f := _module_file(m)) is not None]
    seen: set[Path] = set()
    while pending:
        path = pending.pop()
        if path not in seen:
            seen.add(path)
            pending += imports_of(path)
    return sorted(p.relative_to(REPO).as_posix() for p in seen)


def script_closure(script: str | Path) -> list[str]:
    """The iolab code a script outside the package (a notebook's .py file)
    runs: the modules it imports and their closure (module_closure), each
    imported module alone, not its whole package."""
    import ast

    names: list[str] = []
    for node in ast.walk(ast.parse(resolve(script).read_text())):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names += [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
    return module_closure([], [n for n in names if n == "iolab" or n.startswith("iolab.")])
