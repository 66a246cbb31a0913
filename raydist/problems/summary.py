"""The numbers of a DyCodeEval launch (§3.3, §4, §5), from the records the phases returned:
acceptance rates of each validator check, the canonical check, pass@k on the seeds, DyPass@k
over the accepted variants, the collision analysis of §3.3 and the stability of §4.5. Pure:
no files, no Docker, no Ray.

Runs and datasets: generation seed g of every seed problem is run g of that seed (§3.3), and
the variants of generation seed g form generated dataset g (§4.5), so M = R =
``generation.variants_per_seed``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass

from raydist.analysis import collision as col
from raydist.analysis.stability import stability
from raydist.problems.job import ProblemsJob
from raydist.problems.metrics import dypass_at_k, mean_pass_at_k
from raydist.problems.phases import Executed, Generated, Seeds, Validated

__all__ = ["Metrics", "collision_numbers", "completion_rows", "metrics", "stability_numbers", "summary_numbers"]


@dataclass(frozen=True)
class Metrics:
    """``numbers``: :func:`summary_numbers` plus ``collision`` (:func:`collision_numbers`) and
    ``stability`` (:func:`stability_numbers`); ``rows``: one row per sample
    (:func:`completion_rows`), the rows of ``completions.parquet``."""

    numbers: dict
    rows: tuple[dict, ...]


def metrics(job: ProblemsJob, seed_set: Seeds, generated: Generated, validated: Validated,
            executed: Executed) -> Metrics:
    """Every number of the launch's summary."""
    variants = [asdict(v) for v in validated.variants]
    rows = completion_rows(list(executed.completions))
    numbers = summary_numbers(variants, rows, list(seed_set.problems), list(job.evaluation.k))
    # |S|: the scenario pool the generator drew from, else the distinct scenarios seen.
    pool = len(generated.pool) if generated.pool is not None else len({v["scenario"] for v in variants})
    numbers["collision"] = collision_numbers(variants, pool)
    numbers["stability"] = stability_numbers(variants, rows)
    return Metrics(numbers, tuple(rows))


def completion_rows(records: list[dict]) -> list[dict]:
    """One row per sample of every completion record; a record whose model call failed
    contributes one failed row per requested sample, with the error (a failure is scored,
    never dropped)."""
    rows = []
    for rec in records:
        base = {"model": rec["model"], "item_id": rec["item_id"], "seed_id": rec["seed_id"],
                "variant_id": rec["variant_id"]}
        if rec.get("error"):
            rows += [base | {"sample": i, "passed": False, "status": "error", "seconds": None, "solution": None,
                             "error": rec["error"]} for i in range(int(rec["n"]))]
            continue
        rows += [base | {"sample": i, "passed": s["passed"], "status": s["status"], "seconds": s["seconds"],
                         "solution": s["solution"], "error": None} for i, s in enumerate(rec["samples"])]
    return rows


def summary_numbers(variants: list[dict], rows: list[dict], problems: list, ks: list[int]) -> dict:
    """Acceptance rates, canonical check, pass@k (seeds) and DyPass@k (variants) per model.

    Rates are over the variants the validator was asked about (no failed LLM call, no
    deterministic rejection before it); DyPass@k follows ``raydist.problems.dypass_at_k``.
    """
    asked = [v for v in variants if v.get("semantic_verdict") is not None or v.get("consistency_verdict") is not None]
    accepted = [v for v in variants if v["accepted"]]
    out = {
        "variants": len(variants), "failed_calls": sum(1 for v in variants if v.get("error")),
        "validated": len(asked),
        "semantic_yes": _rate(sum(v.get("semantic_verdict") == "YES" for v in asked), len(asked)),
        "consistent_yes": _rate(sum(v.get("consistency_verdict") == "YES" for v in asked), len(asked)),
        "accepted": len(accepted),
        "rejected_at": {stage: sum(1 for v in variants if (v.get("rejection") or "").startswith(stage + ":"))
                        for stage in ("contexts", "rewrite", "validator")},
        "canonical_passed": sum(1 for v in accepted if v.get("canonical_passed")),
        "canonical_checked": sum(1 for v in accepted if v.get("canonical_passed") is not None),
        "models": {},
    }
    seed_ids = {p.problem_id for p in problems}
    for model in sorted({r["model"] for r in rows}):
        mine = [r for r in rows if r["model"] == model]
        seeds: dict[str, tuple[int, int]] = {}
        per_variant: dict[str, dict[str, list[int]]] = {}
        for r in mine:
            if r["variant_id"] is None and r["seed_id"] in seed_ids:
                n, c = seeds.get(r["seed_id"], (0, 0))
                seeds[r["seed_id"]] = (n + 1, c + int(r["passed"]))
            elif r["variant_id"] is not None:
                counts = per_variant.setdefault(r["seed_id"], {}).setdefault(r["variant_id"], [0, 0])
                counts[0] += 1
                counts[1] += int(r["passed"])
        out["models"][model] = {
            "seeds": len(seeds), "variant_seeds": len(per_variant),
            "failed_calls": len({r["item_id"] for r in mine if r["status"] == "error" and r.get("error")}),
            "prompts": len({r["item_id"] for r in mine}),
            **{f"pass@{k}": mean_pass_at_k(seeds, k) if seeds and all(n >= k for n, _ in seeds.values()) else None
               for k in ks},
            **{f"DyPass@{k}": dypass_at_k({s: [tuple(c) for c in vs.values()] for s, vs in per_variant.items()}, k)
               if per_variant else None for k in ks},
        }
    out["failed_items"] = out["failed_calls"] + sum(m["failed_calls"] for m in out["models"].values())
    return out


def _rate(hits: int, total: int) -> float | None:
    return hits / total if total else None



def _runs_by_seed(variants: list[dict], field: str) -> dict[str, list[str]]:
    """seed id -> ``field`` of its variants in generation-seed order, for seeds where every
    run produced that field."""
    by_seed: dict[str, list[dict]] = {}
    for v in variants:
        by_seed.setdefault(v["seed_id"], []).append(v)
    out = {}
    for seed_id, runs in sorted(by_seed.items()):
        runs.sort(key=lambda v: v["generation_seed"])
        if all(v.get(field) for v in runs):
            out[seed_id] = [v[field] for v in runs]
    return out


def collision_numbers(variants: list[dict], pool_size: int) -> dict:
    """Observed repeat and collision rates over the M runs of each seed problem beside the
    exact probabilities and bounds of Theorems 3.1-3.3 (``raydist.analysis.collision``).

    Two outcomes are compared: the scenario drawn (uniform over the pool, so N = |S| and the
    theorems apply as stated) and the rewritten prompt (normalised text) of runs whose rewrite
    passed the rewriter's checks, i.e. a candidate problem (a rewrite refused as a copy of the
    seed is not a generated problem, and would count as a collision of every run that made
    it). The prompt space is at least as large as the scenario space (contexts multiply it,
    §3.3), so the theorems with N = |S| bound the prompt rates from above. Seeds count only
    when all their M runs produced the outcome; with M < 2 there is nothing to compare and
    ``runs`` says so.

    Returns ``{"runs": M, "pool": |S|, "rows": [{"outcome", "seeds", "repeat_rate",
    "repeat_exact", "repeat_bound", "collision_rate", "collision_exact", "collision_bound",
    "dataset_collision_rate", "dataset_collision_exact"}]}`` (rates and probabilities in [0, 1];
    None where undefined).
    """
    runs = max(Counter(v["seed_id"] for v in variants).values(), default=0)
    out: dict = {"runs": runs, "pool": pool_size, "rows": []}
    if runs < 2 or pool_size < 1:
        return out
    problems = [v | {"problem": v["prompt"] if _is_candidate(v) else None} for v in variants]
    for outcome, field in (("scenario drawn", "scenario"), ("rewritten problem", "problem")):
        per_seed = {k: g for k, g in _runs_by_seed(problems, field).items() if len(g) == runs}
        row = {"outcome": outcome, "seeds": len(per_seed),
               "repeat_exact": col.repeat_probability(pool_size, 1, runs),
               "repeat_bound": col.repeat_bound(pool_size, 1, runs),
               "collision_exact": col.collision_probability(pool_size, 1, runs),
               "collision_bound": col.collision_bound(pool_size, 1, runs),
               "repeat_rate": None, "collision_rate": None, "dataset_collision_rate": None,
               "dataset_collision_exact": None}
        if per_seed:
            row["repeat_rate"] = col.repeat_rate(per_seed)
            row["collision_rate"] = col.seed_collision_rate(per_seed)
            datasets = [{k: g[i] for k, g in per_seed.items()} for i in range(runs)]
            row["dataset_collision_rate"] = col.collision_rate(datasets)
            row["dataset_collision_exact"] = col.dataset_collision_probability(pool_size, 1, len(per_seed), 2)
        out["rows"].append(row)
    return out


def _is_candidate(variant: dict) -> bool:
    """The run produced a rewritten problem: a prompt that passed the rewriter's checks (the
    validator may still have refused it)."""
    rejection = variant.get("rejection") or ""
    return bool(variant.get("prompt")) and not rejection.startswith(("contexts:", "rewrite:")) \
        and not variant.get("error")



def stability_numbers(variants: list[dict], rows: list[dict], confidence: float = 0.95) -> dict:
    """Pass@1 of each model on each generated dataset (the accepted, canonical-checked variants
    of one generation seed), and their mean ± sample std over the R datasets (§4.5,
    ``raydist.analysis.stability``). A dataset with no accepted variant has no Pass@1 and is
    not counted in R.

    Returns ``{model: {"datasets": {generation_seed: {"variants": int, "pass@1": float}},
    "R": int, "mean", "std", "ci_low", "ci_high": float | None}}``; the last four are None
    with R < 2.
    """
    dataset_of = {v["variant_id"]: int(v["generation_seed"]) for v in variants
                  if v["accepted"] and v.get("canonical_passed")}
    out: dict = {}
    for model in sorted({r["model"] for r in rows}):
        counts: dict[int, dict[str, tuple[int, int]]] = {}
        for r in rows:
            if r["model"] != model or r["variant_id"] not in dataset_of:
                continue
            per = counts.setdefault(dataset_of[r["variant_id"]], {})
            n, c = per.get(r["variant_id"], (0, 0))
            per[r["variant_id"]] = (n + 1, c + int(r["passed"]))
        datasets = {g: {"variants": len(per), "pass@1": mean_pass_at_k(per, 1)} for g, per in sorted(counts.items())}
        entry = {"datasets": datasets, "R": len(datasets), "mean": None, "std": None, "ci_low": None,
                 "ci_high": None}
        if len(datasets) >= 2:
            s = stability([d["pass@1"] for d in datasets.values()], confidence)
            entry.update(mean=s.mean, std=s.std, ci_low=s.ci_low, ci_high=s.ci_high)
        out[model] = entry
    return out
