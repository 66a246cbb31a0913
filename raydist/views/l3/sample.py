"""Uniform sampling of topological orders (linear extensions) of a small DAG.

SchrodingerRepo §III-D samples a valid definition order "uniformly when alternatives
exist". The nodes are the definitions of one run, numbered in original order, and every
edge ``(a, b)`` has ``a < b``: ``a`` must stay before ``b``.

Exact uniformity comes from the structure of linear extensions: those of a disjoint
union are exactly (one extension per weakly connected component) x (an interleaving of
the components), so each component is sampled on its own and the components are
interleaved uniformly. A component of at most ``EXACT_LIMIT`` nodes is sampled exactly by
counting extensions over its down-sets; a bigger one falls back to the lazy
adjacent-transposition Markov chain (Karzanov and Khachiyan 1991, uniform in the limit)
run for a bounded number of steps, which is approximate.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Sequence

EXACT_LIMIT = 16
MAX_CHAIN_STEPS = 500_000


def _components(n: int, edges: Sequence[tuple[int, int]]) -> list[list[int]]:
    parent = list(range(n))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in edges:
        parent[find(a)] = find(b)
    groups: dict[int, list[int]] = {}
    for v in range(n):
        groups.setdefault(find(v), []).append(v)
    return sorted(groups.values(), key=lambda g: g[0])


def _check(n: int, edges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    checked = sorted(set(edges))
    for a, b in checked:
        if not (0 <= a < b < n):
            raise ValueError(f"edge ({a}, {b}) must satisfy 0 <= a < b < n={n}: nodes are numbered in original order")
    return checked


class _DownsetCounter:
    """Number of linear extensions of the nodes outside each reachable down-set."""

    def __init__(self, nodes: Sequence[int], edges: Sequence[tuple[int, int]]) -> None:
        index = {v: i for i, v in enumerate(nodes)}
        self.size = len(nodes)
        self.full = (1 << self.size) - 1
        self.preds = [0] * self.size
        for a, b in edges:
            if a in index and b in index:
                self.preds[index[b]] |= 1 << index[a]
        self.memo: dict[int, int] = {self.full: 1}

    def available(self, placed: int) -> list[int]:
        return [v for v in range(self.size) if not placed >> v & 1 and self.preds[v] & ~placed == 0]

    def count(self, placed: int) -> int:
        # Down-sets only: the recursion never places a node before its predecessors.
        known = self.memo.get(placed)
        if known is None:
            known = sum(self.count(placed | 1 << v) for v in self.available(placed))
            self.memo[placed] = known
        return known


def count_linear_extensions(n: int, edges: Iterable[tuple[int, int]]) -> int:
    """Exact number of topological orders of nodes ``0..n-1`` under ``edges``.

    Multiplies the per-component counts by the multinomial number of interleavings.
    Raises ValueError on an edge that is not ``0 <= a < b < n`` or when a component has
    more than ``EXACT_LIMIT`` nodes (the count is exponential in component size).
    """
    checked = _check(n, edges)
    total, sizes = 1, []
    for comp in _components(n, checked):
        if len(comp) > EXACT_LIMIT:
            raise ValueError(f"component of {len(comp)} nodes exceeds EXACT_LIMIT={EXACT_LIMIT}")
        total *= _DownsetCounter(comp, checked).count(0)
        sizes.append(len(comp))
    return total * math.factorial(n) // math.prod(math.factorial(s) for s in sizes)


def _sample_exact(comp: Sequence[int], edges: Sequence[tuple[int, int]], rng: random.Random) -> list[int]:
    counter = _DownsetCounter(comp, edges)
    placed, order = 0, []
    while placed != counter.full:
        pick = rng.randrange(counter.count(placed))
        for v in counter.available(placed):
            weight = counter.count(placed | 1 << v)
            if pick < weight:
                break
            pick -= weight
        placed |= 1 << v
        order.append(comp[v])
    return order


def chain_steps(size: int) -> int:
    """Steps of the transposition chain for a component of ``size`` nodes.

    ``size**3 * ln(size)`` is the mixing order of random adjacent transpositions (Wilson
    2004); capped at ``MAX_CHAIN_STEPS`` so that huge files stay cheap, hence approximate.
    """
    return min(MAX_CHAIN_STEPS, math.ceil(size**3 * math.log(size)))


def _sample_chain(comp: Sequence[int], edges: Sequence[tuple[int, int]], rng: random.Random) -> list[int]:
    order = list(comp)
    blocked = set(edges)
    slots = len(order) - 1
    for _ in range(chain_steps(len(order))):
        # Half of the draws are no-ops: the lazy chain is aperiodic, so its limit is uniform.
        i = rng.randrange(2 * slots)
        if i < slots and (order[i], order[i + 1]) not in blocked:
            order[i], order[i + 1] = order[i + 1], order[i]
    return order


def sample_linear_extension(n: int, edges: Iterable[tuple[int, int]], rng: random.Random) -> list[int]:
    """A topological order of nodes ``0..n-1`` drawn uniformly (see module doc) from ``rng``.

    ``edges``: pairs ``(a, b)``, ``a < b``, meaning ``a`` precedes ``b``. Returns a
    permutation of ``range(n)``; when only one order is valid it is ``list(range(n))``.
    Raises ValueError on a malformed edge.
    """
    checked = _check(n, edges)
    orders = []
    for comp in _components(n, checked):
        if len(comp) == 1:
            orders.append(comp)
        elif len(comp) <= EXACT_LIMIT:
            orders.append(_sample_exact(comp, checked, rng))
        else:
            orders.append(_sample_chain(comp, checked, rng))
    labels = [c for c, order in enumerate(orders) for _ in order]
    rng.shuffle(labels)
    streams = [iter(order) for order in orders]
    return [next(streams[c]) for c in labels]


def is_linear_extension(order: Sequence[int], n: int, edges: Iterable[tuple[int, int]]) -> bool:
    """True iff ``order`` is a permutation of ``range(n)`` that respects every edge."""
    if sorted(order) != list(range(n)):
        return False
    position = {v: i for i, v in enumerate(order)}
    return all(position[a] < position[b] for a, b in edges)
