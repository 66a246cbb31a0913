"""The tables and the printed summary of a DyCodeEval launch (§4, §5).

From the per-item records of the run directory: ``variants.parquet`` (``VARIANTS_SCHEMA``),
``completions.parquet`` (one row per sample), ``human_check.csv`` (pairs for human
verification), and ``summary.md`` with the acceptance rate of each validator check, the
canonical check, pass@k on the seeds, DyPass@k over the accepted variants, and the diversity
table (DyCodeEval's variants beside rule-based baselines).
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
    from raydist.problems.pipeline import read_json_dir

    run_dir = job.run_dir
    variants = list(read_json_dir(run_dir / "variants").values())
    objects = [Variant(**{**v, "tests": tuple(v["tests"])}) for v in variants]
    pq.write_table(variants_table(objects), run_dir / "variants.parquet")
    completions = list(read_json_dir(run_dir / "completions").values())
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
            **{f"pass@{k}": mean_pass_at_k(seeds, k) if seeds and all(n >= k for n, _ in seeds.values()) else None
               for k in ks},
            **{f"DyPass@{k}": dypass_at_k({s: [tuple(c) for c in vs.values()] for s, vs in per_variant.items()}, k)
               if per_variant else None for k in ks},
        }
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
             "", f"Accepted (both YES and every deterministic check): {numbers['accepted']} of {numbers['variants']}. "
             f"Canonical solution passes the accepted variants' tests: {numbers['canonical_passed']} of "
             f"{numbers['canonical_checked']}."]
    if numbers["accepted"] < max(1, numbers["variants"] // 4):
        lines += ["", f"Few variants were accepted: {gen['model']} is too weak a generator for DyCodeEval's "
                      "agents (§4.6 reports 83-95% consistency only with much larger models). Point "
                      "generation.model at a stronger OpenAI-compatible endpoint to get a usable dynamic set; "
                      "DyPass below covers only the accepted variants."]
    ks = [int(k) for k in job.evaluation.get("k", [1])]
    lines += ["", "| model | seeds | " + " | ".join(f"pass@{k}" for k in ks) + " | seeds with variants | "
              + " | ".join(f"DyPass@{k}" for k in ks) + " |",
              "|---|---:|" + "---:|" * len(ks) + "---:|" + "---:|" * len(ks)]
    for model, m in numbers["models"].items():
        lines.append(f"| {model} | {m['seeds']} | " + " | ".join(_fmt(m[f'pass@{k}']) for k in ks)
                     + f" | {m['variant_seeds']} | " + " | ".join(_fmt(m[f'DyPass@{k}']) for k in ks) + " |")
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


def dumps(numbers: dict) -> str:
    """``numbers`` as indented JSON (for scripts reading the launch's result)."""
    return json.dumps(numbers, indent=1, sort_keys=True)
