"""pass@k (Chen et al. 2021) and DyPass@k (DyCodeEval §5) against hand-computed values."""

from itertools import combinations
from math import comb

import numpy as np
import pytest

from raydist.problems import dypass_at_k, mean_pass_at_k, pass_at_k


def _humaneval_product_form(n: int, c: int, k: int) -> float:
    """The HumanEval paper's numerically stable estimator, for comparison."""
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


# --- pass@k --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (5, 2, 1, 0.4),  # c / n
        (5, 2, 2, 0.7),  # 1 - C(3,2)/C(5,2) = 1 - 3/10
        (5, 2, 4, 1.0),  # n - c < k: every draw of 4 holds a correct sample
        (10, 0, 1, 0.0),
        (10, 0, 10, 0.0),
        (10, 10, 1, 1.0),
        (1, 1, 1, 1.0),
        (4, 1, 2, 0.5),  # 1 - C(3,2)/C(4,2) = 1 - 3/6
    ],
)
def test_pass_at_k_hand_values(n, c, k, expected):
    assert pass_at_k(n, c, k) == expected


def test_pass_at_k_matches_the_humaneval_product_form():
    for n in (1, 7, 20, 200):
        for c in {0, 1, n // 3, n - 1, n}:
            for k in {1, n // 2 or 1, n}:
                assert pass_at_k(n, c, k) == pytest.approx(_humaneval_product_form(n, c, k), abs=1e-12), (n, c, k)


def test_pass_at_k_is_exact_where_floating_point_products_lose_digits():
    # 1 - C(999_999, 10)/C(1_000_000, 10) = 10 / 1_000_000 exactly; the product form gives 9.99999999995449e-06
    assert pass_at_k(1_000_000, 1, 10) == 1e-05


@pytest.mark.parametrize(
    ("n", "c", "k", "message"),
    [
        (5, 2, 6, r"pass@6 needs at least 6 samples \(got n=5\)"),
        (5, 6, 1, r"more correct samples than samples \(c=6 > n=5\)"),
        (-1, 0, 1, r"sample counts must be >= 0"),
        (5, -1, 1, r"sample counts must be >= 0"),
        (5, 2, 0, r"k must be >= 1 \(got k=0\)"),
        (5, 2, -1, r"k must be >= 1"),
    ],
)
def test_pass_at_k_refuses_impossible_counts(n, c, k, message):
    with pytest.raises(ValueError, match=message):
        pass_at_k(n, c, k)


def test_mean_pass_at_k_averages_over_problems():
    assert mean_pass_at_k({"a": (5, 2), "b": (10, 0), "c": (3, 3)}, 1) == pytest.approx((0.4 + 0 + 1) / 3)
    assert mean_pass_at_k({"a": (5, 2), "b": (5, 5)}, 2) == 0.85


def test_mean_pass_at_k_names_the_problem_with_too_few_samples():
    with pytest.raises(ValueError, match=r"^HumanEval/7: pass@2 needs at least 2 samples \(got n=1\)"):
        mean_pass_at_k({"HumanEval/0": (5, 1), "HumanEval/7": (1, 1)}, 2)
    with pytest.raises(ValueError, match="at least one problem"):
        mean_pass_at_k({}, 1)


# --- DyPass@k ------------------------------------------------------------------------

# Seed A: variant 1 has 1 of 2 completions correct, variant 2 has 0 of 3.
# Seed B: two variants with one correct completion each.
TWO_SEEDS = {"A": [(2, 1), (3, 0)], "B": [(1, 1), (1, 1)]}


def test_dypass_pools_the_completions_of_all_variants_of_a_seed():
    # A: N=5, C=1 -> k=1: 1/5; k=2: 1 - C(4,2)/C(5,2) = 1 - 6/10 = 0.4.  B: 1.
    assert dypass_at_k(TWO_SEEDS, 1) == 0.6  # (0.2 + 1) / 2
    assert dypass_at_k(TWO_SEEDS, 2) == 0.7  # (0.4 + 1) / 2


def test_dypass_over_distinct_variants_draws_one_completion_per_variant():
    # A: pass rates 1/2 and 0 -> k=1: mean 1/4; k=2: 1 - (1/2 * 1) = 1/2.  B: 1.
    assert dypass_at_k(TWO_SEEDS, 1, draw="variants") == 0.625
    assert dypass_at_k(TWO_SEEDS, 2, draw="variants") == 0.75


def test_dypass_over_distinct_variants_is_the_average_over_all_variant_subsets():
    counts = [(3, 1), (4, 2), (5, 0), (2, 2)]
    fail = [1 - c / n for n, c in counts]
    for k in (1, 2, 3, 4):
        subsets = list(combinations(range(len(counts)), k))
        expected = sum(1 - np.prod([fail[i] for i in s]) for s in subsets) / comb(len(counts), k)
        assert dypass_at_k({"s": counts}, k, draw="variants") == pytest.approx(expected, abs=1e-12)


def test_dypass_with_one_variant_is_pass_at_k():
    results = {"a": [(10, 3)], "b": [(10, 9)]}
    assert dypass_at_k(results, 3) == mean_pass_at_k({"a": (10, 3), "b": (10, 9)}, 3)


def test_dypass_draws_coincide_when_every_variant_has_one_completion():
    results = {"a": [(1, 1), (1, 0), (1, 0), (1, 1), (1, 0)], "b": [(1, 0), (1, 0), (1, 1)]}
    for k in (1, 2, 3):
        assert dypass_at_k(results, k) == pytest.approx(dypass_at_k(results, k, draw="variants"), abs=1e-15)


def test_dypass_of_a_model_that_solves_only_the_seed_prompt_falls():
    # a memorised seed: the original prompt always solved, its rephrasings never
    assert pass_at_k(10, 10, 1) == 1.0
    assert dypass_at_k({"s": [(10, 10), (10, 0), (10, 0), (10, 0), (10, 0)]}, 1) == 0.2


@pytest.mark.parametrize(
    ("results", "k", "draw", "message"),
    [
        ({"A": []}, 1, "completions", r"^A: no variants"),
        ({"A": [(2, 3)]}, 1, "completions", r"^A: a variant has invalid counts \(n=2, c=3\)"),
        ({"A": [(1, 0), (1, 1)]}, 3, "completions", r"^A: pass@3 needs at least 3 samples \(got n=2\)"),
        ({"A": [(5, 1), (5, 1)]}, 3, "variants",
         r"^A: drawing 3 distinct variants needs at least 3 variants \(got 2\)"),
        ({"A": [(0, 0), (5, 1)]}, 1, "variants", r"^A: a variant has no completion"),
        ({"A": [(5, 1)]}, 0, "variants", r"^A: k must be >= 1"),
        ({}, 1, "completions", r"at least one seed problem"),
        ({"A": [(5, 1)]}, 1, "all", r"draw must be 'completions' or 'variants', not 'all'"),
    ],
)
def test_dypass_refuses_impossible_input(results, k, draw, message):
    with pytest.raises(ValueError, match=message):
        dypass_at_k(results, k, draw=draw)
