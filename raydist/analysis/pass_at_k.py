"""The unbiased pass@k estimator (Chen et al. 2021, "Evaluating Large Language Models Trained on
Code", §2.1), computed exactly: with ``n`` samples of which ``c`` are correct, pass@k =
1 - C(n-c, k) / C(n, k), the probability that ``k`` samples drawn without replacement include a
correct one. The paper evaluates it with a numerically stable product; here it is an exact
fraction (``math.comb``), converted to ``float`` by the caller once at the end.

One estimator for both methods: DyCodeEval's completions per problem
(``raydist.problems.metrics``) and a repository view's attempts (``raydist.analysis.attempts``).
"""

from __future__ import annotations

from fractions import Fraction
from math import comb


def pass_at_k_exact(n: int, c: int, k: int) -> Fraction:
    """Unbiased pass@k of one problem as an exact fraction in [0, 1]: ``n`` samples were
    drawn, ``c`` of them pass. ``pass_at_k_exact(5, 2, 2) == Fraction(7, 10)``.

    Raises ``ValueError`` unless ``0 <= c <= n`` and ``1 <= k <= n``."""
    if k < 1:
        raise ValueError(f"k must be >= 1 (got k={k})")
    if n < 0 or c < 0:
        raise ValueError(f"sample counts must be >= 0 (got n={n}, c={c})")
    if c > n:
        raise ValueError(f"more correct samples than samples (c={c} > n={n})")
    if k > n:
        raise ValueError(f"pass@{k} needs at least {k} samples (got n={n})")
    return 1 - Fraction(comb(n - c, k), comb(n, k))
