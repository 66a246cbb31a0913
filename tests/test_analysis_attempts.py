"""Repeated attempts (``attempts=k``): the plan's units and keys, pass@k over attempts, the
run-to-run standard deviation, the L0 noise floor beside Δ (Table I and the significance
table), and the paired tests over seeds x attempts. Every expected value is computed by hand."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from raydist._util.hashing import stable_hash
from raydist.analysis import attempts as at
from raydist.analysis import repositories as rp
from raydist.analysis import significance as sg
from raydist.analysis.pass_at_k import pass_at_k_exact
from raydist.cluster.unit_key import RunUnit, build_plan
from raydist.problems.metrics import pass_at_k
from raydist.tasks import load_instances
from tests.test_analysis_repositories import R, U, table, unit


def attempts_of(instance: str, level: str, verdicts: str, seed: int = 0, **fields) -> list[dict]:
    """One row per attempt of a view: ``verdicts`` is a string of R (resolved), U (unresolved)
    and E (an infrastructure error), attempt 0 first."""
    outcome = {"R": R, "U": U, "E": "infrastructure_error"}
    return [unit(instance, level, seed, outcome[v], attempt=a, key=f"{instance}/{level}/{seed}/{a}", **fields)
            for a, v in enumerate(verdicts)]


# Two instances, one seed, three attempts. L0: i1 R R U, i2 U U U -> runs' Pass@1 1/2, 1/2, 0.
# L3: i1 R U U, i2 U U U -> runs' Pass@1 1/2, 0, 0.
ROWS = [*attempts_of("i1", "L0", "RRU"), *attempts_of("i2", "L0", "UUU"),
        *attempts_of("i1", "L3", "RUU"), *attempts_of("i2", "L3", "UUU")]


def test_pass_at_k_is_one_estimator_for_problems_and_attempts():
    # 1 - C(1, 2) / C(3, 2) = 1 - 0/3 = 1; 1 - C(2, 2) / C(3, 2) = 1 - 1/3 = 2/3.
    assert pass_at_k_exact(3, 2, 2) == 1 and pass_at_k_exact(3, 1, 2) == Fraction(2, 3)
    assert pass_at_k(5, 2, 2) == 0.7
    with pytest.raises(ValueError, match="pass@3 needs at least 3 samples"):
        pass_at_k_exact(2, 1, 3)


def test_a_cell_gives_pass_at_k_the_run_to_run_sd_and_its_runs():
    l0 = at.cell_attempts([r for r in ROWS if r["level"] == "L0"])
    # pass@3: i1 has 2 of 3 resolved -> 1; i2 none -> 0; mean 1/2. Runs 1/2, 1/2, 0: mean 1/3, squared
    # deviations 1/36 + 1/36 + 4/36 = 1/6, over n - 1 = 2: variance 1/12, sd sqrt(1/12) = 0.288675.
    assert l0 == {"attempts": 3, "runs": 3, "pass_at_k": 0.5, "pass_at_k_views": 2, "short_views": 0,
                  "run_sd": pytest.approx(math.sqrt(1 / 12), rel=1e-12)}


def test_a_view_with_an_errored_attempt_has_fewer_than_k_and_is_left_out_of_pass_at_k():
    rows = [*attempts_of("i1", "L3", "RUU"), *attempts_of("i2", "L3", "RUE")]
    cell = at.cell_attempts(rows)
    # k = 3 (attempt 2 exists), i2 has 2 finished attempts: only i1 counts, pass@3 = 1.
    assert (cell["attempts"], cell["pass_at_k"], cell["pass_at_k_views"], cell["short_views"]) == (3, 1.0, 1, 1)


def test_one_attempt_has_no_run_to_run_sd_and_no_noise_floor():
    rows = [unit("i1", "L0"), unit("i1", "L3", outcome=U)]
    cells = at.attempt_cells(rows)
    assert cells[("m", "a", "L0")]["run_sd"] is None and cells[("m", "a", "L3")]["noise_floor"] is None
    # A second seed is a second view, not a repetition: still no run-to-run sd.
    assert at.cell_attempts([unit("i1", "L3", 0), unit("i1", "L3", 1, U, key="s1")])["run_sd"] is None


def test_the_run_to_run_sd_pools_the_variance_over_seeds_not_across_them():
    # seed 0: runs 1, 1 (variance 0); seed 1: runs 0, 1 (variance 1/2): pooled sqrt(1/4) = 1/2.
    rows = [*attempts_of("i1", "L3", "RR", seed=0), *attempts_of("i1", "L3", "UR", seed=1)]
    assert at.cell_attempts(rows)["run_sd"] == pytest.approx(0.5)


def test_table_i_sets_delta_beside_the_l0_noise_floor():
    rows = {r["level"]: r for r in rp.level_table(table(ROWS))}
    l0, l3 = rows["L0"], rows["L3"]
    assert (l0["attempts"], l0["runs"], l0["pass_at_k"], l0["noise_floor_pp"], l0["exceeds_noise_floor"]) == (
        3, 3, 0.5, None, None)
    # Paired Δ: i1 1/3 - 2/3, i2 0 - 0 -> -1/6 = -16.67 points. L3 pass@3: i1 1 of 3 -> 1, i2 0: 1/2.
    # Floor: 2 * sqrt(1/12) * sqrt(1/3 + 1/3) = 0.471405 -> 47.14 points; |Δ| is within it.
    assert l3["delta_pp"] == pytest.approx(-100 / 6)
    assert l3["pass_at_k"] == 0.5 and l3["run_sd"] == pytest.approx(math.sqrt(1 / 12))
    assert l3["noise_floor_pp"] == pytest.approx(200 * math.sqrt(1 / 12) * math.sqrt(2 / 3))
    assert l3["exceeds_noise_floor"] is False


def test_a_delta_past_a_quiet_l0_exceeds_the_floor_and_the_paired_test_uses_every_attempt():
    # L0 repeats exactly (sd 0, floor 0): i1 R R R, i2 U U U. L3: i1 R U U, i2 U U U.
    rows = [*attempts_of("i1", "L0", "RRR"), *attempts_of("i2", "L0", "UUU"),
            *attempts_of("i1", "L3", "RUU"), *attempts_of("i2", "L3", "UUU")]
    [test] = sg.paired_significance(table(rows))
    # i1's share 1 -> 1/3 (a fraction: the sign-flip test), i2 0 -> 0: Δ = (-2/3) / 2 = -33.33 points.
    assert test["test"] == sg.SIGN_FLIP and test["delta_pp"] == pytest.approx(-100 / 3)
    assert (test["noise_floor_pp"], test["exceeds_noise_floor"]) == (0.0, True)
    # One non-zero difference: sign patterns +-2/3, both as extreme: p = 1.
    assert test["p_value"] == 1.0


def test_the_significance_table_gives_table_i_noise_floor():
    [test] = sg.paired_significance(table(ROWS))
    assert test["noise_floor_pp"] == pytest.approx(200 * math.sqrt(1 / 12) * math.sqrt(2 / 3))
    assert test["exceeds_noise_floor"] is False


def test_rows_written_before_attempts_read_as_attempt_zero():
    rows = [unit("i1", "L0"), unit("i1", "L3", outcome=U)]  # attempt column null
    cells = at.attempt_cells(table(rows).to_pylist())
    assert cells[("m", "a", "L3")]["attempts"] == 1 and cells[("m", "a", "L3")]["pass_at_k"] == 0.0


def test_attempts_multiply_the_plan_and_attempt_zero_keeps_the_key_a_unit_had():
    instances = load_instances("builtin", limit=1)
    one = build_plan(instances, model="-", agent="null", levels=["L0"], seeds=[0], config_hash="c")
    three = build_plan(instances, model="-", agent="null", levels=["L0"], seeds=[0], config_hash="c", attempts=3)
    assert [u.attempt for u in three] == [0, 1, 2]
    assert three[0].key == one[0].key and len({u.key for u in three}) == 3
    # The key of attempt 0 is the hash of the fields without ``attempt``, as before attempts existed.
    unit0 = RunUnit("i", "h", "-", "null", "L0", 0, "c")
    assert unit0.key == stable_hash({"instance_id": "i", "instance_hash": "h", "model": "-", "agent": "null",
                                     "level": "L0", "seed": 0, "config_hash": "c"}, 24)
    with pytest.raises(ValueError, match="attempts=0"):
        build_plan(instances, model="-", agent="null", levels=["L0"], seeds=[0], config_hash="c", attempts=0)
