"""pass@k and DyCodeEval's DyPass@k, computed exactly.

pass@k is the unbiased estimator of Chen et al. 2021 (the HumanEval paper, §2.1), the one
``raydist.analysis.pass_at_k`` holds: with ``n`` samples of which ``c`` are correct,
pass@k = 1 - C(n-c, k) / C(n, k), an exact fraction converted to ``float`` once at the end.

DyPass@k (DyCodeEval §5) scores a model on semantic prompt variants of each seed problem
instead of the seed's fixed prompt. :func:`dypass_at_k` documents the definition used.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction
from math import comb
from typing import Literal

from raydist.analysis.pass_at_k import pass_at_k_exact as _pass_at_k

Draw = Literal["completions", "variants"]


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one problem: 1 - C(n-c, k) / C(n, k) (Chen et al. 2021).

    ``n`` samples were drawn, ``c`` of them pass; the result in [0, 1] is the probability
    that ``k`` of the samples, drawn without replacement, contain at least one that passes.
    ``pass_at_k(5, 2, 1) == 0.4``, ``pass_at_k(5, 2, 2) == 0.7``.
    Raises ``ValueError`` unless ``0 <= c <= n`` and ``1 <= k <= n``.
    """
    return float(_pass_at_k(n, c, k))


def mean_pass_at_k(results: Mapping[str, tuple[int, int]], k: int) -> float:
    """pass@k averaged over problems: ``results`` maps a problem id to its ``(n, c)``.

    Raises ``ValueError`` for an empty mapping or, naming the problem, for counts that
    :func:`pass_at_k` refuses (for instance fewer than ``k`` samples).
    """
    if not results:
        raise ValueError("mean_pass_at_k needs at least one problem")
    total = sum((_named(problem_id, _pass_at_k, n, c, k) for problem_id, (n, c) in results.items()), Fraction(0))
    return float(total / len(results))


def dypass_at_k(
    results: Mapping[str, Sequence[tuple[int, int]]],
    k: int,
    *,
    draw: Draw = "completions",
) -> float:
    """DyPass@k: pass@k over the semantic variants of each seed problem, averaged over seeds.

    ``results`` maps a seed problem id to one ``(n, c)`` per accepted variant of that seed:
    ``n`` completions were sampled for the variant's prompt and ``c`` of them pass the seed's
    tests. The result is the mean over seeds of a per-seed score in [0, 1]:

    - ``draw="completions"`` (the default): pass@k of the seed's pooled samples. All
      (variant, completion) pairs of the seed form one pool of N = sum(n) samples with
      C = sum(c) correct, and the score is 1 - C(N-C, k) / C(N, k): the probability that
      ``k`` samples drawn without replacement from the pool include a correct one.
    - ``draw="variants"``: ``k`` distinct variants are drawn without replacement, one
      completion uniformly from each; the score is the probability that at least one of
      them passes, 1 - e_k(q) / C(V, k), where q_v = 1 - c_v / n_v and e_k is the k-th
      elementary symmetric polynomial over the V variants.

    Why the default: §5 defines DyPass as Pass@K evaluated on semantic prompt variants of
    each seed rather than on the seed's fixed prompt; the pooled estimator is exactly
    pass@k with the sample space widened from one prompt to all accepted variants, so a
    model that answers a memorised prompt but not its rephrasings loses score, and with one
    variant per seed it equals pass@k. When every variant has one completion (a fresh
    variant per sample) the two draws coincide.

    Raises ``ValueError`` naming the seed for a seed without variants, counts outside
    ``0 <= c <= n``, fewer than ``k`` pooled samples (``"completions"``) or fewer than
    ``k`` variants, or a variant with no completion (``"variants"``); and for ``k < 1``,
    an empty ``results`` or an unknown ``draw``.
    """
    if draw not in ("completions", "variants"):
        raise ValueError(f"draw must be 'completions' or 'variants', not {draw!r}")
    if not results:
        raise ValueError("dypass_at_k needs at least one seed problem")
    score = _pooled if draw == "completions" else _distinct_variants
    total = sum((_named(seed, score, variants, k) for seed, variants in results.items()), Fraction(0))
    return float(total / len(results))


def _pooled(variants: Sequence[tuple[int, int]], k: int) -> Fraction:
    counts = _checked(variants)
    return _pass_at_k(sum(n for n, _ in counts), sum(c for _, c in counts), k)


def _distinct_variants(variants: Sequence[tuple[int, int]], k: int) -> Fraction:
    counts = _checked(variants)
    if k < 1:
        raise ValueError(f"k must be >= 1 (got k={k})")
    if k > len(counts):
        raise ValueError(f"drawing {k} distinct variants needs at least {k} variants (got {len(counts)})")
    if any(n == 0 for n, _ in counts):
        raise ValueError("a variant has no completion, so its pass rate is undefined")
    # e[j] = elementary symmetric polynomial of degree j over the failure rates seen so far.
    e = [Fraction(1)] + [Fraction(0)] * k
    for n, c in counts:
        q = Fraction(n - c, n)
        for j in range(k, 0, -1):
            e[j] += e[j - 1] * q
    return 1 - e[k] / comb(len(counts), k)


def _checked(variants: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    counts = [(n, c) for n, c in variants]
    if not counts:
        raise ValueError("no variants")
    for n, c in counts:
        if n < 0 or c < 0 or c > n:
            raise ValueError(f"a variant has invalid counts (n={n}, c={c}); need 0 <= c <= n")
    return counts


def _named(key: str, score: Callable[..., Fraction], *args: object) -> Fraction:
    # Name the problem or seed in the error, so a bad row in a large result set is found.
    try:
        return score(*args)
    except ValueError as error:
        raise ValueError(f"{key}: {error}") from None
