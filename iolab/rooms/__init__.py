"""The read side's rooms: one folder per experiment (or per family of
experiments that share a raw format), holding what is particular to it.

A room ``iolab/rooms/<room>/`` has
- ``tidy.py``: its raw-line readers beyond the shared ones (iolab.readers),
  its tidy step, and ``ROOM``, the experiments it reads and that step;
- ``stats.py`` (if it has statistics of its own): pure functions on its
  tidy table, over iolab.estimation's shared statistics;
- ``present.py`` and ``<figure>.rst`` (if the paper shows it on its own):
  its numbers for the paper, its figures, and their captions.

``ROOMS`` maps each experiment of iolab.registry to its room's ``Room``,
found by looking at this folder: an experiment without a room, or with two,
fails at import, naming it. The tidy step (iolab.tables) reads ``ROOMS``;
notebooks import a room's ``stats`` and ``present`` by name.

Within a room the read side's layers hold: ``tidy`` imports neither
statistics nor report, ``stats`` not the report (tests/test_layers.py).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping

from ..paths import room_packages
from ..registry import EXPERIMENTS
from .room import Room


class RoomError(ImportError):
    """The rooms do not cover the registry's experiments exactly once."""


def check_rooms(rooms: Iterable[tuple[str, Room]], experiments: Iterable[str]) -> dict[str, Room]:
    """experiment -> its room, in the registry's order; a RoomError names an
    experiment without a room, with two, or a room of an unknown experiment."""
    found: dict[str, list[str]] = {}
    by_experiment: dict[str, Room] = {}
    for name, room in rooms:
        for experiment in room.experiments:
            found.setdefault(experiment, []).append(name)
            by_experiment[experiment] = room
    wanted = list(experiments)
    problems = [f"{e} has no room (add iolab/rooms/<room>/tidy.py with its ROOM)" for e in wanted if e not in found]
    problems += [f"{e} is read by rooms {', '.join(r)}" for e, r in found.items() if len(r) > 1]
    problems += [
        f"room {', '.join(r)} reads {e}, which iolab.registry does not declare"
        for e, r in found.items()
        if e not in wanted
    ]
    if problems:
        raise RoomError("; ".join(problems))
    return {e: by_experiment[e] for e in wanted}


def _discovered() -> list[tuple[str, Room]]:
    rooms = []
    for package in room_packages():
        module = importlib.import_module(f"{package}.tidy")
        room = getattr(module, "ROOM", None)
        if not isinstance(room, Room):
            raise RoomError(f"{module.__file__}: defines no ROOM = Room(experiments, tidy)")
        rooms.append((package.rsplit(".", 1)[1], room))
    return rooms


ROOMS: Mapping[str, Room] = check_rooms(_discovered(), EXPERIMENTS)
