"""Is a level's Pass@1 drop real (SchrodingerRepo §V-A: "all drops were statistically
significant at p < 0.05")? Paired tests of every level against L0 on the instances run at
both, a bootstrap interval for the drop, how stable verdicts are across seeds (§V-C: three
seeded views per instance and level) and how many instances a McNemar test needs.

Pairing is by instance. Each instance at a level has a resolved share: the fraction of its
finished units (one per seed and attempt) that resolved it. When every share is 0 or 1 (one seed, or all
seeds agree) the instance has one verdict per level and the exact McNemar test applies;
otherwise the shares are compared by a sign-flip permutation test clustered by instance.
Resampling (bootstrap) and permutations draw from ``numpy.random.default_rng(seed)``, so a
result is reproduced exactly by the same seed.
"""

from __future__ import annotations

import math
from statistics import NormalDist, fmean

import numpy as np
import pyarrow as pa

from raydist._util.extras import require
from raydist.analysis.attempts import attempt_cells, exceeds
from raydist.analysis.runs import BASELINE, finished_units, levels_against_baseline, paired_instances, resolved_share

MCNEMAR = "exact McNemar"
SIGN_FLIP = "paired sign-flip permutation"
ASSUMPTIONS = {
    MCNEMAR: "one verdict per instance and level (one unit, or all its seeds and attempts agree); instances "
             "independent; two-sided exact binomial test of the discordant pairs b vs c at 1/2",
    SIGN_FLIP: "per-instance resolved share averaged over seeds and attempts; instances independent and their "
               "L0-vs-level differences symmetric about 0 under no effect; two-sided on |mean difference|, {how}",
}
_CHUNK = 1000  # sign patterns drawn at a time, to bound memory on large instance sets


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value for ``b`` pairs resolved only at L0 and ``c`` resolved
    only at the level: ``scipy.stats.binomtest(b, b + c, 0.5)``, i.e. ``min(1, 2 *
    P[Binomial(b + c, 1/2) <= min(b, c)])``. 1.0 when there is no discordant pair.

    Raises ValueError for a negative count; MissingExtra without scipy (the analysis extra)."""
    if b < 0 or c < 0:
        raise ValueError(f"discordant counts must be 0 or more, got b={b}, c={c}")
    if b + c == 0:
        return 1.0
    stats = require("scipy.stats", "analysis", "the exact McNemar test")
    return float(stats.binomtest(b, b + c, 0.5).pvalue)


def sign_flip_test(differences, *, permutations: int = 10_000, seed: int = 0) -> tuple[float, bool]:
    """``(p_value, exact)``: two-sided paired permutation test that the per-instance
    ``differences`` (shape ``(n,)``, level minus L0) are centred on 0.

    Each instance's difference keeps its size and takes a random sign; the statistic is
    ``|sum|`` (equivalently ``|mean|``). Zero differences are left out (their sign changes
    nothing). With m non-zero differences and ``2 ** m <= permutations`` every sign pattern
    is enumerated and the p-value is exact (``exact`` True); otherwise ``permutations``
    patterns are drawn and ``p = (1 + hits) / (1 + permutations)`` (never 0). 1.0 when no
    difference is non-zero. Raises ValueError when ``permutations < 1``."""
    if permutations < 1:
        raise ValueError(f"permutations must be at least 1, got {permutations}")
    d = np.asarray(differences, dtype=float)
    d = d[np.abs(d) > 1e-12]
    if d.size == 0:
        return 1.0, True
    observed = abs(d.sum()) - 1e-9 * np.abs(d).sum()  # sums equal up to rounding count as hits
    if 2 ** d.size <= permutations:
        patterns = np.arange(2 ** d.size)[:, None] >> np.arange(d.size) & 1
        return float(np.mean(np.abs((1 - 2 * patterns) @ d) >= observed)), True
    rng = np.random.default_rng(seed)
    hits = 0
    for start in range(0, permutations, _CHUNK):
        signs = rng.choice((-1.0, 1.0), size=(min(_CHUNK, permutations - start), d.size))
        hits += int(np.sum(np.abs(signs @ d) >= observed))
    return (1 + hits) / (1 + permutations), False


def bootstrap_interval(differences, *, n_resamples: int = 10_000, seed: int = 0,
                       confidence: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``differences`` (shape ``(n,)``, one per
    instance, in their own unit): ``n_resamples`` resamples of n instances drawn with
    replacement (``rng.integers(0, n, (n_resamples, n))``), the ``(1 - confidence) / 2`` and
    ``(1 + confidence) / 2`` percentiles (numpy's linear interpolation) of their means.
    Resampling instances, not units, keeps an instance's seeds together.

    Raises ValueError with no difference, ``n_resamples < 1`` or a confidence outside (0, 1)."""
    d = np.asarray(differences, dtype=float)
    if d.ndim != 1 or d.size == 0 or n_resamples < 1 or not 0 < confidence < 1:
        raise ValueError(f"bootstrap needs differences of shape (n,) with n >= 1, n_resamples >= 1 and a confidence "
                         f"in (0, 1); got shape {d.shape}, n_resamples={n_resamples}, confidence={confidence}")
    means = d[np.random.default_rng(seed).integers(0, d.size, size=(n_resamples, d.size))].mean(axis=1)
    low, high = np.percentile(means, [50 * (1 - confidence), 50 * (1 + confidence)])
    return float(low), float(high)


def connor_sample_size(drop: float, discordance: float, *, alpha: float = 0.05, power: float = 0.8) -> int:
    """Paired instances a two-sided McNemar test at level ``alpha`` needs to detect a change
    ``drop`` in Pass@1 (a fraction: 0.06 for 6 points) with probability ``power``, when a
    fraction ``discordance`` of the pairs is discordant, by the normal approximation of Connor,
    R. J. 1987, "Sample size for testing differences in proportions for the paired-sample
    design", Biometrics 43(1):207-211:

        n = ceil( (z_{1-alpha/2} sqrt(psi) + z_{power} sqrt(psi - delta^2))^2 / delta^2 )

    with ``psi = discordance`` and ``delta = drop``. The exact test the report applies needs
    more (``mcnemar_sample_size``). Raises ValueError unless ``0 < drop <= discordance <= 1``
    (a drop cannot exceed the discordant share: it is their difference) and alpha, power lie
    in (0, 1)."""
    _check_design(drop, discordance, alpha, power)
    z = NormalDist().inv_cdf
    root = z(1 - alpha / 2) * math.sqrt(discordance) + z(power) * math.sqrt(discordance - drop ** 2)
    return math.ceil(root ** 2 / drop ** 2 - 1e-9)  # 1e-9: a value that is whole up to rounding stays whole


def mcnemar_exact_power(n: int, drop: float, discordance: float, *, alpha: float = 0.05) -> float:
    """Power of the two-sided exact McNemar test (``mcnemar_exact``) at level ``alpha`` on
    ``n`` pairs, when a fraction ``discordance`` (psi) of the pairs is discordant and the
    discordant pairs favour L0 by ``drop`` (delta): the number of discordant pairs D is
    Binomial(n, psi), and given D = m the pairs resolved only at L0 are Binomial(m, (psi +
    delta) / (2 psi)); the test rejects when min(b, m - b) <= k_m, the largest k with
    2 P[Binomial(m, 1/2) <= k] <= alpha. Exact sums over m, no simulation. Raises ValueError as
    ``connor_sample_size``; MissingExtra without scipy."""
    _check_design(drop, discordance, alpha, 0.5)
    stats = require("scipy.stats", "analysis", "the exact McNemar power")
    m = np.arange(1, int(n) + 1)
    q = (discordance + drop) / (2 * discordance)
    first = stats.binom.ppf(alpha / 2, m, 0.5)  # the least k with P[<= k] >= alpha / 2
    k = np.where(stats.binom.cdf(first, m, 0.5) * 2 <= alpha, first, first - 1)
    reject = np.where(k >= 0, stats.binom.cdf(k, m, q) + stats.binom.sf(m - k - 1, m, q), 0.0)
    return float(np.sum(stats.binom.pmf(m, int(n), discordance) * reject))


def mcnemar_sample_size(drop: float, discordance: float, *, alpha: float = 0.05, power: float = 0.8) -> int:
    """The least number of paired instances at which the exact McNemar test the report applies
    reaches ``power`` (``mcnemar_exact_power``), searched from Connor's approximation
    (``connor_sample_size``) upward; where that already has the power, downward while the
    power holds. For drop 0.06 and discordance 0.2 (alpha 0.05, power 0.8): Connor's 434 give
    the exact test a power of 0.775, and 460 are needed. Raises ValueError as
    ``connor_sample_size``."""
    n = connor_sample_size(drop, discordance, alpha=alpha, power=power)
    if mcnemar_exact_power(n, drop, discordance, alpha=alpha) >= power:
        while n > 1 and mcnemar_exact_power(n - 1, drop, discordance, alpha=alpha) >= power:
            n -= 1
        return n
    step = max(1, n // 64)  # gallop, then walk back to the first n that has the power
    while mcnemar_exact_power(n + step, drop, discordance, alpha=alpha) < power:
        n += step
    while mcnemar_exact_power(n + 1, drop, discordance, alpha=alpha) < power:
        n += 1
    return n + 1


def _check_design(drop: float, discordance: float, alpha: float, power: float) -> None:
    if not 0 < drop <= discordance <= 1 or not 0 < alpha < 1 or not 0 < power < 1:
        raise ValueError(f"need 0 < drop <= discordance <= 1 and alpha, power in (0, 1); got drop={drop}, "
                         f"discordance={discordance}, alpha={alpha}, power={power}")


def holm(p_values) -> list[float]:
    """Holm's step-down adjustment of ``p_values`` (any order; returned in that order): the
    i-th smallest of m becomes ``max_{j <= i} min(1, (m - j + 1) p_(j))`` (Holm, S. 1979, "A
    simple sequentially rejective multiple test procedure", Scand. J. Statist. 6(2):65-70).
    Rejecting where the adjusted value is <= alpha holds the family-wise error rate at alpha.
    Raises ValueError for a value outside [0, 1]."""
    p = [float(v) for v in p_values]
    if any(not 0 <= v <= 1 for v in p):
        raise ValueError(f"p-values must lie in [0, 1], got {p}")
    adjusted = [0.0] * len(p)
    running = 0.0
    for rank, i in enumerate(sorted(range(len(p)), key=p.__getitem__)):
        running = max(running, min(1.0, (len(p) - rank) * p[i]))
        adjusted[i] = running
    return adjusted


def paired_significance(table: pa.Table, *, permutations: int = 10_000, n_resamples: int = 10_000,
                        seed: int = 0) -> list[dict]:
    """Every level against L0, per model x agent, on the instances with a finished unit at both.

    One dict per (model, agent, level other than L0) with a paired instance, sorted by model,
    agent, level order: ``instances`` (paired), ``unpaired`` (instances with a finished unit at
    only one of the two), ``delta_pp`` (the paired Δ: mean over paired instances of the
    resolved share at the level minus at L0, percentage points; Table I shows the same),
    ``b`` / ``c`` (instances resolved more often at L0 / at the level; with one verdict each
    these are McNemar's discordant pairs), ``test`` (``MCNEMAR`` or ``SIGN_FLIP``),
    ``assumptions`` (a sentence for a report), ``p_value``, ``p_holm`` (Holm-adjusted over
    every comparison of the table: ``holm``), and the 95% interval of ``delta_pp``:
    ``ci_low`` / ``ci_high``, ``interval`` (how it was made) and ``interval_agrees`` (whether
    it excludes 0 exactly when p < 0.05). With ``MCNEMAR`` the interval is the exact
    conditional one (``mcnemar_interval``), which agrees with the test by construction; with
    ``SIGN_FLIP`` it is the percentile bootstrap over instances (``bootstrap_interval``,
    ``n_resamples``, ``seed``), and a disagreement is reported, not hidden. ``permutations``
    and ``seed`` drive ``sign_flip_test`` when it is used. ``noise_floor_pp``: the L0 noise
    floor of Δ in points (``raydist.analysis.attempts.noise_floor``; None with one attempt)
    and ``exceeds_noise_floor``: whether |Δ| is above it (None when it is undefined). An
    instance's resolved share is over all its finished units: seeds x attempts."""
    out = []
    noise = attempt_cells(table.select(["model", "agent", "level", "seed", "attempt", "instance_id",
                                        "outcome"]).to_pylist())
    for model, agent, level, by_level, instances in levels_against_baseline(table):
        base = np.array([resolved_share(by_level[BASELINE][i]) for i in instances])
        here = np.array([resolved_share(by_level[level][i]) for i in instances])
        row = {"model": model, "agent": agent, "level": level, "instances": len(instances),
               "unpaired": len(set(by_level[BASELINE]) ^ set(by_level[level])),
               **_compare(base, here, permutations=permutations, n_resamples=n_resamples, seed=seed)}
        floor = noise[(model, agent, level)]["noise_floor"]
        row["noise_floor_pp"] = None if floor is None else 100 * floor
        row["exceeds_noise_floor"] = exceeds(row["delta_pp"], row["noise_floor_pp"])
        out.append(row)
    for row, adjusted in zip(out, holm([r["p_value"] for r in out]), strict=True):
        row["p_holm"] = adjusted
    return out


def mcnemar_interval(b: int, c: int, n: int, *, confidence: float = 0.95) -> tuple[float, float]:
    """Exact conditional interval of the paired difference ``(c - b) / n`` (level minus L0, a
    fraction) for ``b`` pairs resolved only at L0 and ``c`` only at the level among ``n``:
    the Clopper-Pearson interval [t_lo, t_hi] of c's share of the ``b + c`` discordant pairs
    (``scipy.stats.binomtest(c, b + c).proportion_ci(method="exact")``), mapped through
    ``(b + c) / n * (2 t - 1)``. It holds 0 exactly when t = 1/2 lies in the Clopper-Pearson
    interval, that is when the two-sided exact McNemar test (``mcnemar_exact``) does not
    reject at ``1 - confidence``: the interval and the test cannot disagree. ``(0, 0)`` when
    there is no discordant pair. Raises ValueError for counts that do not fit in ``n``."""
    if b < 0 or c < 0 or n < 1 or b + c > n:
        raise ValueError(f"need 0 <= b, c and b + c <= n >= 1; got b={b}, c={c}, n={n}")
    if b + c == 0:
        return 0.0, 0.0
    stats = require("scipy.stats", "analysis", "the exact McNemar interval")
    share = stats.binomtest(c, b + c).proportion_ci(confidence_level=confidence, method="exact")
    scale = (b + c) / n
    return scale * (2 * share.low - 1), scale * (2 * share.high - 1)


def _compare(base: np.ndarray, here: np.ndarray, *, permutations: int, n_resamples: int, seed: int) -> dict:
    d = here - base
    b, c = int(np.sum(d < 0)), int(np.sum(d > 0))
    if np.isin(base, (0.0, 1.0)).all() and np.isin(here, (0.0, 1.0)).all():
        test, p_value, assumptions = MCNEMAR, mcnemar_exact(b, c), ASSUMPTIONS[MCNEMAR]
        (low, high), interval = mcnemar_interval(b, c, d.size), "exact conditional (Clopper-Pearson on b vs c)"
    else:
        p_value, exact = sign_flip_test(d, permutations=permutations, seed=seed)
        how = "exact over all sign patterns" if exact else f"{permutations} random sign patterns (seed {seed})"
        test, assumptions = SIGN_FLIP, ASSUMPTIONS[SIGN_FLIP].format(how=how)
        (low, high), interval = (bootstrap_interval(d, n_resamples=n_resamples, seed=seed),
                                 f"percentile bootstrap over instances ({n_resamples} resamples, seed {seed})")
    excludes_zero = low > 0 or high < 0
    return {"delta_pp": 100 * float(d.mean()), "b": b, "c": c, "test": test, "assumptions": assumptions,
            "p_value": p_value, "ci_low": 100 * low, "ci_high": 100 * high, "interval": interval,
            "interval_agrees": excludes_zero == (p_value < 0.05)}


def verdict_stability(table: pa.Table, *, drop: float = 0.06, alpha: float = 0.05, power: float = 0.8) -> list[dict]:
    """How stable verdicts are, per model x agent x level (sorted; L0 included).

    ``instances`` (with a finished unit), ``multi_seed`` (with two or more), ``seed_disagreements``
    (instances resolved at some seeds and not at others). Against L0, on the paired instances
    (None at L0 itself): ``paired``, ``resolved_to_unresolved`` / ``unresolved_to_resolved``
    (every L0 unit resolved and no unit at the level, and the reverse), ``mixed`` (paired
    instances with a seed disagreement at either level: no flip is counted for them),
    ``discordance`` (psi: the mean over paired instances of ``p0 (1 - p1) + (1 - p0) p1``,
    the chance that one L0 run and one run at the level disagree, seeds taken as independent;
    (b + c) / n with one verdict each; None, undefined, when no instance is paired),
    ``instances_needed`` (``mcnemar_sample_size(drop, psi, alpha, power)``, for the exact test;
    None when psi is undefined or below ``drop``) and ``power_note``, a sentence saying so."""
    out = []
    for (model, agent), by_level in finished_units(table).items():
        for level, units in by_level.items():
            shares = {i: resolved_share(rows) for i, rows in units.items()}
            row = {"model": model, "agent": agent, "level": level, "instances": len(units),
                   "multi_seed": sum(len(rows) > 1 for rows in units.values()),
                   "seed_disagreements": sum(0 < s < 1 for s in shares.values())}
            flips = None if level == BASELINE else _flips(by_level, level, drop=drop, alpha=alpha, power=power)
            out.append(row | (flips or dict.fromkeys(_FLIP_KEYS)))
    return out


_FLIP_KEYS = ("paired", "resolved_to_unresolved", "unresolved_to_resolved", "mixed", "discordance",
              "instances_needed", "power_note")


def _flips(by_level: dict, level: str, *, drop: float, alpha: float, power: float) -> dict:
    instances = paired_instances(by_level, level)
    pairs = [(resolved_share(by_level[BASELINE][i]), resolved_share(by_level[level][i])) for i in instances]
    psi = fmean(p0 * (1 - p1) + (1 - p0) * p1 for p0, p1 in pairs) if pairs else None
    needed = mcnemar_sample_size(drop, psi, alpha=alpha, power=power) if psi is not None and 0 < drop <= psi else None
    if psi is None:
        note = f"no instance is paired with {BASELINE}: the discordance, and so the instances needed, are undefined"
    else:
        design = f"exact McNemar, alpha {alpha:g}, power {power:g}, measured discordance {psi:.3f}"
        note = (f"{needed} paired instances detect a drop of {100 * drop:g} points ({design}; Connor's normal "
                f"approximation says {connor_sample_size(drop, psi, alpha=alpha, power=power)}); {len(pairs)} "
                "are paired" if needed is not None else
                f"a drop of {100 * drop:g} points needs a discordance of at least {drop:g} ({design}): not computed")
    return {"paired": len(pairs), "resolved_to_unresolved": sum(p == (1, 0) for p in pairs),
            "unresolved_to_resolved": sum(p == (0, 1) for p in pairs),
            "mixed": sum(0 < p0 < 1 or 0 < p1 < 1 for p0, p1 in pairs), "discordance": psi,
            "instances_needed": needed, "power_note": note}
