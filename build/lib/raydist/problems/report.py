"""The tables and the printed summary of a DyCodeEval launch (§4, §5).

From the per-item records of the run directory: ``variants.parquet`` (``VARIANTS_SCHEMA``),
``completions.parquet`` (one row per sample), ``human_check.csv`` (pairs for human
verification), and ``summary.md`` with the acceptance rate of each validator check, the
canonical check, pass@k on the seeds, DyPass@k over the accepted variants, the diversity
table (DyCodeEval's variants beside rule-based baselines), the collision analysis of §3.3 and
the stability of §4.5.

Runs and datasets: generation seed g of every seed problem is run g of that seed (§3.3), and
the variants of generation seed g form generated dataset g (§4.5), so M = R =
``generation.variants_per_seed``.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq

COMPLETIONS_SCHEMA = pa.schema([
    pa.field("model", pa.string(), nullable=False),
    pa.field("item_id", pa.string(), nullable=False),
    pa.field("seed_id", pa.string(), nullable=False),
    pa.field("variant_id", pa.string()),
    pa.field("sample", pa.int64(), nullable=False),
    pa.field("passed", pa.bool_(), nullable=False),
    pa.field("status", pa.string(), nullable=False),
    pa.field("seconds", pa.float64()),
    pa.field("solution", pa.string()),
    pa.field("error", pa.string()),
])


def report(job, problems: list) -> dict:
    """Write the tables, print and return the summary numbers (see module doc)."""
    from raydist.problems.generate import Variant, variants_table
    from raydist.problems.pipeline import current_records

    run_dir = job.run_dir
    variants, completions = current_records(job, problems)
    objects = [Variant(**{**v, "tests": tuple(v["tests"])}) for v in variants]
    pq.write_table(variants_table(objects), run_dir / "variants.parquet")
    rows = completion_rows(completions)
    pq.write_table(pa.Table.from_pylist(rows, schema=COMPLETIONS_SCHEMA), run_dir / "completions.parquet")
    numbers = summary_numbers(variants, rows, problems, [int(k) for k in job.evaluation.get("k", [1])])
    text = summary_markdown(job, numbers)
    accepted = [o for o in objects if o.accepted and o.canonical_passed]
    n_check = min(int(job.analysis.get("human_check", 0)), len(accepted))
    if n_check:
        from raydist.problems.generate import export_for_human_check

        export_for_human_check(accepted, n_check, 0, run_dir / "human_check.csv")
    text += diversity_markdown(job, problems, accepted)
    numbers["collision"] = collision_numbers(variants, _pool_size(run_dir, variants))
    text += collision_markdown(numbers["collision"])
    numbers["stability"] = stability_numbers(variants, rows)
    text += stability_markdown(numbers["stability"])
    (run_dir / "summary.md").write_text(text)
    print(text, flush=True)
    return numbers


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
    from raydist.problems.metrics import dypass_at_k, mean_pass_at_k

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


def _fmt(value) -> str:
    return "n/a" if value is None else (f"{value:.3f}" if isinstance(value, float) else str(value))


def summary_markdown(job, numbers: dict) -> str:
    """The summary as Markdown, saying plainly when the generator yielded few or no variants."""
    gen = job.generation
    lines = [f"# raydist problems: {job.dataset} / generator {gen['model']}", "",
             f"{numbers['variants']} variants generated ({gen['variants_per_seed']} per seed problem); "
             f"{numbers['failed_calls']} with a failed LLM call (recorded in llm_calls.jsonl).", "",
             "| validator check | asked | YES rate |", "|---|---:|---:|",
             f"| semantic equivalence with the seed | {numbers['validated']} | {_fmt(numbers['semantic_yes'])} |",
             f"| consistency with the canonical solution | {numbers['validated']} | {_fmt(numbers['consistent_yes'])} |",
             "", "Rejected at the context generator: {contexts}, at the rewriter's checks: {rewrite}, by the "
             "validator: {validator} (each row's reason is in variants.parquet, column rejection).".format(
                 **numbers["rejected_at"]),
             "", f"Accepted (both YES and every deterministic check): {numbers['accepted']} of {numbers['variants']}. "
             f"Canonical solution passes the accepted variants' tests: {numbers['canonical_passed']} of "
             f"{numbers['canonical_checked']}."]
    if numbers["accepted"]:
        lines += ["", f"The validator's verdicts are {gen['model']}'s own: review the pairs in human_check.csv "
                      "(Appendix D) before trusting the accepted variants, above all from a small model."]
    if numbers["variants"] and numbers["failed_calls"] == numbers["variants"]:
        lines += ["", f"No variant was generated: every call to {gen['model']} failed (is its endpoint reachable? "
                      "see llm_calls.jsonl). The same command retries them."]
    elif numbers["accepted"] < max(1, numbers["variants"] // 4):
        lines += ["", f"Few variants were accepted: {gen['model']} is too weak a generator for DyCodeEval's "
                      "agents (§4.6 reports 83-95% consistency only with much larger models). Point "
                      "generation.model at a stronger OpenAI-compatible endpoint to get a usable dynamic set; "
                      "DyPass below covers only the accepted variants."]
    ks = [int(k) for k in job.evaluation.get("k", [1])]
    lines += ["", "| model | seeds | " + " | ".join(f"pass@{k}" for k in ks) + " | seeds with variants | "
              + " | ".join(f"DyPass@{k}" for k in ks) + " |",
              "|---|---:|" + "---:|" * len(ks) + "---:|" + "---:|" * len(ks)]
    failed = [f"{model}: {m['failed_calls']} of {m['prompts']} prompts got no answer (scored as failed; retried "
              "by the same command)" for model, m in numbers["models"].items() if m["failed_calls"]]
    for model, m in numbers["models"].items():
        lines.append(f"| {model} | {m['seeds']} | " + " | ".join(_fmt(m[f'pass@{k}']) for k in ks)
                     + f" | {m['variant_seeds']} | " + " | ".join(_fmt(m[f'DyPass@{k}']) for k in ks) + " |")
    if failed:
        lines += [""] + [f"Model calls failed: {line}." for line in failed]
    return "\n".join(lines) + "\n"


def diversity_markdown(job, problems: list, accepted: list) -> str:
    """§4.4's table: external (variant vs seed) and internal (variant vs variant) BLEU-4 and
    semantic similarity, for DyCodeEval's accepted variants and each rule-based baseline
    (two seeds of each per problem). Lower means more diverse."""
    from raydist.analysis.baselines import perturb
    from raydist.analysis.diversity import diversity_table

    prompts = {p.problem_id: p for p in problems}
    rows = [("dycodeeval", v.seed_id, prompts[v.seed_id].prompt, v.prompt) for v in accepted if v.seed_id in prompts]
    for name in job.analysis.get("baselines", []):
        for p in problems:
            for seed in (0, 1):
                try:
                    rows.append((name, p.problem_id, p.prompt, perturb(p.prompt, p.entry_point, name, seed)))
                except ValueError:
                    continue  # nothing for this perturbation to act on in this prompt
    table = diversity_table(rows)
    lines = ["", "## Diversity (§4.4; lower similarity = more diverse)", "",
             "| method | seeds | variants | external BLEU-4 | external semantic | internal BLEU-4 | internal semantic |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for r in table:
        lines.append(f"| {r['method']} | {r['seeds']} | {r['variants']} | {_fmt(r['external_bleu4'])} | "
                     f"{_fmt(r['external_semantic'])} | {_fmt(r['internal_bleu4'])} | {_fmt(r['internal_semantic'])} |")
    if not any(r["method"] == "dycodeeval" for r in table):
        lines.append("| dycodeeval | 0 | 0 | n/a | n/a | n/a | n/a |")
    return "\n".join(lines) + "\n"


def _pool_size(run_dir, variants: list[dict]) -> int:
    """|S|: the scenario pool the generator drew from (``scenarios.json``), else the distinct
    scenarios seen."""
    path = run_dir / "scenarios.json"
    if path.is_file():
        return len(json.loads(path.read_text()))
    return len({v["scenario"] for v in variants})


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
    from raydist.analysis import collision as col

    from collections import Counter

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


def _p(value) -> str:
    """A probability with three significant digits (theory values can be 1e-13)."""
    return "n/a" if value is None else f"{value:.3g}"


def collision_markdown(numbers: dict) -> str:
    """The §3.3 table of :func:`collision_numbers` as Markdown."""
    lines = ["", "## Collisions over M runs (§3.3, Theorems 3.1-3.3)", ""]
    if not numbers["rows"]:
        return "\n".join(lines + [f"Needs at least 2 runs per seed problem (generation.variants_per_seed >= 2); "
                                  f"this launch has {numbers['runs']}."]) + "\n"
    lines += [f"M = {numbers['runs']} runs per seed problem, scenario pool |S| = {numbers['pool']}; theory with "
              "N = |S| (for rewritten problems an upper bound: contexts only enlarge the space).", "",
              "| outcome | seeds | repeat rate (3.1) | exact | bound | collision rate (3.2) | exact | bound | "
              "dataset pair collision rate (3.3) | exact |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in numbers["rows"]:
        lines.append(f"| {r['outcome']} | {r['seeds']} | {_fmt(r['repeat_rate'])} | {_p(r['repeat_exact'])} | "
                     f"{_p(r['repeat_bound'])} | {_fmt(r['collision_rate'])} | {_p(r['collision_exact'])} | "
                     f"{_p(r['collision_bound'])} | {_fmt(r['dataset_collision_rate'])} | "
                     f"{_p(r['dataset_collision_exact'])} |")
    return "\n".join(lines) + "\n"


def stability_numbers(variants: list[dict], rows: list[dict], confidence: float = 0.95) -> dict:
    """Pass@1 of each model on each generated dataset (the accepted, canonical-checked variants
    of one generation seed), and their mean ± sample std over the R datasets (§4.5,
    ``raydist.analysis.stability``). A dataset with no accepted variant has no Pass@1 and is
    not counted in R.

    Returns ``{model: {"datasets": {generation_seed: {"variants": int, "pass@1": float}},
    "R": int, "mean", "std", "ci_low", "ci_high": float | None}}``; the last four are None
    with R < 2.
    """
    from raydist.analysis.stability import stability
    from raydist.problems.metrics import mean_pass_at_k

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


def stability_markdown(numbers: dict) -> str:
    """The §4.5 table of :func:`stability_numbers` as Markdown."""
    lines = ["", "## Stability over R generated datasets (§4.5)", "",
             "| model | R | Pass@1 per dataset (variants) | mean ± std | 95% CI |", "|---|---:|---|---|---|"]
    for model, m in numbers.items():
        per = ", ".join(f"{d['pass@1']:.3f} ({d['variants']})" for d in m["datasets"].values()) or "none"
        spread = "n/a (needs R >= 2)" if m["mean"] is None else f"{m['mean']:.3f} ± {m['std']:.3f}"
        ci = "n/a" if m["mean"] is None else f"{m['ci_low']:.3f}-{m['ci_high']:.3f}"
        lines.append(f"| {model} | {m['R']} | {per} | {spread} | {ci} |")
    if not numbers:
        lines.append("| (no model evaluated) | 0 | none | n/a | n/a |")
    return "\n".join(lines) + "\n"


def dumps(numbers: dict) -> str:
    """``numbers`` as indented JSON (for scripts reading the launch's result)."""
    return json.dumps(numbers, indent=1, sort_keys=True)
