"""The report phase of a DyCodeEval launch (§4, §5): the tables and the printed summary.

From the records and numbers the earlier phases returned (nothing is read back from the run
directory): ``variants.parquet`` (``VARIANTS_SCHEMA``), ``completions.parquet`` (one row per
sample), ``human_check.csv`` (pairs for human verification), and ``summary.md`` with the
acceptance rate of each validator check, the canonical check, pass@k on the seeds, DyPass@k
over the accepted variants, the diversity table (DyCodeEval's variants beside rule-based
baselines), the collision analysis of §3.3 and the stability of §4.5.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from raydist._util.files import atomic_write_parquet, atomic_write_text
from raydist.analysis.baselines import perturb
from raydist.analysis.diversity import diversity_table
from raydist.problems.generate import export_for_human_check, variants_table
from raydist.problems.job import ProblemsJob
from raydist.problems.phases import Seeds, Validated
from raydist.problems.summary import Metrics
from raydist.results.schema import table_from_rows

__all__ = ["COMPLETIONS_SCHEMA", "Report", "collision_markdown", "completions_table", "diversity_markdown",
           "diversity_rows", "diversity_table_markdown", "report", "stability_markdown", "summary_markdown"]

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
"""One row per sample (``raydist.problems.summary.completion_rows``)."""


def completions_table(rows) -> pa.Table:
    """``rows`` (``completion_rows`` dicts) as a table of ``COMPLETIONS_SCHEMA``, in order; a
    nullable column a row lacks is null.

    Raises ``ValueError`` (``table_from_rows``) naming a key that is no column, or a required
    column a row lacks."""
    return table_from_rows(rows, COMPLETIONS_SCHEMA, "completions.parquet")


@dataclass(frozen=True)
class Report:
    """What the report phase wrote: the summary's Markdown text (also printed)."""

    text: str


def report(job: ProblemsJob, seed_set: Seeds, validated: Validated, result: Metrics) -> Report:
    """Write the tables and ``summary.md`` into the run directory (each file at once: a reader
    sees the previous launch's file or this one's) and print the summary."""
    run_dir, numbers = job.run_dir, result.numbers
    atomic_write_parquet(run_dir / "variants.parquet", variants_table(list(validated.variants)))
    atomic_write_parquet(run_dir / "completions.parquet", completions_table(result.rows))
    gen = job.generation
    text = summary_markdown(job.dataset, gen.model, gen.variants_per_seed, list(job.evaluation.k), numbers)
    accepted = [v for v in validated.variants if v.accepted and v.canonical_passed]
    n_check = min(job.analysis.human_check, len(accepted))
    if n_check:
        export_for_human_check(accepted, n_check, 0, run_dir / "human_check.csv")
    text += diversity_markdown(list(job.analysis.baselines), list(seed_set.problems), accepted)
    text += collision_markdown(numbers["collision"])
    text += stability_markdown(numbers["stability"])
    atomic_write_text(run_dir / "summary.md", text)
    print(text, flush=True)
    return Report(text)


def _fmt(value) -> str:
    return "n/a" if value is None else (f"{value:.3f}" if isinstance(value, float) else str(value))


def summary_markdown(dataset: str, generator: str, variants_per_seed: int, ks: list[int], numbers: dict) -> str:
    """The summary of :func:`raydist.problems.summary.summary_numbers` as Markdown, saying
    plainly when the generator yielded few or no variants."""
    lines = [f"# raydist problems: {dataset} / generator {generator}", "",
             f"{numbers['variants']} variants generated ({variants_per_seed} per seed problem); "
             f"{numbers['failed_calls']} with a failed LLM call (recorded in llm_calls.jsonl).", "",
             "| validator check | asked | YES rate |", "|---|---:|---:|",
             f"| semantic equivalence with the seed | {numbers['validated']} | {_fmt(numbers['semantic_yes'])} |",
             f"| consistency with the canonical solution | {numbers['validated']} "
             f"| {_fmt(numbers['consistent_yes'])} |",
             "", "Rejected at the context generator: {contexts}, at the rewriter's checks: {rewrite}, by the "
             "validator: {validator} (each row's reason is in variants.parquet, column rejection).".format(
                 **numbers["rejected_at"]),
             "", f"Accepted (both YES and every deterministic check): {numbers['accepted']} of {numbers['variants']}. "
             f"Canonical solution passes the accepted variants' tests: {numbers['canonical_passed']} of "
             f"{numbers['canonical_checked']}."]
    if numbers["accepted"]:
        lines += ["", f"The validator's verdicts are {generator}'s own: review the pairs in human_check.csv "
                      "(Appendix D) before trusting the accepted variants, above all from a small model."]
    if numbers["variants"] and numbers["failed_calls"] == numbers["variants"]:
        lines += ["", f"No variant was generated: every call to {generator} failed (is its endpoint reachable? "
                      "see llm_calls.jsonl). The same command retries them."]
    elif numbers["accepted"] < max(1, numbers["variants"] // 4):
        lines += ["", f"Few variants were accepted: {generator} is too weak a generator for DyCodeEval's "
                      "agents (§4.6 reports 83-95% consistency only with much larger models). Point "
                      "generation.model at a stronger OpenAI-compatible endpoint to get a usable dynamic set; "
                      "DyPass below covers only the accepted variants."]
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


def diversity_rows(baselines: list[str], seeds: list[tuple[str, str, str]],
                   accepted: list[tuple[str, str]]) -> list[tuple[str, str, str, str]]:
    """The input of ``raydist.analysis.diversity.diversity_table``: ``(method, seed_id,
    seed_prompt, variant_prompt)`` for DyCodeEval's ``accepted`` variants (``(seed_id,
    prompt)``) of the ``seeds`` (``(problem_id, prompt, entry_point)``), then two perturbations
    (seeds 0 and 1) of every seed by each rule-based baseline that applies to it."""
    prompts = {problem_id: prompt for problem_id, prompt, _ in seeds}
    rows = [("dycodeeval", seed_id, prompts[seed_id], prompt) for seed_id, prompt in accepted if seed_id in prompts]
    for name in baselines:
        for problem_id, prompt, entry_point in seeds:
            for seed in (0, 1):
                try:
                    rows.append((name, problem_id, prompt, perturb(prompt, entry_point, name, seed)))
                except ValueError:
                    continue  # nothing for this perturbation to act on in this prompt
    return rows


def diversity_markdown(baselines: list[str], problems: list, accepted: list) -> str:
    """§4.4's table: external (variant vs seed) and internal (variant vs variant) BLEU-4 and
    semantic similarity, for DyCodeEval's accepted variants and each rule-based baseline
    (two seeds of each per problem, :func:`diversity_rows`). Lower means more diverse."""
    table = diversity_table(diversity_rows(baselines, [(p.problem_id, p.prompt, p.entry_point) for p in problems],
                                           [(v.seed_id, v.prompt) for v in accepted]))
    return diversity_table_markdown(table)


def diversity_table_markdown(table: list[dict]) -> str:
    """The rows of ``diversity_table`` as the summary's Markdown section."""
    lines = ["", "## Diversity (§4.4; lower similarity = more diverse)", "",
             "| method | seeds | variants | external BLEU-4 | external semantic | internal BLEU-4 "
             "| internal semantic |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for r in table:
        lines.append(f"| {r['method']} | {r['seeds']} | {r['variants']} | {_fmt(r['external_bleu4'])} | "
                     f"{_fmt(r['external_semantic'])} | {_fmt(r['internal_bleu4'])} | {_fmt(r['internal_semantic'])} |")
    if not any(r["method"] == "dycodeeval" for r in table):
        lines.append("| dycodeeval | 0 | 0 | n/a | n/a | n/a | n/a |")
    return "\n".join(lines) + "\n"


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

