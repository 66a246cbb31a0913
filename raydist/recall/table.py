"""The probe's tables: ``recall.parquet`` (one row per instance x round, with the instance's
leakage level on each of its rows) and the shares of each level per model (``summary.json``,
``summary.md``)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pyarrow as pa

from raydist._util.files import (
    atomic_write_json,
    atomic_write_parquet,
    atomic_write_text,
)
from raydist.recall.score import LEVELS, NO_ANSWER, level_rank

__all__ = ["RECALL_SCHEMA", "TABLE_NAME", "instance_levels", "summarise", "summary_markdown", "write_tables"]

TABLE_NAME = "recall.parquet"

_SHARES = ("file_recall", "symbol_recall", "repair_recall", "line_overlap", "test_recall", "test_line_overlap")
_COUNTS = ("files_gold", "symbols_gold", "repair_gold", "lines_gold", "tests_gold")
_NAMES = ("revealed", "answer_files", "answer_symbols", "answer_tests")

RECALL_SCHEMA = pa.schema(
    [pa.field("instance_id", pa.string()), pa.field("repo", pa.string()), pa.field("model", pa.string()),
     pa.field("round", pa.string()), pa.field("round_index", pa.int32()), pa.field("answered", pa.bool_()),
     pa.field("level", pa.string()), pa.field("instance_level", pa.string()), pa.field("reply_chars", pa.int64())]
    + [pa.field(name, pa.float64()) for base in _SHARES for name in (base, f"{base}_beyond")]
    + [pa.field(name, pa.int32()) for name in _COUNTS]
    + [pa.field(name, pa.list_(pa.string())) for name in _NAMES]
    + [pa.field("repair_logic", pa.string()), pa.field("patch", pa.string())]
)
"""``level``: the round's level (``raydist.recall.score.LEVELS`` or ``no_answer``);
``instance_level``: the highest over the instance's rounds (``no_answer`` when none parsed);
the ``*_beyond`` shares leave out what the round revealed (null: nothing left to recall); the
answer's fields are null for a round without an answer."""


def instance_levels(rows) -> dict[tuple[str, str], str]:
    """``{(model, instance_id): level}``: the highest level over the instance's rounds, or
    ``NO_ANSWER`` when none of them got a reply that parses."""
    levels: dict[tuple[str, str], str] = {}
    for row in rows:
        key = (row["model"], row["instance_id"])
        if key not in levels or level_rank(row["level"]) > level_rank(levels[key]):
            levels[key] = row["level"]
    return levels


def summarise(rows, failed: dict | None = None) -> list[dict]:
    """Per model: ``instances`` probed, ``answered`` (at least one round parsed), ``no_answer``,
    ``failed`` (a model call failed: not probed to the end), ``counts`` and ``shares`` of each
    level among the answered instances (0.0 with none)."""
    by_model: dict[str, Counter] = {}
    for (model, _), level in instance_levels(rows).items():
        by_model.setdefault(model, Counter())[level] += 1
    summaries = []
    for model, counts in sorted(by_model.items()):
        answered = sum(counts[level] for level in LEVELS)
        summaries.append({
            "model": model, "instances": answered + counts[NO_ANSWER], "answered": answered,
            "no_answer": counts[NO_ANSWER], "failed": len(failed or {}),
            "counts": {level: counts[level] for level in LEVELS},
            "shares": {level: (counts[level] / answered if answered else 0.0) for level in LEVELS},
        })
    return summaries


def summary_markdown(summaries: list[dict], failed: dict | None = None) -> str:
    """The shares table, one line per model, and the instances whose calls failed."""
    lines = ["# Recall probe", "", "Leakage level per instance: the highest over its rounds (raydist.recall.score).",
             "", "| model | instances | no answer | " + " | ".join(LEVELS) + " |",
             "|---|---:|---:|" + "---:|" * len(LEVELS)]
    for s in summaries:
        cells = " | ".join(f"{s['counts'][level]} ({s['shares'][level]:.0%})" for level in LEVELS)
        lines.append(f"| {s['model']} | {s['instances']} | {s['no_answer']} | {cells} |")
    if failed:
        lines += ["", f"{len(failed)} instance(s) with a failed model call (run the same command again):", ""]
        lines += [f"- {instance_id}: {error}" for instance_id, error in sorted(failed.items())]
    return "\n".join(lines) + "\n"


def _table_row(row: dict, level: str) -> dict:
    return {f.name: row.get(f.name) for f in RECALL_SCHEMA} | {"instance_level": level}


def write_tables(rows, run_dir: str | Path, failed: dict | None = None) -> list[dict]:
    """Write ``recall.parquet``, ``summary.json`` and ``summary.md`` into ``run_dir``; returns
    the summaries (``summarise``)."""
    run_dir = Path(run_dir)
    levels = instance_levels(rows)
    table = pa.Table.from_pylist([_table_row(r, levels[(r["model"], r["instance_id"])]) for r in rows],
                                 schema=RECALL_SCHEMA)
    atomic_write_parquet(run_dir / TABLE_NAME, table)
    summaries = summarise(rows, failed)
    atomic_write_json(run_dir / "summary.json", {"models": summaries, "failed": failed or {}}, indent=2)
    atomic_write_text(run_dir / "summary.md", summary_markdown(summaries, failed))
    return summaries

