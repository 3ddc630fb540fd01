"""The pooled verdicts about the machine kind hold their error in the world
these machines show (a persistent occasion effect, normal and skewed laws,
the spread at 1-3x, each claim shape's least-favourable configuration)
where broken procedures fail the same check, decide when the truth is clear
of its bound, and reach the sources' own verdicts through the real claim
functions (iolab.procedure.kind_errors, iolab.claims.faithful)."""

from __future__ import annotations

import numpy as np
import pytest

from iolab.claims import faithful
from iolab.procedure import kind_errors as run_errors
from iolab.procedure.kind_errors import C2_LIKE, ONE_PART, SHAPES, U1_LIKE, World

# --- the error guarantee, in the world these machines show -----------------------

WORLDS = [
    World(law, run_errors.SIGMA * m, shared) for law in run_errors.LAWS for m in (1, 2, 3) for shared in (True, False)
]


@pytest.mark.parametrize("procedure", sorted(run_errors.PROCEDURES))
@pytest.mark.parametrize("shape", SHAPES, ids=[s.name for s in SHAPES])
def test_the_pooled_verdict_holds_its_error_in_every_world(procedure: str, shape: run_errors.Shape) -> None:
    for world in WORLDS:
        for k in (8, 16):
            wrong_r, wrong_n = run_errors.error_rates(run_errors.PROCEDURES[procedure], shape, k, world, sims=2000)
            assert wrong_r.holds() and wrong_n.holds(), (world.text(), k, wrong_r.rate, wrong_n.rate)


# Each broken procedure, and the world in which the check must catch it.
CAUGHT = {
    "5 % per side": (C2_LIKE, World("slow tail", 0.10, True)),
    "Holm dropped": (U1_LIKE, World("normal", 0.10, False)),
    "t over runs": (C2_LIKE, World("slow tail", 0.10, True)),
    "runs of one launch counted as launches": (U1_LIKE, World("normal", 0.10, False)),
    "fixed-sample re-checked": (ONE_PART, World("slow tail", 0.10, False)),
    "a single run, no occasion handling": (ONE_PART, World("normal", 0.10, True)),
}


@pytest.mark.parametrize("control", sorted(run_errors.CONTROLS))
def test_each_broken_procedure_fails_the_same_check(control: str) -> None:
    shape, world = CAUGHT[control]
    wrong = run_errors.error_rates(run_errors.CONTROLS[control], shape, 16, world, sims=2000)
    assert not all(w.holds() for w in wrong), (control, [w.rate for w in wrong])
    # The package's procedures pass it in that very world.
    for procedure in run_errors.PROCEDURES.values():
        assert all(w.holds() for w in run_errors.error_rates(procedure, shape, 16, world, sims=2000))


def never_decides(shape: run_errors.Shape, values: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    none = np.zeros(values[0].shape[:-1], dtype=bool)
    return none, none


def test_it_decides_when_the_truth_is_clear_of_its_bound_and_a_mute_test_fails() -> None:
    # One part, a truth 10 % beyond its bound, 16 runs at 0.10 of spread: the
    # exact sign test decides it right about 60 % of the time (either way);
    # 25 % beyond, at 8 runs, over 80 %.
    normal = World()
    ten = run_errors.power(run_errors.planned, ONE_PART, 16, normal, 0.10)
    quarter = run_errors.power(run_errors.planned, ONE_PART, 8, normal, 0.25)
    assert min(ten) >= 0.5 and min(quarter) >= 0.8, (ten, quarter)
    # A procedure that never decides holds any error rate and fails this.
    assert all(w.holds() for w in run_errors.error_rates(never_decides, ONE_PART, 16, normal))
    assert max(run_errors.power(never_decides, ONE_PART, 16, normal, 0.25)) == 0.0


def test_a_t_over_runs_buys_its_power_only_by_breaking_the_bound_where_runs_are_skewed() -> None:
    # The frontier behind choosing the sign test: a t over runs, gated by a
    # symmetry check loose enough to reach 80 % power where run medians are
    # symmetric (16 runs, a tenth beyond the bound, spread 0.10), errs well
    # beyond 2.5 % under the slow-tail law in that same check; gated more
    # tightly, it no longer reaches 80 % (and still errs: python -m
    # iolab.procedure.kind_errors --frontier). The sign test holds.
    normal, slow = World(), World("slow tail", 0.10, True)
    loose, tight = run_errors.gated(1.0), run_errors.gated(0.5)
    assert run_errors.power(loose, ONE_PART, 16, normal, 0.10)[0] >= 0.8
    assert not all(w.holds() for w in run_errors.error_rates(loose, ONE_PART, 16, slow, sims=2000))
    assert run_errors.power(tight, ONE_PART, 16, normal, 0.10)[0] < 0.8
    assert all(w.holds() for w in run_errors.error_rates(run_errors.planned, ONE_PART, 16, slow, sims=2000))


# --- the sources' own tables, through the real claim functions, over runs ----------


@pytest.mark.parametrize("claim", ["U1", "U2", "U3", "C1", "C2", "C3"])
def test_the_sources_own_table_is_reproduced_at_a_finite_number_of_runs(claim: str) -> None:
    # Each run a faithful replication (6 repetitions, 0.10 between them) moved
    # by its occasion (0.10): pooled, the source's verdict comes at some k.
    k, shares = faithful.runs_to_decide(claim, reps=6, within=0.10, sigma=0.10, studies=40)
    assert k is not None and k <= max(faithful.RUN_COUNTS), shares
    # More runs decide it more often: from the fewest counted to the most.
    assert shares[max(faithful.RUN_COUNTS)] > shares[min(faithful.RUN_COUNTS)], shares
