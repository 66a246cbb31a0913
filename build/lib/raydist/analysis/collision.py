"""How often DyCodeEval repeats itself: the bounds of §3.3 (Theorems 3.1-3.3, proofs in Appendix A)
and the observed rates to hold them against.

The model (§3.3): one generation of a seed problem draws a scenario from S and a context from C
uniformly and independently, so a run has N = |S|·|C| equally likely outcomes, and the rewriting
step adds no randomness of its own (two runs that draw the same pair give the same problem). Each
theorem comes as an exact probability and a closed-form bound:

Theorem 3.1, repeat on one seed over M runs: the first run's problem comes back in one of the
M - 1 later runs (Appendix A.1).
    exact  P = 1 - (1 - 1/N)^(M-1)
    bound  P <= 1 - exp(-(M-1)/(N-1)) <= (M-1)/(N-1),
           from ln(1 - x) >= -x/(1 - x) at x = 1/N.

Theorem 3.2, collision on one seed over M runs: some two of the M runs give the same problem
(Appendix A.2, the birthday problem).
    exact  P = 1 - prod_{i=0}^{M-1} (1 - i/N)            (1 when M > N)
    bound  P <= M(M-1)/(2N)                               (union bound over the M(M-1)/2 pairs)
    approx P ~= 1 - exp(-M(M-1)/(2N)) for M << N, which is also a lower bound (ln(1 - x) <= -x).

Theorem 3.3, a seed dataset of D problems: a generated dataset is a D-tuple of independent draws,
one outcome of N^D (Appendix A.3), and Theorem 3.1 applies with N^D in place of N:
    exact  P = 1 - (1 - N^-D)^(M-1)                       (the first dataset comes back)
    bound  P <= 1 - exp(-(M-1)/(N^D - 1))
Beside it, Theorem 3.2 over N^D (any two of M datasets identical, bound M(M-1)/(2 N^D)) and the
chance that any one of the D seeds repeats its first problem, 1 - (1 - P_3.1)^D <= D·P_3.1.

Exact forms use rational arithmetic when the numbers are small enough to be quick and log-space
floats (relative error ~1e-15) otherwise; either way the result is a float in [0, 1].
"""

from __future__ import annotations

import itertools
import math
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction

# Above this many bits of work (runs x bits of N) exact rationals get slow; floats take over.
_EXACT_BITS = 1 << 20


def outcome_space(scenarios: int, contexts: int) -> int:
    """N = |S|·|C|, the number of equally likely outcomes of one generation (§3.3).

    Raises ValueError unless both counts are positive integers.
    """
    _check_positive("scenarios", scenarios)
    _check_positive("contexts", contexts)
    return scenarios * contexts


def repeat_probability(scenarios: int, contexts: int, runs: int) -> float:
    """Theorem 3.1, exact: P(the first of ``runs`` generations of one seed recurs later)
    = 1 - (1 - 1/N)^(M-1) with N = scenarios·contexts, M = runs (M counts the first run).

    Raises ValueError on non-positive counts.
    """
    return _repeat(outcome_space(scenarios, contexts), _runs(runs))


def repeat_bound(scenarios: int, contexts: int, runs: int) -> float:
    """Theorem 3.1, bound: 1 - exp(-(M-1)/(N-1)), which is >= :func:`repeat_probability`
    (Appendix A.1's logarithm inequality) and <= (M-1)/(N-1). With N = 1 every rerun repeats, so
    the bound is 1 for M >= 2.

    Raises ValueError on non-positive counts.
    """
    return _repeat_bound(outcome_space(scenarios, contexts), _runs(runs))


def collision_probability(scenarios: int, contexts: int, runs: int) -> float:
    """Theorem 3.2, exact: P(some two of ``runs`` generations of one seed are identical)
    = 1 - prod_{i<M} (1 - i/N); 1 when M > N.

    Raises ValueError on non-positive counts.
    """
    return _collision(outcome_space(scenarios, contexts), _runs(runs))


def collision_bound(scenarios: int, contexts: int, runs: int) -> float:
    """Theorem 3.2, upper bound: min(1, M(M-1)/(2N)), the union bound over the pairs of runs,
    which is the M << N form of §3.3.

    Raises ValueError on non-positive counts.
    """
    return _collision_bound(outcome_space(scenarios, contexts), _runs(runs))


def collision_approximation(scenarios: int, contexts: int, runs: int) -> float:
    """Theorem 3.2, birthday approximation 1 - exp(-M(M-1)/(2N)) for M << N (Appendix A.2); it is
    never above :func:`collision_probability`, so it doubles as a lower bound.

    Raises ValueError on non-positive counts.
    """
    n, m = outcome_space(scenarios, contexts), _runs(runs)
    return 0.0 - math.expm1(-m * (m - 1) / (2 * n))


def dataset_repeat_probability(scenarios: int, contexts: int, dataset_size: int, runs: int) -> float:
    """Theorem 3.3, exact: P(the first of ``runs`` generated datasets of ``dataset_size`` seeds
    recurs, problem for problem, in a later run) = 1 - (1 - N^-D)^(M-1).

    Raises ValueError on non-positive counts.
    """
    return _repeat(_dataset_space(scenarios, contexts, dataset_size), _runs(runs))


def dataset_repeat_bound(scenarios: int, contexts: int, dataset_size: int, runs: int) -> float:
    """Theorem 3.3, bound: 1 - exp(-(M-1)/(N^D - 1)), Theorem 3.1's bound over N^D outcomes.

    Raises ValueError on non-positive counts.
    """
    return _repeat_bound(_dataset_space(scenarios, contexts, dataset_size), _runs(runs))


def dataset_collision_probability(scenarios: int, contexts: int, dataset_size: int, runs: int) -> float:
    """P(some two of ``runs`` generated datasets are identical): Theorem 3.2 over N^D outcomes.
    With runs = 2 it is N^-D, the expected value of :func:`collision_rate`.

    Raises ValueError on non-positive counts.
    """
    return _collision(_dataset_space(scenarios, contexts, dataset_size), _runs(runs))


def dataset_collision_bound(scenarios: int, contexts: int, dataset_size: int, runs: int) -> float:
    """min(1, M(M-1)/(2 N^D)), the union bound for :func:`dataset_collision_probability`.

    Raises ValueError on non-positive counts.
    """
    return _collision_bound(_dataset_space(scenarios, contexts, dataset_size), _runs(runs))


def problem_repeat_probability(scenarios: int, contexts: int, dataset_size: int, runs: int) -> float:
    """P(at least one of the D seeds sees its first problem again over M runs)
    = 1 - (1 - P_3.1)^D, seeds being independent.

    Raises ValueError on non-positive counts.
    """
    _check_positive("dataset_size", dataset_size)
    p = repeat_probability(scenarios, contexts, runs)
    return 0.0 - math.expm1(dataset_size * math.log1p(-p)) if p < 1 else 1.0


def problem_repeat_bound(scenarios: int, contexts: int, dataset_size: int, runs: int) -> float:
    """min(1, D·bound_3.1), the union bound over seeds for :func:`problem_repeat_probability`.

    Raises ValueError on non-positive counts.
    """
    _check_positive("dataset_size", dataset_size)
    return min(1.0, dataset_size * repeat_bound(scenarios, contexts, runs))


def normalise(text: str) -> str:
    """The form two generations are compared in: Unicode NFC, runs of whitespace as one space,
    no leading or trailing whitespace. Case and punctuation count."""
    return " ".join(unicodedata.normalize("NFC", text).split())


def repeat_rate(generations_per_seed: Mapping[str, Sequence[str]] | Iterable[Sequence[str]]) -> float:
    """Observed Theorem 3.1 event: the fraction of seeds whose first generation appears again
    among its later ones (compared with :func:`normalise`).

    ``generations_per_seed``: one sequence of M >= 2 generated prompts per seed, in run order,
    as a mapping seed id -> sequence or as an iterable of sequences. Its expected value is
    :func:`repeat_probability` with runs = M. Raises ValueError with no seeds or a seed with < 2
    generations.
    """
    runs = _per_seed(generations_per_seed)
    return sum(r[0] in r[1:] for r in runs) / len(runs)


def seed_collision_rate(generations_per_seed: Mapping[str, Sequence[str]] | Iterable[Sequence[str]]) -> float:
    """Observed Theorem 3.2 event: the fraction of seeds with two identical generations among
    their M (compared with :func:`normalise`); expected value :func:`collision_probability`.

    Input as for :func:`repeat_rate`; raises ValueError likewise.
    """
    runs = _per_seed(generations_per_seed)
    return sum(len(set(r)) < len(r) for r in runs) / len(runs)


def collision_rate(datasets: Sequence[Mapping[str, str]]) -> float:
    """Observed Theorem 3.3 event: the fraction of unordered pairs of generated datasets that are
    identical, seed for seed (compared with :func:`normalise`).

    ``datasets``: M >= 2 mappings seed id -> generated prompt, all over the same seed ids. Its
    expected value is ``dataset_collision_probability(S, C, D, 2)`` = N^-D. Raises ValueError with
    fewer than two datasets or when their seed ids differ.
    """
    if len(datasets) < 2:
        raise ValueError(f"collision_rate needs at least 2 datasets, got {len(datasets)}")
    keys = set(datasets[0])
    if any(set(d) != keys for d in datasets[1:]):
        raise ValueError("collision_rate needs datasets over the same seed ids")
    frozen = [tuple(normalise(d[k]) for k in sorted(keys)) for d in datasets]
    pairs = list(itertools.combinations(frozen, 2))
    return sum(a == b for a, b in pairs) / len(pairs)


def per_seed(datasets: Sequence[Mapping[str, str]]) -> dict[str, list[str]]:
    """Datasets (run order) -> seed id -> that seed's generations in run order, the input of
    :func:`repeat_rate` and :func:`seed_collision_rate`. Seeds missing from a run are skipped there."""
    out: dict[str, list[str]] = {}
    for dataset in datasets:
        for seed_id, prompt in dataset.items():
            out.setdefault(seed_id, []).append(prompt)
    return out


def _per_seed(generations: Mapping[str, Sequence[str]] | Iterable[Sequence[str]]) -> list[list[str]]:
    groups = list(generations.values()) if isinstance(generations, Mapping) else list(generations)
    if not groups:
        raise ValueError("no seeds given")
    short = [len(g) for g in groups if len(g) < 2]
    if short:
        raise ValueError(f"every seed needs at least 2 generations; got a seed with {short[0]}")
    return [[normalise(t) for t in g] for g in groups]


def _repeat(n: int, m: int) -> float:
    if m == 1:
        return 0.0
    if _small(n, m):
        stay = Fraction(n - 1, n) ** (m - 1)
        return float(1 - stay)
    return 0.0 - math.expm1((m - 1) * math.log1p(-1 / n))


def _repeat_bound(n: int, m: int) -> float:
    if m == 1:
        return 0.0
    if n == 1:
        return 1.0
    return 0.0 - math.expm1(-(m - 1) / (n - 1))


def _collision(n: int, m: int) -> float:
    if m > n:
        return 1.0
    if _small(n, m):
        return float(1 - Fraction(math.perm(n, m), n**m))
    return 0.0 - math.expm1(math.fsum(math.log1p(-i / n) for i in range(1, m)))


def _collision_bound(n: int, m: int) -> float:
    return float(min(Fraction(1), Fraction(m * (m - 1), 2 * n)))


def _small(n: int, m: int) -> bool:
    return m * n.bit_length() <= _EXACT_BITS


def _dataset_space(scenarios: int, contexts: int, dataset_size: int) -> int:
    _check_positive("dataset_size", dataset_size)
    return outcome_space(scenarios, contexts) ** dataset_size


def _runs(runs: int) -> int:
    _check_positive("runs", runs)
    return runs


def _check_positive(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
