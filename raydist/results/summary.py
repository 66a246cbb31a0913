"""The run summary: resolved rate per model x agent x level over the finished units, with mean
steps and tokens, the units that ended in an error counted apart (by outcome and cause), then
the action mix and the leak audit.

Metrics follow SchrodingerRepo §V-B: Pass@1 (here the resolved rate of single runs,
averaged over views and seeds), average actions (steps), average input and output tokens.
The action mix is §IV RQ2's taxonomy; the leak count is §III-F's audit. The integrity counts
are ``raydist.agents.integrity``'s flags.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from raydist.outcomes import ANSWERED, BUG, ERRORS, FINISHED, INFRASTRUCTURE_ERROR, INPUT_ERROR, RESOLVED, SCORED
from raydist.results.schema import INTEGRITY_CATEGORIES, RUNS_SCHEMA

# The action taxonomy's categories in the schema's column order (§IV RQ2's navigate, search, read,
# probe, edit, test, then submit, other), so the results package needs no agent imports.
CATEGORIES = tuple(f.name.removeprefix("actions_") for f in RUNS_SCHEMA if f.name.startswith("actions_"))


def summarise(table: pa.Table) -> list[dict]:
    """One dict per (model, agent, level), sorted by model, agent, level: ``units`` (rows),
    ``finished`` (outcome ``resolved`` or ``unresolved``), ``resolved``, and over the finished
    units only ``resolved_rate`` (resolved / finished; 0.0 when none finished); beside it
    ``resolved_rate_all``, resolved over every unit that is not a question (an error counted as
    unresolved, as SWE-bench's harness counts it, so a number comparable with swebench.com;
    0.0 without such a unit); over the finished units again
    ``mean_steps``, ``mean_input_tokens``, ``mean_output_tokens`` and ``cost`` (USD, summed);
    then the error outcomes counted apart: ``input_error``, ``infrastructure_error``, ``bug``.
    Repository questions (outcome ``answered``) count as finished; ``answered`` counts them and
    ``mean_score`` is their mean judge Average Score (0-100, None when none was answered); they
    never enter ``resolved_rate``.

    A unit that ended in an error has no result: counting it as unresolved would lower the
    rate for a broken machine, and its steps would enter the means (raydist.outcomes)."""
    groups: dict[tuple, list[dict]] = {}
    for row in table.select(["model", "agent", "level", "outcome", "steps", "input_tokens", "output_tokens",
                             "cost", "qa_score"]).to_pylist():
        groups.setdefault((row["model"], row["agent"], row["level"]), []).append(row)
    out = []
    for (model, agent, level), rows in sorted(groups.items()):
        graded = [r for r in rows if r["outcome"] in FINISHED]
        answered = [r for r in rows if r["outcome"] in SCORED]
        done = graded + answered
        resolved = sum(r["outcome"] == RESOLVED for r in graded)
        out.append({
            "model": model, "agent": agent, "level": level, "units": len(rows), "finished": len(done),
            "resolved": resolved, "resolved_rate": resolved / len(graded) if graded else 0.0,
            "resolved_rate_all": resolved / (len(rows) - len(answered)) if len(rows) > len(answered) else 0.0,
            ANSWERED: len(answered), "mean_score": _mean(answered, "qa_score") if answered else None,
            "mean_steps": _mean(done, "steps"), "mean_input_tokens": _mean(done, "input_tokens"),
            "mean_output_tokens": _mean(done, "output_tokens"), "cost": float(sum(r["cost"] or 0.0 for r in done)),
            **{outcome: sum(r["outcome"] == outcome for r in rows) for outcome in ERRORS},
        })
    return out


def _mean(rows: list[dict], column: str) -> float:
    return sum(r[column] or 0 for r in rows) / len(rows) if rows else 0.0


def error_counts(table: pa.Table) -> list[dict]:
    """The units that ended in an error, counted by ``(outcome, error_cause)``:
    ``[{"outcome", "error_cause", "units", "example"}]`` with ``example`` one such row's
    ``instance_id level seed: first line of its error``; in ``ERRORS`` order, then by count
    (descending) and cause."""
    counts: dict[tuple[str, str], list] = {}
    for row in table.select(["instance_id", "level", "seed", "outcome", "error_cause", "error"]).to_pylist():
        if row["outcome"] in ERRORS:
            entry = counts.setdefault((row["outcome"], row["error_cause"] or "unknown"), [0, row])
            entry[0] += 1
    out = []
    for (outcome, cause), (n, row) in counts.items():
        first = (row["error"] or "").strip().splitlines()[0][:300] if row["error"] else ""
        out.append({"outcome": outcome, "error_cause": cause, "units": n,
                    "example": f"{row['instance_id']} {row['level']} seed {row['seed']}: {first}"})
    return sorted(out, key=lambda e: (ERRORS.index(e["outcome"]), -e["units"], e["error_cause"]))


def to_markdown(rows: list[dict], *, title: str, planned: int, note: str = "",
                errors: Sequence[dict] = ()) -> str:
    """A Markdown report: a heading, the units with a result vs planned, the table (rates over
    finished units; error outcomes in their own columns) and, when ``errors``
    (``error_counts``) is not empty, the errors by outcome and cause."""
    with_row = sum(r["units"] for r in rows)
    finished = sum(r["finished"] for r in rows)
    kinds = "resolved, unresolved or answered" if any(r.get(ANSWERED) for r in rows) else "resolved or unresolved"
    lines = [f"# {title}", "", f"{with_row} of {planned} units ran: {finished} finished ({kinds}), "
             f"{with_row - finished} ended in an error. Rates, means and cost are over finished units; the second "
             "rate counts every unit, an error as unresolved, as SWE-bench's harness does (set that one beside a "
             "swebench.com number).", ""]
    if note:
        lines += [note, ""]
    lines += [
        "| model | agent | level | finished | resolved | resolved rate | resolved rate, errors unresolved "
        "| mean steps | mean input tokens | mean output tokens | cost (USD) | input errors | infrastructure errors "
        "| bugs |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['model']} | {r['agent']} | {r['level']} | {r['finished']} | {r['resolved']} "
            f"| {100 * r['resolved_rate']:.1f}% | {100 * r['resolved_rate_all']:.1f}% | {r['mean_steps']:.1f} "
            f"| {r['mean_input_tokens']:.0f} | {r['mean_output_tokens']:.0f} "
            f"| {r['cost']:.4f} | {r[INPUT_ERROR]} | {r[INFRASTRUCTURE_ERROR]} | {r[BUG]} |"
        )
    if any(r.get(ANSWERED) for r in rows):
        lines += ["", "## Answers (repository questions, SchrodingerRepo RQ3)", "",
                  "| model | agent | level | answered | Average Score (0-100) |", "|---|---|---|---:|---:|"]
        lines += [f"| {r['model']} | {r['agent']} | {r['level']} | {r[ANSWERED]} | {r['mean_score']:.2f} |"
                  for r in rows if r.get(ANSWERED)]
        lines += ["", "Average Score: the judge's five SWE-QA scores (0-10 each) summed and doubled, averaged over "
                      "answered questions; an empty answer scores 0. The judge's prompts and replies are in "
                      "grading/*.judge.json."]
    if errors:
        lines += ["", "## Errors (not in the rates)", "", "| outcome | cause | units | example |", "|---|---|---:|---|"]
        lines += [f"| {e['outcome']} | {e['error_cause']} | {e['units']} | {e['example'].replace('|', '/')} |"
                  for e in errors]
        lines += ["", "infrastructure_error: retried with backoff within the launch, and again by the same "
                      "command; input_error: the instance's, bug: raydist's (traceback in the `error` column); "
                      "neither runs again."]
    return "\n".join(lines) + "\n"


def _hides_names(level: str) -> bool:
    """Whether ``level`` remaps names (L2, alone, composed or in ``full``): only there is a
    shown identity token a leak; elsewhere the exposure count is the level's baseline."""
    return any(part in ("L2", "full") for part in level.split("+"))


def action_mix(table: pa.Table) -> list[dict]:
    """One dict per (model, agent, level) of the units that ran an agent (``actions_*`` not
    null): ``model, agent, level, units``, ``mean_<category>`` (commands per unit, for each
    taxonomy category of §IV RQ2, in ``CATEGORIES`` order), ``leaks`` (the summed
    ``leak_count``: identity tokens shown, §III-F exposure audit), ``memorised`` (summed
    ``memorised_count``: hidden names typed unseen) and ``unmapped`` (summed
    ``unmapped_names``: identity tokens the views left visible). Sorted by model, agent,
    level; ``[]`` when no unit ran."""
    ran = table.filter(pc.is_valid(table.column("actions_submit")))
    if ran.num_rows == 0:
        return []
    grouped = ran.group_by(["model", "agent", "level"]).aggregate(
        [("key", "count"), ("leak_count", "sum"), ("memorised_count", "sum"), ("unmapped_names", "sum"),
         *((f"actions_{c}", "mean") for c in CATEGORIES)]
    )
    out = [
        {"model": r["model"], "agent": r["agent"], "level": r["level"], "units": r["key_count"],
         **{f"mean_{c}": r[f"actions_{c}_mean"] or 0.0 for c in CATEGORIES}, "leaks": int(r["leak_count_sum"] or 0),
         "memorised": int(r["memorised_count_sum"] or 0), "unmapped": int(r["unmapped_names_sum"] or 0)}
        for r in grouped.to_pylist()
    ]
    return sorted(out, key=lambda r: (r["model"], r["agent"], r["level"]))


def action_mix_markdown(rows: list[dict]) -> str:
    """A Markdown section of ``action_mix`` rows (mean commands per category, the exposure
    audit per level) and the audit's verdict: identity tokens shown at levels that remap
    names (L2, ``full``) are leaks and are called out; at the other levels the count is the
    baseline of what the agent sees. ``""`` when there are no rows."""
    if not rows:
        return ""
    lines = ["", "## Actions per unit (§IV RQ2) and exposure audit (§III-F)", "",
             "| model | agent | level | units | " + " | ".join(CATEGORIES) + " | leaks | memorised | unmapped |",
             "|---|---|---|---:|" + "---:|" * len(CATEGORIES) + "---:|---:|---:|"]
    for r in rows:
        means = " | ".join(f"{r[f'mean_{c}']:.1f}" for c in CATEGORIES)
        lines.append(f"| {r['model']} | {r['agent']} | {r['level']} | {r['units']} | {means} | {r['leaks']} | "
                     f"{r.get('memorised', 0)} | {r.get('unmapped', 0)} |")
    hidden = [r for r in rows if _hides_names(r["level"])]
    leaks = sum(r["leaks"] for r in hidden)
    lines.append("")
    if hidden:
        verdict = ("none shown" if leaks == 0 else
                   f"{leaks} shown: see leaked_names in runs.parquet and steps.parquet, and view_meta.audit "
                   "for the names each view left unmapped and why")
        lines.append(f"Exposure audit (§III-F) at levels that remap names: {verdict}; "
                     f"{sum(r.get('memorised', 0) for r in hidden)} hidden names typed by agents before being shown "
                     "(memorised_names).")
    lines.append("At levels that keep names (L0, L1, L3, L4) the leaks column is the baseline: identity tokens "
                 "the agent saw there.")
    return "\n".join(lines) + "\n\n"


def integrity_counts(table: pa.Table) -> list[dict]:
    """One dict per (model, agent, level) with a finished patch unit (``resolved`` or
    ``unresolved``), sorted: ``finished``; ``flagged`` (``integrity_flagged`` true),
    ``unknown`` (null: a row written before the integrity columns existed), ``resolved``;
    ``resolved_rate`` (resolved / finished, the summary's rate) and ``resolved_rate_unflagged``
    (resolved / finished over the units not flagged, unknown ones kept: they cannot be told
    apart; None when every finished unit is flagged); and per category of
    ``INTEGRITY_CATEGORIES`` the units with at least one flag of it. A table without the
    integrity columns reads as every unit unknown."""
    names = set(table.column_names)
    groups: dict[tuple, list[dict]] = {}
    for row in table.select([c for c in ("model", "agent", "level", "outcome", "integrity_flagged",
                                          "integrity_flags") if c in names]).to_pylist():
        if row["outcome"] in FINISHED:
            groups.setdefault((row["model"], row["agent"], row["level"]), []).append(row)
    out = []
    for (model, agent, level), rows in sorted(groups.items()):
        flagged = [r for r in rows if r.get("integrity_flagged") is True]
        kept = [r for r in rows if r.get("integrity_flagged") is not True]
        resolved = sum(r["outcome"] == RESOLVED for r in rows)
        categories = [{f["category"] for f in json.loads(r.get("integrity_flags") or "[]")} for r in flagged]
        out.append({
            "model": model, "agent": agent, "level": level, "finished": len(rows), "flagged": len(flagged),
            "unknown": sum(r.get("integrity_flagged") is None for r in rows), "resolved": resolved,
            "resolved_rate": resolved / len(rows),
            "resolved_rate_unflagged": sum(r["outcome"] == RESOLVED for r in kept) / len(kept) if kept else None,
            **{c: sum(c in found for found in categories) for c in INTEGRITY_CATEGORIES},
        })
    return out


def integrity_markdown(rows: list[dict]) -> str:
    """A Markdown section of ``integrity_counts`` rows: flagged units per model x agent x
    level, the resolved rate with and without them, and the units per category. ``""``
    without rows."""
    if not rows:
        return ""
    lines = ["", "## Integrity flags", "",
             "| model | agent | level | finished | flagged | unknown | resolved rate "
             "| resolved rate, flagged left out | " + " | ".join(INTEGRITY_CATEGORIES) + " |",
             "|---|---|---|---:|---:|---:|---:|---:|" + "---:|" * len(INTEGRITY_CATEGORIES)]
    for r in rows:
        unflagged = "-" if r["resolved_rate_unflagged"] is None else f"{100 * r['resolved_rate_unflagged']:.1f}%"
        lines.append(f"| {r['model']} | {r['agent']} | {r['level']} | {r['finished']} | {r['flagged']} | "
                     f"{r['unknown']} | {100 * r['resolved_rate']:.1f}% | {unflagged} | "
                     + " | ".join(str(r[c]) for c in INTEGRITY_CATEGORIES) + " |")
    lines += ["", "A flagged unit ran a command that an integrity rule matched (raydist/conf/integrity.yaml): "
                  "history beyond the view's HEAD, writes to graded tests or test configuration, a network attempt, "
                  "the project read from outside the view, or grading's files probed; integrity_flags in "
                  "runs.parquet names each step and rule. Category columns count units with at least one such flag. "
                  "Unknown: rows written before raydist recorded flags, kept in both rates."]
    return "\n".join(lines) + "\n\n"
