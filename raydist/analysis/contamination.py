"""Contamination by the static-vs-dynamic fit (DyCodeEval §4.3, Figure 5): with x the static
score (pass@1 on the seed problems) and y the dynamic one (DyPass@1 on their variants) of n
models, least squares gives y = a + b·x; s = sqrt(Σ(y - ŷ)² / (n - 2)) and Sxx = Σ(x - x̄)².
The prediction interval of a model's y at x, at confidence c, is
    ŷ(x) ± t_{(1+c)/2, n-2} · s · sqrt(1 + 1/n + (x - x̄)² / Sxx),
and a model whose own y lies outside it at its x is an outlier: in-the-wild models keep the
line, an overfitted one falls below it (its static score inflated by leaked data).

As in the paper, the line and the band are fitted on every model, the outliers included, so an
outlier widens the band it is judged by: with few models one contaminated model can stay
inside (at the mean static score a lone outlier leaves the band only from about 10 models on).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

from raydist._util.extras import require

__all__ = ["ContaminationFit", "FitPoint", "contamination_fit"]

#: Below this distance a point on the band's edge counts as inside (float rounding).
_EDGE = 1e-12


@dataclass(frozen=True)
class FitPoint:
    """One model against the fit: its scores, the band at its static score, and whether its
    dynamic score lies outside (``side``: ``"below"`` / ``"above"`` the band, else None)."""

    name: str
    static: float
    dynamic: float
    predicted: float
    low: float
    high: float
    side: str | None

    @property
    def outlier(self) -> bool:
        """Outside the prediction band."""
        return self.side is not None


@dataclass(frozen=True)
class ContaminationFit:
    """The least-squares line of dynamic on static scores with its prediction band (§4.3,
    Figure 5). Scores in the unit given (fractions in [0, 1] from :func:`pass_table`).

    ``band``: ``(x, ŷ, low, high)`` at evenly spaced x from the smallest to the largest static
    score; ``outliers``: the names of the points outside the band, in input order.
    """

    n: int
    slope: float
    intercept: float
    r: float
    residual_std: float
    t: float
    confidence: float
    x_mean: float
    sxx: float
    points: tuple[FitPoint, ...]
    band: tuple[tuple[float, float, float, float], ...]
    outliers: tuple[str, ...]

    def interval(self, x: float) -> tuple[float, float, float]:
        """``(ŷ, low, high)``: the fitted dynamic score at static score ``x`` and the
        prediction interval of a new model's dynamic score there."""
        fit = self.intercept + self.slope * x
        half = self.t * self.residual_std * math.sqrt(1 + 1 / self.n + (x - self.x_mean) ** 2 / self.sxx)
        return fit, fit - half, fit + half


def contamination_fit(points: Mapping[str, tuple[float, float]], confidence: float = 0.95,
                      grid: int = 51) -> ContaminationFit:
    """Fit dynamic on static scores over ``points`` (``{name: (static, dynamic)}``, e.g.
    :func:`score_points`) and mark the points outside the ``confidence`` prediction band
    (module docstring; scipy's ``linregress`` and Student-t quantile).

    Raises ``ValueError`` with fewer than 3 points (the band needs n - 2 >= 1 degrees of
    freedom), equal static scores (no slope), a non-finite score, ``confidence`` outside
    (0, 1) or ``grid`` < 2; ``MissingExtra`` without scipy (the analysis extra).
    """
    if len(points) < 3:
        raise ValueError(f"the fit needs at least 3 models, got {len(points)}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    if grid < 2:
        raise ValueError(f"grid needs at least 2 points, got {grid}")
    names = list(points)
    xs = [float(points[n][0]) for n in names]
    ys = [float(points[n][1]) for n in names]
    if not all(math.isfinite(v) for v in xs + ys):
        raise ValueError("the fit needs finite scores")
    if max(xs) == min(xs):
        raise ValueError("every model has the same static score, so no line can be fitted")
    stats = require("scipy.stats", "analysis", "the contamination fit")
    line = stats.linregress(xs, ys)
    n = len(xs)
    x_mean = sum(xs) / n
    sxx = sum((x - x_mean) ** 2 for x in xs)
    sse = sum((y - (line.intercept + line.slope * x)) ** 2 for x, y in zip(xs, ys))
    fit = ContaminationFit(
        n=n, slope=float(line.slope), intercept=float(line.intercept), r=float(line.rvalue),
        residual_std=math.sqrt(sse / (n - 2)), t=float(stats.t.ppf((1 + confidence) / 2, n - 2)),
        confidence=confidence, x_mean=x_mean, sxx=sxx, points=(), band=(), outliers=())
    placed = tuple(_place(fit, name, x, y) for name, x, y in zip(names, xs, ys))
    step = (max(xs) - min(xs)) / (grid - 1)
    band = tuple((x, *fit.interval(x)) for x in (min(xs) + i * step for i in range(grid)))
    return replace(fit, points=placed, band=band, outliers=tuple(p.name for p in placed if p.outlier))


def _place(fit: ContaminationFit, name: str, x: float, y: float) -> FitPoint:
    predicted, low, high = fit.interval(x)
    side = "below" if y < low - _EDGE else "above" if y > high + _EDGE else None
    return FitPoint(name, x, y, predicted, low, high, side)
