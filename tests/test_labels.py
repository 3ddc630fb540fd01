"""Figures and the site name things in words, not by the config's or the
tables' keys (iolab.report.labels)."""

from __future__ import annotations

import yaml
from conftest import REPO

from iolab.archive import timeline
from iolab.report import artifact, labels


def shipped_presets() -> set[str]:
    """Every echo preset config/config.yaml and its overlays declare."""
    names: set[str] = set()
    for path in [REPO / "config" / "config.yaml", *sorted((REPO / "config" / "overlays").glob("*.yaml"))]:
        echo = (yaml.safe_load(path.read_text()).get("experiments") or {}).get("echo") or {}
        names |= set(echo.get("presets") or {})
    return names


def test_every_shipped_preset_has_a_name_of_its_own() -> None:
    presets = shipped_presets()
    assert len(presets) > 20
    assert presets - set(labels.PRESETS) == set()
    assert all(name != labels.preset(name) or "_" not in name for name in presets)


def test_a_key_without_a_name_shows_as_words() -> None:
    # A preset a config adds: its words, never its key.
    assert labels.preset("my_new_ring") == "my new ring"
    assert labels.metric("server_ns_per_request") == "server CPU per request"
    assert labels.variant("send_zc_fixed") == "SEND_ZC, registered buffer"


def test_the_sites_axes_and_the_appendix_name_quantities_in_words() -> None:
    line = timeline.Timeline("a_recv_ns", "cost_model_terms", "ns", (), (), None)
    assert timeline.words(line) == "a, recv (ns)"
    echo = timeline.Timeline(
        "echo_sqpoll_sq_aff_spare_c50_server_ns_per_request", "echo_cpu_per_request", "ns", (), (), None
    )
    assert timeline.words(echo) == "SQPOLL, SQ_AFF spare CPU (ns)"
    assert "sqpoll_sq_aff_spare" not in str(timeline.chart(echo))
    assert artifact.quantity_words("echo_cpu_per_request", "defer_taskrun_multishot") == "DEFER_TASKRUN, multishot"
