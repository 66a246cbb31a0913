"""Uniform sampling of topological orders for L3 (SchrodingerRepo §III-D)."""

from __future__ import annotations

import itertools
import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raydist.views.l3.sample import count_linear_extensions, is_linear_extension, sample_linear_extension


@st.composite
def dags(draw, max_nodes: int = 22):
    n = draw(st.integers(min_value=1, max_value=max_nodes))
    pairs = [(a, b) for a in range(n) for b in range(a + 1, n)]
    edges = draw(st.lists(st.sampled_from(pairs), max_size=2 * n, unique=True)) if pairs else []
    return n, edges


@settings(max_examples=150, deadline=None)
@given(dags(), st.integers(min_value=0, max_value=2**32))
def test_every_sample_is_a_topological_order(dag, seed):
    n, edges = dag
    order = sample_linear_extension(n, edges, random.Random(seed))
    assert is_linear_extension(order, n, edges)


@settings(max_examples=80, deadline=None)
@given(dags(max_nodes=7))
def test_count_matches_brute_force(dag):
    n, edges = dag
    brute = sum(is_linear_extension(p, n, edges) for p in itertools.permutations(range(n)))
    assert count_linear_extensions(n, edges) == brute


def test_counts_of_known_posets():
    assert count_linear_extensions(4, []) == 24
    assert count_linear_extensions(4, [(0, 1), (1, 2), (2, 3)]) == 1
    # two components: {0,1}<2 has 2 orders, 3<4 has 1; 10 interleavings of sizes 3 and 2
    assert count_linear_extensions(5, [(0, 2), (1, 2), (3, 4)]) == 20


def test_samples_are_uniform_over_linear_extensions():
    n, edges = 5, [(0, 2), (1, 2), (3, 4)]
    rng = random.Random(7)
    draws = 20_000
    counts = Counter(tuple(sample_linear_extension(n, edges, rng)) for _ in range(draws))
    assert len(counts) == 20
    expected = draws / 20
    assert all(0.85 * expected < c < 1.15 * expected for c in counts.values())


def test_connected_component_sampled_exactly_is_uniform():
    # A diamond 0 < {1, 2, 3} < 4 is one component with 3! = 6 extensions.
    n, edges = 5, [(0, 1), (0, 2), (0, 3), (1, 4), (2, 4), (3, 4)]
    rng = random.Random(11)
    counts = Counter(tuple(sample_linear_extension(n, edges, rng)) for _ in range(6_000))
    assert sorted(counts) == sorted((0, *p, 4) for p in itertools.permutations((1, 2, 3)))
    assert all(850 < c < 1150 for c in counts.values())


def test_large_component_uses_the_chain_and_stays_valid():
    # A hub read by 19 definitions: one component of 20 nodes, beyond the exact limit.
    n, edges = 20, [(0, b) for b in range(1, 20)]
    orders = {tuple(sample_linear_extension(n, edges, random.Random(s))) for s in range(5)}
    assert len(orders) == 5
    assert all(o[0] == 0 and is_linear_extension(o, n, edges) for o in orders)


def test_only_valid_order_is_the_original():
    assert sample_linear_extension(4, [(0, 1), (1, 2), (2, 3)], random.Random(3)) == [0, 1, 2, 3]


def test_malformed_edge_is_rejected():
    with pytest.raises(ValueError, match=r"edge \(2, 1\)"):
        sample_linear_extension(3, [(2, 1)], random.Random(0))
