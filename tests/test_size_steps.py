"""A send's cost that jumps as its message grows is named with its numbers
(iolab.rooms.cost_probes.steps), never printed without a word; a rise
within the bytes copied is not called a step."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from iolab.rooms.cost_probes import steps

SIZES = (16, 128, 512, 1024)


def probes(jump: float, reps: int = 6, noise: float = 0.08, seed: int = 0) -> pd.DataFrame:
    """TCP send and recv rows as the probes time them: a repetition-wide
    drift (a shared VM's 10-30 %), batch noise, and ``jump`` times the cost
    from 512 B to 1024 B for send over many connections with delayed ACKs
    (the default run's 1.54x)."""
    rng = np.random.default_rng(seed)
    rows = []
    for rep in range(1, reps + 1):
        drift = rng.uniform(0.8, 1.3)
        for variant, base in (("send", 1550.0), ("recv", 300.0)):
            for pattern in ("roundrobin", "single"):
                for ack in ("pingpong", "quickack"):
                    for size in SIZES:
                        cost = base * (1 + size / 20000) * drift
                        if (variant, pattern, ack) == ("send", "roundrobin", "pingpong") and size == 1024:
                            cost *= jump
                        for ns in cost * rng.lognormal(0, noise, 30):
                            rows.append(
                                dict(
                                    transport="tcp",
                                    variant=variant,
                                    pattern=pattern,
                                    ack=ack,
                                    bytes=size,
                                    rep=rep,
                                    ns_per_call=ns,
                                )
                            )
    return pd.DataFrame(rows)


def test_the_1_kib_jump_is_named_with_its_paired_ratio() -> None:
    found = steps.steps(probes(1.54))
    assert [(s.variant, s.pattern, s.ack, s.small, s.large) for s in found] == [
        ("send", "roundrobin", "pingpong", 512, 1024)
    ]
    assert 1.4 < found[0].ratio.value < 1.7 and found[0].others is not None and found[0].others < 1.1
    text = steps.sentence(probes(1.54))
    assert text.startswith("One step") and "TCP send over many connections with delayed ACKs" in text
    shown = re.search(r"costs (\d\.\d\d)× as much per call at 1024 B as at 512 B", text)
    assert shown and float(shown.group(1)) == round(found[0].ratio.value, 2)
    assert "unexplained" in text


def test_a_rise_of_the_bytes_copied_is_no_step() -> None:
    # Negative control: without the jump, drift across repetitions (up to
    # 1.6x between them) must not read as a step: the ratio is paired.
    assert steps.steps(probes(1.0)) == [] and steps.sentence(probes(1.0)) == ""
    # ... and a 10 % rise is not a quarter.
    assert steps.steps(probes(1.10)) == []
