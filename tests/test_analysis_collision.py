"""DyCodeEval §3.3 / Appendix A: the exact collision probabilities on hand-computed cases, the
bounds against the exact forms over a grid, and the observed rates."""

from __future__ import annotations

import math
import random

import pytest

from raydist.analysis import collision as c


def test_outcome_space_is_scenarios_times_contexts():
    assert c.outcome_space(50, 50) == 2500


@pytest.mark.parametrize("bad", [0, -1, 2.5, True])
def test_counts_must_be_positive_integers(bad):
    with pytest.raises(ValueError):
        c.outcome_space(bad, 3)
    with pytest.raises(ValueError):
        c.repeat_probability(10, 1, bad)


def test_two_runs_over_ten_outcomes_collide_with_probability_one_tenth():
    assert c.collision_probability(10, 1, 2) == 0.1
    assert c.repeat_probability(10, 1, 2) == 0.1


def test_three_runs_over_ten_outcomes():
    # 1 - (9/10)(8/10) and 1 - (9/10)^2
    assert c.collision_probability(10, 1, 3) == 0.28
    assert c.repeat_probability(5, 2, 3) == 0.19


def test_one_run_never_repeats():
    assert c.repeat_probability(10, 1, 1) == 0.0
    assert c.collision_probability(10, 1, 1) == 0.0
    assert c.repeat_bound(10, 1, 1) == 0.0


def test_more_runs_than_outcomes_always_collide():
    assert c.collision_probability(3, 1, 4) == 1.0


def test_a_single_outcome_repeats_for_sure():
    assert c.repeat_probability(1, 1, 2) == 1.0
    assert c.repeat_bound(1, 1, 2) == 1.0


def test_paper_setting_repeat_in_two_runs_is_one_in_2500():
    assert c.repeat_probability(50, 50, 2) == 1 / 2500


def test_closed_forms_on_hand_values():
    assert c.repeat_bound(10, 1, 3) == pytest.approx(1 - math.exp(-2 / 9), rel=1e-15)
    assert c.collision_bound(10, 1, 3) == pytest.approx(0.3, rel=1e-15)
    assert c.collision_approximation(10, 1, 3) == pytest.approx(1 - math.exp(-0.3), rel=1e-15)
    assert c.collision_bound(2, 1, 5) == 1.0


def test_dataset_of_two_seeds_over_two_outcomes_each():
    # N = 2, D = 2: four equally likely datasets
    assert c.dataset_repeat_probability(2, 1, 2, 2) == 0.25
    assert c.dataset_collision_probability(2, 1, 2, 3) == 0.625  # 1 - (3/4)(2/4)
    assert c.problem_repeat_probability(2, 1, 2, 2) == 0.75  # 1 - (1 - 1/2)^2
    assert c.dataset_repeat_bound(2, 1, 2, 2) == pytest.approx(1 - math.exp(-1 / 3), rel=1e-15)


def test_paper_sized_dataset_repeat_underflows_to_zero_without_error():
    # 2500^-164 is far below the smallest float
    assert c.dataset_repeat_probability(50, 50, 164, 10) == 0.0
    assert c.dataset_collision_probability(50, 50, 164, 1000) == 0.0
    assert c.dataset_repeat_bound(50, 50, 164, 10) == 0.0


GRID_N = [1, 2, 3, 5, 10, 50, 2500]
GRID_M = [1, 2, 3, 5, 10, 50, 100]


@pytest.mark.parametrize("n", GRID_N)
@pytest.mark.parametrize("m", GRID_M)
def test_theorem_3_1_bound_holds(n, m):
    exact = c.repeat_probability(n, 1, m)
    bound = c.repeat_bound(n, 1, m)
    assert exact <= bound + 1e-15
    if n > 1:
        assert bound <= (m - 1) / (n - 1) + 1e-15


@pytest.mark.parametrize("n", GRID_N)
@pytest.mark.parametrize("m", GRID_M)
def test_theorem_3_2_exact_lies_between_birthday_approximation_and_union_bound(n, m):
    exact = c.collision_probability(n, 1, m)
    assert c.collision_approximation(n, 1, m) <= exact + 1e-15
    assert exact <= c.collision_bound(n, 1, m) + 1e-15


@pytest.mark.parametrize("d", [1, 2, 3])
@pytest.mark.parametrize("m", [2, 3, 10])
def test_theorem_3_3_bounds_hold(d, m):
    assert c.dataset_repeat_probability(3, 2, d, m) <= c.dataset_repeat_bound(3, 2, d, m) + 1e-15
    assert c.dataset_collision_probability(3, 2, d, m) <= c.dataset_collision_bound(3, 2, d, m) + 1e-15
    assert c.problem_repeat_probability(3, 2, d, m) <= c.problem_repeat_bound(3, 2, d, m) + 1e-15


def test_theorem_3_3_with_one_seed_is_theorem_3_1():
    assert c.dataset_repeat_probability(7, 3, 1, 5) == c.repeat_probability(7, 3, 5)


def test_log_space_agrees_with_exact_arithmetic(monkeypatch):
    exact = (c.collision_probability(2500, 1, 100), c.repeat_probability(2500, 1, 100))
    monkeypatch.setattr(c, "_EXACT_BITS", 0)
    approx = (c.collision_probability(2500, 1, 100), c.repeat_probability(2500, 1, 100))
    assert approx == pytest.approx(exact, rel=1e-12)


def test_normalise_collapses_whitespace_only():
    assert c.normalise("  a\tb \n c  ") == "a b c"
    assert c.normalise("A b") != c.normalise("a b")


def test_repeat_rate_counts_seeds_whose_first_generation_recurs():
    runs = {"s1": ["x", "y", " x "], "s2": ["p", "q", "q"], "s3": ["u", "v", "w"]}
    assert c.repeat_rate(runs) == pytest.approx(1 / 3)
    assert c.seed_collision_rate(runs) == pytest.approx(2 / 3)


def test_rates_need_two_generations_per_seed():
    with pytest.raises(ValueError):
        c.repeat_rate({"s1": ["x"]})
    with pytest.raises(ValueError):
        c.seed_collision_rate([])


def test_collision_rate_is_the_share_of_identical_dataset_pairs():
    datasets = [{"s1": "a", "s2": "b"}, {"s1": "a", "s2": "b  "}, {"s1": "a", "s2": "c"}]
    assert c.collision_rate(datasets) == pytest.approx(1 / 3)


def test_collision_rate_rejects_mismatched_or_too_few_datasets():
    with pytest.raises(ValueError):
        c.collision_rate([{"s1": "a"}])
    with pytest.raises(ValueError):
        c.collision_rate([{"s1": "a"}, {"s2": "a"}])


def test_per_seed_transposes_datasets_in_run_order():
    assert c.per_seed([{"s1": "a", "s2": "b"}, {"s1": "c", "s2": "d"}]) == {"s1": ["a", "c"], "s2": ["b", "d"]}


def test_observed_rates_estimate_the_exact_probabilities():
    # 20000 seeds, each with M = 3 uniform draws out of N = 10 outcomes
    rng = random.Random(0)
    runs = [[str(rng.randrange(10)) for _ in range(3)] for _ in range(20000)]
    assert c.repeat_rate(runs) == pytest.approx(c.repeat_probability(10, 1, 3), abs=0.01)
    assert c.seed_collision_rate(runs) == pytest.approx(c.collision_probability(10, 1, 3), abs=0.01)
