"""Benchmarking stability (DyCodeEval §4.5, Figure 6): how much a model's Pass@1 moves from one
generated dataset to the next.

Over R generated datasets the summary is the mean, the sample standard deviation (ddof = 1, the
unbiased variance estimator, as the R datasets are a sample of the datasets DyCodeEval could
generate) and a two-sided Student-t confidence interval for the mean:
    mean ± t_{(1+confidence)/2, R-1} · std / sqrt(R).
The same interval of a mean score over problems (pass@k, DyPass@k), clipped to the range the
scores live in, is :func:`mean_interval`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from raydist._util.extras import require


@dataclass(frozen=True)
class Stability:
    """Pass@1 over R generated datasets, all in the unit of the scores given (a fraction in [0, 1]
    or a percentage: whatever the caller passed)."""

    runs: int
    """R, the number of generated datasets."""
    mean: float
    """Mean score over the R datasets."""
    std: float
    """Sample standard deviation (ddof = 1)."""
    ci_low: float
    """Lower end of the confidence interval for the mean."""
    ci_high: float
    """Upper end of the confidence interval for the mean."""
    confidence: float
    """Confidence level of the interval, e.g. 0.95."""

    def __str__(self) -> str:
        pct = round(self.confidence * 100)
        return f"{self.mean:.4f} ± {self.std:.4f} ({pct}% CI {self.ci_low:.4f}-{self.ci_high:.4f}, R={self.runs})"


def stability(scores: Sequence[float], confidence: float = 0.95) -> Stability:
    """Mean ± sample std of ``scores`` (one Pass@1 per generated dataset, R >= 2 of them) with a
    Student-t interval at ``confidence`` (§4.5).

    Raises ValueError with fewer than two scores, a non-finite score, or a confidence outside (0, 1).
    """
    values = np.asarray(scores, dtype=float)
    if values.ndim != 1 or values.size < 2:
        raise ValueError(f"stability needs at least 2 scores in a flat sequence, got shape {values.shape}")
    if not np.all(np.isfinite(values)):
        raise ValueError("stability needs finite scores")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    runs = int(values.size)
    mean = float(values.mean())
    std = float(values.std(ddof=1))
    stats = require("scipy.stats", "analysis", "the Pass@1 confidence interval")
    half = float(stats.t.ppf((1 + confidence) / 2, df=runs - 1)) * std / math.sqrt(runs)
    return Stability(runs=runs, mean=mean, std=std, ci_low=mean - half, ci_high=mean + half, confidence=confidence)


def mean_interval(scores: Sequence[float], confidence: float = 0.95,
                  bounds: tuple[float, float] = (0.0, 1.0)) -> tuple[float, float | None, float | None]:
    """``(mean, low, high)`` of ``scores`` (per-problem scores): the Student-t interval of the
    mean at ``confidence`` (:func:`stability`), clipped to ``bounds``, the range
    the scores live in; low and high are None for a single score. Raises ``ValueError`` for
    no score, and as ``stability`` does."""
    if not scores:
        raise ValueError("mean_interval needs at least one score")
    if len(scores) == 1:
        return float(scores[0]), None, None
    s = stability(list(scores), confidence)
    return s.mean, max(bounds[0], s.ci_low), min(bounds[1], s.ci_high)
