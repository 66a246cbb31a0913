"""SWE-bench predictions files of a run: one per (model, agent, level, seed) cell.

The official harness (``swebench eval DATASET -p FILE``, ``swebench.harness.run_evaluation``)
and sb-cli (``sb-cli submit ... --predictions_path FILE``) take a file of predictions
``{"instance_id", "model_name_or_path", "model_patch"}``, one per instance: the harness keys
them by ``instance_id`` (a second one silently replaces the first) and sb-cli refuses
duplicates. So a run that evaluates several views writes one file per cell, never one that
mixes them. Patches of levels other than L0 are already recovered into the original
repository's coordinates (``raydist.views.recover``), so the official harness grades every
file; L0's is what a leaderboard submission needs.

``model_name_or_path`` names the cell and the run (``<model>__<agent>__<level>__s<seed>__<run>``,
``run``: 8 hex digits of the run directory's path): the harness writes its logs under
``logs/run_evaluation/<run_id>/<model_name_or_path>/<instance_id>``, so files of two cells or
two runs evaluated under one ``run_id`` never write into the same folder.
"""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pyarrow as pa

from raydist._util.files import atomic_write_text
from raydist.results.readers import DamagedTable, read_runs_file

PREDS_DIR = "preds"
PRED_KEYS = ("instance_id", "model_name_or_path", "model_patch")
"""The keys of one prediction, as swebench.harness.constants names them (KEY_INSTANCE_ID,
KEY_MODEL, KEY_PREDICTION); nothing else is written."""
_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]+")


class ExportError(ValueError):
    """A run directory that has no rows to export, or rows that break the one-per-instance rule."""


def run_tag(run_dir: Path) -> str:
    """8 hex digits of the resolved path of ``run_dir``: the same for every export of one run,
    different for two run directories."""
    return hashlib.sha256(str(Path(run_dir).resolve()).encode()).hexdigest()[:8]


def cell_name(model: str, agent: str, level: str, seed: int, attempt: int | None = 0) -> str:
    """``<model>__<agent>__<level>__s<seed>`` (and ``__a<attempt>`` after the first attempt)
    with every run of characters other than letters,
    digits and ``._+-`` of each part replaced by ``-`` (a model ``openai/gpt-4o`` gives
    ``openai-gpt-4o``): a file name and a harness log folder name."""
    parts = [_UNSAFE.sub("-", str(p)).strip("-") or "-" for p in (model, agent, level)]
    return "__".join([*parts, f"s{int(seed)}", *([f"a{int(attempt)}"] if attempt else [])])


def predictions_by_cell(table: pa.Table, run_dir: Path) -> dict[str, list[dict]]:
    """``{cell_name: [prediction, ...]}`` of a runs table (``RUNS_SCHEMA`` columns
    ``instance_id, model, agent, level, seed, model_patch``, and ``attempt`` when it has it),
    each list in row order with one
    prediction per instance_id (``PRED_KEYS``; a missing patch is ``""``). A row whose
    ``model`` is ``-`` (a scripted agent) is named after its agent. Raises ``ExportError``
    when a cell holds an instance twice (two rows of one unit: a broken runs table)."""
    tag = run_tag(run_dir)
    cells: dict[str, dict[str, dict]] = {}
    columns = ["instance_id", "model", "agent", "level", "seed", "model_patch"]
    columns += ["attempt"] if "attempt" in table.column_names else []
    for batch in table.select(columns).to_batches(max_chunksize=1024):
        for r in batch.to_pylist():
            model = r["model"] if r["model"] != "-" else r["agent"]
            name = cell_name(model, r["agent"], r["level"], r["seed"], r.get("attempt"))
            cell = cells.setdefault(name, {})
            if r["instance_id"] in cell:
                raise ExportError(f"{run_dir}: instance {r['instance_id']!r} appears twice in cell {name} of "
                                  "runs.parquet; run the launch again to rebuild its tables")
            cell[r["instance_id"]] = {"instance_id": r["instance_id"], "model_name_or_path": f"{name}__{tag}",
                                      "model_patch": r["model_patch"] or ""}
    return {name: list(cell.values()) for name, cell in cells.items()}


def write_predictions(table: pa.Table, run_dir: Path, out_dir: Path | None = None) -> list[tuple[Path, int]]:
    """Write ``<out_dir>/<cell_name>.jsonl`` for every cell of ``table`` (``predictions_by_cell``;
    ``out_dir`` defaults to ``<run_dir>/preds``), each file atomically. Returns
    ``[(path, predictions), ...]`` sorted by path."""
    folder = Path(out_dir) if out_dir is not None else Path(run_dir) / PREDS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, preds in sorted(predictions_by_cell(table, run_dir).items()):
        path = folder / f"{name}.jsonl"
        atomic_write_text(path, "".join(json.dumps(p) + "\n" for p in preds))
        written.append((path, len(preds)))
    return written


def export_swebench(run_dir: Path, out_dir: Path | None = None) -> list[tuple[Path, int]]:
    """``raydist export swebench RUN_DIR``: the predictions files of an existing run, from its
    ``runs.parquet`` (``write_predictions``). Raises ``ExportError`` naming the folder when it
    has no ``runs.parquet`` (not a finished main-job run directory), and naming the file and
    what is wrong when it is cut short or foreign (``raydist.results.readers.read_runs_file``);
    nothing is written then. Raises ``ExportError`` naming the folder when a file cannot be
    written there."""
    runs = Path(run_dir) / "runs.parquet"
    if not runs.is_file():
        raise ExportError(f"{run_dir}: no runs.parquet; give the run directory "
                          "of a main-job launch (output_root/<benchmark>/<agent>/<model>/<levels>__<seeds>), "
                          "or run its launch again to write the tables")
    try:
        table = read_runs_file(runs)
    except DamagedTable as exc:
        raise ExportError(str(exc)) from None
    try:
        return write_predictions(table, Path(run_dir), out_dir)
    except OSError as exc:
        folder = f"--out {out_dir}" if out_dir is not None else str(Path(run_dir) / PREDS_DIR)
        raise ExportError(f"{folder}: the predictions could not be written there ({exc.strerror or exc}); give "
                          "another folder with --out") from None
