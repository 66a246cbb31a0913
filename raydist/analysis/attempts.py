"""Repeated attempts of one view (``attempts=k``): pass@k over them, the run-to-run standard
deviation at each level and the L0 noise floor a level's Δ is set against.

A *run* of a cell (model x agent x level) is one (seed, attempt): every instance once. Its Pass@1
is the resolved share of its finished units. Definitions (SWE-rebench reports the standard
deviation of Pass@1 over repeated runs; Inspect and Harbor call attempts epochs):

- pass@k, per view (instance, seed) with n finished attempts of which c resolved, the unbiased
  estimator ``raydist.analysis.pass_at_k`` at k = the cell's attempts, averaged over the views
  with n >= k (a view whose attempts ended in errors has fewer and is counted apart).
- run-to-run sd: for each seed, the sample standard deviation (ddof 1) of the runs' Pass@1 over
  its attempts; pooled over seeds as the root of the mean variance. Seeds are left out of it
  (two seeds are two views: their difference is the level's, not noise). Undefined with one
  attempt.
- noise floor of a level's Δ: ``2 s0 sqrt(1/R0 + 1/R)``, with s0 the run-to-run sd at L0 and
  R0, R the runs averaged at L0 and at the level: two standard errors of the difference of two
  means of runs when the level changes nothing and its runs are as noisy as L0's. A |Δ| within
  it is what repeating L0 could give by itself.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from fractions import Fraction
from statistics import fmean, variance

from raydist.analysis.pass_at_k import pass_at_k_exact
from raydist.analysis.runs import BASELINE
from raydist.outcomes import FINISHED, RESOLVED


def _attempt(row: Mapping) -> int:
    return int(row.get("attempt") or 0)  # null: a row written before attempts existed


def cell_attempts(rows: Iterable[Mapping]) -> dict:
    """The attempt statistics of one cell's rows (dicts with ``instance_id``, ``seed``,
    ``attempt`` (None read as 0) and ``outcome``; error rows count for ``k`` only):

    ``attempts`` (k: the cell's attempts, 1 + the largest ``attempt`` of any row), ``runs``
    (the (seed, attempt) pairs with a finished unit), ``pass_at_k`` (a fraction in [0, 1], or
    None when no view has k finished attempts), ``pass_at_k_views`` (the views it averages),
    ``short_views`` (views with a finished attempt but fewer than k), ``run_sd`` (the pooled
    run-to-run standard deviation of Pass@1, a fraction; None unless some seed has two
    finished attempts). Definitions: the module's docstring."""
    rows = list(rows)
    k = 1 + max((_attempt(r) for r in rows), default=0)
    views: dict[tuple, list[bool]] = {}
    runs: dict[tuple, list[bool]] = {}
    for row in rows:
        if row["outcome"] in FINISHED:
            verdict = row["outcome"] == RESOLVED
            views.setdefault((row["instance_id"], row["seed"]), []).append(verdict)
            runs.setdefault((row["seed"], _attempt(row)), []).append(verdict)
    full = [v for v in views.values() if len(v) >= k]
    estimate = (sum((pass_at_k_exact(len(v), sum(v), k) for v in full), Fraction(0)) / len(full)) if full else None
    by_seed: dict[int, list[float]] = {}
    for (seed, _), verdicts in sorted(runs.items()):
        by_seed.setdefault(seed, []).append(fmean(verdicts))
    variances = [variance(shares) for shares in by_seed.values() if len(shares) > 1]
    return {"attempts": k, "runs": len(runs), "pass_at_k": None if estimate is None else float(estimate),
            "pass_at_k_views": len(full), "short_views": len(views) - len(full),
            "run_sd": math.sqrt(fmean(variances)) if variances else None}


def noise_floor(baseline_sd: float | None, baseline_runs: int, runs: int) -> float | None:
    """The noise floor of a Δ against L0, in the unit of ``baseline_sd`` (the run-to-run sd at
    L0): ``2 * baseline_sd * sqrt(1 / baseline_runs + 1 / runs)`` (module docstring). None when
    the sd is undefined (one attempt) or a cell has no run. Raises nothing."""
    if baseline_sd is None or baseline_runs < 1 or runs < 1:
        return None
    return 2 * baseline_sd * math.sqrt(1 / baseline_runs + 1 / runs)


def exceeds(delta: float | None, floor: float | None) -> bool | None:
    """Whether ``|delta|`` is larger than ``floor`` (same unit); None when either is undefined."""
    return None if delta is None or floor is None else abs(delta) > floor


def attempt_cells(rows: Iterable[Mapping]) -> dict[tuple[str, str, str], dict]:
    """``{(model, agent, level): cell_attempts(...) | {"noise_floor": ...}}`` over ``rows``
    (runs table dicts with ``model``, ``agent``, ``level`` besides ``cell_attempts``' keys).
    ``noise_floor`` (a fraction) is the floor of the level's Δ against its system's L0
    (``noise_floor``), None at L0 itself and when the system has no L0 cell."""
    cells: dict[tuple, list[Mapping]] = {}
    for row in rows:
        cells.setdefault((row["model"], row["agent"], row["level"]), []).append(row)
    out = {key: cell_attempts(cell) for key, cell in cells.items()}
    for (model, agent, level), stats in out.items():
        base = out.get((model, agent, BASELINE))
        stats["noise_floor"] = None if level == BASELINE or base is None else noise_floor(
            base["run_sd"], base["runs"], stats["runs"])
    return out
