"""Repository question answering under views (SchrodingerRepo RQ3, SWE-QA): Average Score and
interaction cost per model and level, from the ``runs.parquet`` rows of question units.

Pure Python over the rows ``raydist.analysis.runs.load_runs`` reads. A question unit is a row
with ``task == "qa"``; only ``answered`` units (``raydist.outcomes.SCORED``) enter scores and
means, the error outcomes are counted apart, as in Table I.
"""

from __future__ import annotations

import json
from statistics import fmean, stdev

import pyarrow as pa
import pyarrow.compute as pc

from raydist.analysis.repositories import COST_COLUMNS
from raydist.analysis.runs import BASELINE, level_key
from raydist.outcomes import ERRORS, SCORED
from raydist.qa.judge import DIMENSIONS
from raydist.tasks.swe_qa import QA_TASK


def split_questions(table: pa.Table) -> tuple[pa.Table, pa.Table]:
    """``(patch rows, question rows)`` of a runs table (a table without a ``task`` column, or
    with nulls there, holds patch rows only)."""
    if "task" not in table.column_names:
        return table, table.slice(0, 0)
    is_qa = pc.fill_null(pc.equal(table.column("task"), QA_TASK), False)
    return table.filter(pc.invert(is_qa)), table.filter(is_qa)


def question_table(table: pa.Table) -> list[dict]:
    """One dict per model x agent x level of question rows, sorted by model, agent, ``level_key``.

    ``units``, ``answered``, ``questions`` (distinct instances answered), ``seeds``;
    ``score``: the mean over seeds of each seed's mean Average Score (0-100, SWE-QA's total
    doubled: ``raydist.qa.judge``); ``score_std``: its sample std over seeds (None with one
    seed); ``delta``: ``score - score at L0`` in points (RQ3 reports 70.35 -> 65.71);
    ``<dimension>``: the mean of each of SWE-QA's five scores (0-10); ``mean_steps``,
    ``mean_input_tokens``, ``mean_output_tokens``, ``mean_cost`` with ``<name>_change`` in % of
    L0 (RQ3: actions +18-43%); ``input_error``, ``infrastructure_error``, ``bug`` counted apart.
    A change is None without an L0 row or with an L0 value of 0."""
    cells: dict[tuple, list[dict]] = {}
    columns = ["model", "agent", "level", "seed", "instance_id", "outcome", "qa_score", "qa_scores", *COST_COLUMNS]
    for row in table.select(columns).to_pylist():
        cells.setdefault((row["model"], row["agent"], row["level"]), []).append(row)
    rows = [_cell(model, agent, level, units) for (model, agent, level), units in cells.items()]
    baselines = {(r["model"], r["agent"]): r for r in rows if r["level"] == BASELINE}
    for row in rows:
        base = baselines.get((row["model"], row["agent"]))
        row["delta"] = (row["score"] - base["score"]) if base and None not in (row["score"], base["score"]) else None
        for column in COST_COLUMNS:
            x, x0 = row[f"mean_{column}"], None if base is None else base[f"mean_{column}"]
            row[f"mean_{column}_change"] = 100 * (x - x0) / x0 if x is not None and x0 else None
    return sorted(rows, key=lambda r: (r["model"], r["agent"], level_key(r["level"])))


def _cell(model: str, agent: str, level: str, units: list[dict]) -> dict:
    done = [u for u in units if u["outcome"] in SCORED and u["qa_score"] is not None]
    seeds: dict[int, list[float]] = {}
    for unit in done:
        seeds.setdefault(unit["seed"], []).append(unit["qa_score"])
    per_seed = [fmean(scores) for _, scores in sorted(seeds.items())]
    dims = [json.loads(u["qa_scores"]) for u in done if u["qa_scores"]]
    return {
        "model": model, "agent": agent, "level": level, "units": len(units), "answered": len(done),
        "questions": len({u["instance_id"] for u in done}), "seeds": len(per_seed),
        "score": fmean(per_seed) if per_seed else None,
        "score_std": stdev(per_seed) if len(per_seed) > 1 else None,
        **{d: fmean(s[d] for s in dims) if dims else None for d in DIMENSIONS},
        **{f"mean_{c}": fmean(u[c] or 0 for u in done) if done else None for c in COST_COLUMNS},
        **{outcome: sum(u["outcome"] == outcome for u in units) for outcome in ERRORS},
    }
