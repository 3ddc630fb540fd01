"""Every experiment has what DESIGN.md's "Adding an experiment" asks of
it, step by step: its probe mode in C (a cost-probe mode), its manifest,
its room, its parameter and cell in each notebook that reads it, its
paragraph in docs/experiments.md and a caption for each figure it
declares. (config/README.md is held to the manifests by
tests/test_config.py, a probe mode's defaults to its manifest by
tests/test_config_models.py.)"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest
from conftest import REPO

from iolab import paths
from iolab.manifests import manifests
from iolab.registry import REGISTRY, room_of
from iolab.rooms import ROOMS


def probe_modes() -> set[str]:
    """The modes the probe's C sources declare (``.name`` of each
    ``struct probe_mode`` in native/probes/*_mode.c)."""
    names = set()
    for source in (REPO / "native" / "probes").glob("*_mode.c"):
        names |= set(re.findall(r'struct probe_mode \w+ = \{\s*\.name = "([a-z0-9-]+)"', source.read_text()))
    return names


def notebook_sources() -> dict[str, str]:
    return {p.stem: p.read_text() for p in (REPO / "notebooks").glob("*.py")}


def recipe_gaps(
    experiment: str,
    *,
    modes: set[str],
    notebooks: Mapping[str, str],
    docs: str,
    caption: Callable[[str], Path] = paths.caption,
) -> list[str]:
    """The recipe's steps ``experiment`` lacks, by the step's file."""
    manifest = manifests()[experiment]
    gaps = []
    if not (REPO / "config" / "experiments" / f"{experiment}.yaml").is_file():
        gaps.append("manifest")
    mode = REGISTRY[experiment].probe_mode
    if mode and mode not in modes:
        gaps.append(f"native/probes/*_mode.c declaring {mode}")
    if experiment not in ROOMS or not ROOMS[experiment].tidy.__module__.startswith(
        f"iolab.rooms.{room_of(experiment)}."
    ):
        gaps.append("room")
    for notebook in manifest.get("notebooks") or ():
        source = notebooks.get(notebook, "")
        if not re.search(rf"^{experiment}_table = ", source, re.M):
            gaps.append(f"notebooks/{notebook}.py parameter {experiment}_table")
        if f'tables.load("{experiment}", {experiment}_table' not in source:
            gaps.append(f"notebooks/{notebook}.py cell loading {experiment}")
    if not re.search(rf"^### `{experiment}` ", docs, re.M):
        gaps.append("docs/experiments.md paragraph")
    gaps += [f"caption of {f['name']}" for f in manifest.get("figures") or () if not caption(f["name"]).is_file()]
    return gaps


@pytest.mark.parametrize("experiment", list(REGISTRY))
def test_each_experiment_has_every_step_of_the_recipe(experiment: str) -> None:
    docs = (REPO / "docs" / "experiments.md").read_text()
    assert recipe_gaps(experiment, modes=probe_modes(), notebooks=notebook_sources(), docs=docs) == []


def test_a_missing_step_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    # Negative controls: epoll_wait with each step taken away in turn.
    docs = (REPO / "docs" / "experiments.md").read_text()
    notebooks = notebook_sources()
    assert recipe_gaps("epoll_wait", modes=probe_modes(), notebooks=notebooks, docs=docs) == []
    without_docs = docs.replace("### `epoll_wait` ", "### epoll_wait ")
    assert recipe_gaps("epoll_wait", modes=probe_modes(), notebooks=notebooks, docs=without_docs) == [
        "docs/experiments.md paragraph"
    ]
    assert recipe_gaps("epoll_wait", modes=probe_modes() - {"epoll-wait"}, notebooks=notebooks, docs=docs) == [
        "native/probes/*_mode.c declaring epoll-wait"
    ]
    no_parameter = {**notebooks, "cost_model": notebooks["cost_model"].replace("\nepoll_wait_table = ", "\n")}
    assert recipe_gaps("epoll_wait", modes=probe_modes(), notebooks=no_parameter, docs=docs) == [
        "notebooks/cost_model.py parameter epoll_wait_table"
    ]
    no_cell = {**notebooks, "cost_model": notebooks["cost_model"].replace('tables.load("epoll_wait"', "None(")}
    assert recipe_gaps("epoll_wait", modes=probe_modes(), notebooks=no_cell, docs=docs) == [
        "notebooks/cost_model.py cell loading epoll_wait"
    ]
    nowhere = REPO / "report" / "captions" / "no such caption.rst"
    assert recipe_gaps("send_zc", modes=probe_modes(), notebooks=notebooks, docs=docs, caption=lambda _: nowhere) == [
        "caption of send_zc_cost"
    ]
    monkeypatch.setattr(sys.modules[__name__], "ROOMS", {})
    assert recipe_gaps("epoll_wait", modes=probe_modes(), notebooks=notebooks, docs=docs) == ["room"]
