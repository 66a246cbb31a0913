"""The run summary: resolved rate per model x agent x level, with mean steps and tokens, then
the action mix and the leak audit.

Metrics follow SchrodingerRepo §V-B: Pass@1 (here the resolved rate of single runs,
averaged over views and seeds), average actions (steps), average input and output tokens.
The action mix is §IV RQ2's taxonomy; the leak count is §III-F's audit.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from raydist.results.schema import RUNS_SCHEMA

# The action taxonomy's categories in the schema's column order (§IV RQ2's navigate, search, read,
# probe, edit, test, then submit, other), so the results package needs no agent imports.
CATEGORIES = tuple(f.name.removeprefix("actions_") for f in RUNS_SCHEMA if f.name.startswith("actions_"))


def summarise(table: pa.Table) -> list[dict]:
    """One dict per (model, agent, level): ``units, resolved, resolved_rate, mean_steps,
    mean_input_tokens, mean_output_tokens, cost, errors``, sorted by model, agent, level."""
    if table.num_rows == 0:
        return []
    errors = pa.array([e is not None for e in table.column("error").to_pylist()])
    t = table.append_column("has_error", errors)
    grouped = t.group_by(["model", "agent", "level"]).aggregate(
        [
            ("key", "count"),
            ("resolved", "sum"),
            ("steps", "mean"),
            ("input_tokens", "mean"),
            ("output_tokens", "mean"),
            ("cost", "sum"),
            ("has_error", "sum"),
        ]
    )
    out = []
    for r in grouped.to_pylist():
        units = r["key_count"]
        resolved = int(r["resolved_sum"] or 0)
        out.append(
            {
                "model": r["model"],
                "agent": r["agent"],
                "level": r["level"],
                "units": units,
                "resolved": resolved,
                "resolved_rate": resolved / units if units else 0.0,
                "mean_steps": r["steps_mean"] or 0.0,
                "mean_input_tokens": r["input_tokens_mean"] or 0.0,
                "mean_output_tokens": r["output_tokens_mean"] or 0.0,
                "cost": r["cost_sum"] or 0.0,
                "errors": int(r["has_error_sum"] or 0),
            }
        )
    return sorted(out, key=lambda r: (r["model"], r["agent"], r["level"]))


def to_markdown(rows: list[dict], *, title: str, planned: int, note: str = "") -> str:
    """A Markdown report: a heading, the count of finished vs planned units, and the table."""
    finished = sum(r["units"] for r in rows)
    lines = [f"# {title}", "", f"{finished} of {planned} units finished.", ""]
    if note:
        lines += [note, ""]
    lines += [
        "| model | agent | level | units | resolved | resolved rate | mean steps "
        "| mean input tokens | mean output tokens | cost (USD) | errors |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['model']} | {r['agent']} | {r['level']} | {r['units']} | {r['resolved']} "
            f"| {100 * r['resolved_rate']:.1f}% | {r['mean_steps']:.1f} "
            f"| {r['mean_input_tokens']:.0f} | {r['mean_output_tokens']:.0f} "
            f"| {r['cost']:.4f} | {r['errors']} |"
        )
    return "\n".join(lines) + "\n"


def action_mix(table: pa.Table) -> list[dict]:
    """One dict per (model, agent, level) of the units that ran an agent (``actions_*`` not
    null): ``model, agent, level, units``, ``mean_<category>`` (commands per unit, for each
    taxonomy category of §IV RQ2, in ``CATEGORIES`` order) and ``leaks`` (the summed
    ``leak_count``, §III-F). Sorted by model, agent, level; ``[]`` when no unit ran."""
    ran = table.filter(pc.is_valid(table.column("actions_submit")))
    if ran.num_rows == 0:
        return []
    grouped = ran.group_by(["model", "agent", "level"]).aggregate(
        [("key", "count"), ("leak_count", "sum"), *((f"actions_{c}", "mean") for c in CATEGORIES)]
    )
    out = [
        {"model": r["model"], "agent": r["agent"], "level": r["level"], "units": r["key_count"],
         **{f"mean_{c}": r[f"actions_{c}_mean"] or 0.0 for c in CATEGORIES}, "leaks": int(r["leak_count_sum"] or 0)}
        for r in grouped.to_pylist()
    ]
    return sorted(out, key=lambda r: (r["model"], r["agent"], r["level"]))


def action_mix_markdown(rows: list[dict]) -> str:
    """A Markdown section of ``action_mix`` rows (mean commands per category) and the total
    leak count; ``""`` when there are no rows."""
    if not rows:
        return ""
    leaks = sum(r["leaks"] for r in rows)
    lines = ["", "## Actions per unit (§IV RQ2)", "",
             "| model | agent | level | units | " + " | ".join(CATEGORIES) + " | leaks |",
             "|---|---|---|---:|" + "---:|" * len(CATEGORIES) + "---:|"]
    for r in rows:
        means = " | ".join(f"{r[f'mean_{c}']:.1f}" for c in CATEGORIES)
        lines.append(f"| {r['model']} | {r['agent']} | {r['level']} | {r['units']} | {means} | {r['leaks']} |")
    lines += ["", f"Leak audit (§III-F): {leaks} original repository names shown to the agent"
                  f"{'' if leaks == 0 else ', should be 0: see leak_count in steps.parquet'}.", ""]
    return "\n".join(lines) + "\n"
