"""The pass@k table of DyCodeEval's evaluation (§5, Table 2) over the run tables of finished
problems launches: pass@k on the seed problems and on their variants beside DyPass@k, per
model, each with an interval. Pure: rows in, numbers out (reading a run directory's tables
aside).

Intervals: a score over problems is a mean of per-problem scores, and its interval the
Student-t interval of that mean over the problems (``raydist.analysis.stability.mean_interval``):
the problem is the sampled unit, as the seed problems are a sample of those the model could be
asked. The sampling of the n answers within a problem is already averaged in its pass@k.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq

from raydist.analysis.stability import mean_interval
from raydist.problems.metrics import dypass_at_k, pass_at_k

__all__ = ["ProblemRun", "load_problem_run", "pass_table", "score_points"]


@dataclass(frozen=True)
class ProblemRun:
    """The tables of one problems run directory, as rows (dicts).

    ``variants``: ``variants.parquet`` rows (``contexts`` a dict); ``completions``:
    ``completions.parquet`` rows (empty when no model was evaluated); ``dataset`` and
    ``generator``: from the variants (the folder's name when there are none); ``pool``: the
    size of the stored scenario pool (``scenarios.json``), None when none was stored.
    """

    run_dir: Path
    dataset: str
    generator: str
    variants: tuple[dict, ...]
    completions: tuple[dict, ...]
    pool: int | None


def load_problem_run(run_dir: str | Path) -> ProblemRun:
    """Read the tables of the problems run directory ``run_dir``.

    Raises ``ValueError`` naming the folder when it has no ``variants.parquet`` (not a
    problems run directory, or a launch that has not reached its report).
    """
    folder = Path(run_dir)
    if not (folder / "variants.parquet").is_file():
        raise ValueError(f"{folder}: no variants.parquet; give the run directory of a problems launch "
                         "(output_root/problems/<dataset>/<generator>) whose report phase has run")
    variants = tuple(row | {"contexts": dict(row["contexts"])}
                     for row in pq.read_table(folder / "variants.parquet").to_pylist())
    completions_file = folder / "completions.parquet"
    completions = tuple(pq.read_table(completions_file).to_pylist()) if completions_file.is_file() else ()
    pool_file = folder / "scenarios.json"
    pool = len(json.loads(pool_file.read_text())) if pool_file.is_file() else None
    datasets = sorted({v["dataset"] for v in variants})
    generators = sorted({v["generator_model"] for v in variants})
    return ProblemRun(folder, "+".join(datasets) or folder.name, "+".join(generators) or folder.name,
                      variants, completions, pool)


def _counts(completions: Iterable[Mapping], model: str) -> tuple[dict, dict]:
    """``(seeds, variants)`` of one model: seed id -> [n, c] of its seed prompt; seed id ->
    {variant id -> [n, c]} of its variants."""
    seeds: dict[str, list[int]] = {}
    variants: dict[str, dict[str, list[int]]] = {}
    for r in completions:
        if r["model"] != model:
            continue
        if r["variant_id"] is None:
            counts = seeds.setdefault(r["seed_id"], [0, 0])
        else:
            counts = variants.setdefault(r["seed_id"], {}).setdefault(r["variant_id"], [0, 0])
        counts[0] += 1
        counts[1] += int(r["passed"])
    return seeds, variants


def pass_table(completions: Iterable[Mapping], ks: Sequence[int] = (1,), confidence: float = 0.95) -> list[dict]:
    """Table 2 of §5 per model, from ``completions.parquet`` rows (``model, seed_id,
    variant_id, passed``; one row per sample, a failed call a failed sample).

    One row per model, sorted by name, with ``model``, ``seeds`` (seed problems answered),
    ``variants`` (variants answered), ``variant_seeds`` (seeds with a variant answered) and,
    for each k in ``ks``, ``(value, low, high)`` under the keys ``X``, ``X_low``, ``X_high``:

    - ``pass@k``: pass@k of each seed prompt, averaged over the seeds (the static score);
    - ``variant_pass@k``: pass@k of each variant prompt as a problem of its own, averaged
      over the variants;
    - ``DyPass@k``: DyPass@k of each seed over its variants
      (``raydist.problems.dypass_at_k``, pooled draw), averaged over the seeds with variants;
    - ``delta@k``: DyPass@k minus pass@k of the same seed, averaged over the seeds that have
      both (negative: the model does worse when the prompt is rephrased).

    Intervals as ``raydist.analysis.stability.mean_interval`` (clipped to [0, 1], ``delta``
    to [-1, 1]). A value is None when there is nothing to average or
    a problem has fewer than k samples (pass@k is undefined there). Raises ``ValueError``
    for ``k < 1``.
    """
    if any(k < 1 for k in ks):
        raise ValueError(f"k must be >= 1, got {list(ks)}")
    completions = list(completions)
    rows = []
    for model in sorted({r["model"] for r in completions}):
        seeds, variants = _counts(completions, model)
        row: dict = {"model": model, "seeds": len(seeds),
                     "variants": sum(len(v) for v in variants.values()), "variant_seeds": len(variants)}
        for k in ks:
            static = {s: pass_at_k(n, c, k) for s, (n, c) in seeds.items() if n >= k}
            dynamic = {s: dypass_at_k({s: [tuple(nc) for nc in vs.values()]}, k) for s, vs in variants.items()
                       if sum(n for n, _ in vs.values()) >= k}
            per_variant = [pass_at_k(n, c, k) for vs in variants.values() for n, c in vs.values() if n >= k]
            both = [dynamic[s] - static[s] for s in dynamic if s in static]
            _put(row, f"pass@{k}", list(static.values()) if len(static) == len(seeds) else [], confidence)
            _put(row, f"variant_pass@{k}",
                 per_variant if len(per_variant) == row["variants"] else [], confidence)
            _put(row, f"DyPass@{k}", list(dynamic.values()) if len(dynamic) == len(variants) else [], confidence)
            _put(row, f"delta@{k}", both, confidence, bounds=(-1.0, 1.0))
        rows.append(row)
    return rows


def _put(row: dict, key: str, scores: list[float], confidence: float, bounds=(0.0, 1.0)) -> None:
    value, low, high = mean_interval(scores, confidence, bounds) if scores else (None, None, None)
    row |= {key: value, f"{key}_low": low, f"{key}_high": high}


def score_points(table: Sequence[Mapping], static: str = "pass@1", dynamic: str = "DyPass@1") -> dict[str, tuple]:
    """``{model: (static, dynamic)}`` of the rows of :func:`pass_table` that have both scores:
    the points of Figure 5."""
    return {r["model"]: (r[static], r[dynamic]) for r in table
            if r.get(static) is not None and r.get(dynamic) is not None}
