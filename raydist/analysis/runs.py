"""The rows of SchrodingerRepo's analysis stage (§V): every ``runs.parquet`` of launched run
directories in one table, what is missing from them, and the rows grouped as the tables and
tests read them (``raydist.analysis.repositories``: Table I, Figure 3, the case study;
``raydist.analysis.significance``: paired tests and verdict stability).

A *system* is a ``(model, agent)`` pair: two agents on one model never share a cell. Only
finished units (``resolved`` or ``unresolved``, ``raydist.outcomes.FINISHED``) enter rates and
means; the units that ended in an error are counted apart, per outcome (``ERRORS``).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from pathlib import Path
from statistics import fmean

import pyarrow as pa
import pyarrow.parquet as pq

from raydist.outcomes import FINISHED, OUTCOMES, RESOLVED
from raydist.results.report import find_run_dirs
from raydist.results.schema import RUNS_SCHEMA
from raydist.results.summary import CATEGORIES as ACTION_COLUMNS
from raydist.views.levels import ALIASES  # the level registry; imported once, on first sort

BASELINE = "L0"
REQUIRED_COLUMNS = ("key", "instance_id", "model", "agent", "level", "seed", "resolved", "outcome", "steps",
                    "input_tokens", "output_tokens", "cost", *(f"actions_{c}" for c in ACTION_COLUMNS),
                    "model_patch")
OPTIONAL_COLUMNS = ("task", "qa_score", "qa_scores", "attempt", "integrity_flags", "integrity_flagged",
                    "naming_contract", "contract_used")
"""Columns of repository questions (``raydist.analysis.questions``), the unit's attempt
(``raydist.analysis.attempts``), its integrity flags and its instance's naming contract
(``raydist.analysis.contracts``), null in files written before raydist had them (every row of
such a file is a patch task, and its view's only attempt: 0; its integrity is unknown, not
unflagged)."""
_SCHEMA = pa.schema([RUNS_SCHEMA.field(name) for name in (*REQUIRED_COLUMNS, *OPTIONAL_COLUMNS)])


def load_runs(paths: Iterable[str | Path]) -> pa.Table:
    """The rows of every ``runs.parquet`` at or below ``paths`` (run directories, folders above
    them such as a ``--multirun`` sweep, searched recursively as ``raydist report`` does, or
    ``runs.parquet`` files), one table: the ``REQUIRED_COLUMNS`` (``RUNS_SCHEMA`` types; the
    large ``trajectory`` is not read) and ``run_dir`` (the folder a row came from). A run
    directory without ``runs.parquet`` is left out: ``unfinished_run_dirs`` names it.

    Raises ValueError naming the path and what to do when a path does not exist, no
    ``runs.parquet`` is found, a file is no readable Parquet, lacks a required column or has
    an outcome outside ``raydist.outcomes.OUTCOMES``, or one unit (``key``) is in two run
    directories (its rows would count twice)."""
    folders = [Path(p) for p in paths]
    files = _runs_files(folders)
    if not files:
        raise ValueError(f"no runs.parquet at or below {' '.join(map(str, paths)) or '(no path given)'}: give run "
                         "directories of finished launches, or the folder above them; a run directory whose launch "
                         "was stopped has rows/ but no runs.parquet until the launch is run again")
    table = pa.concat_tables([_read_runs(f) for f in files])
    _refuse_repeated_units(table)
    return table


def _runs_files(paths: list[Path]) -> list[Path]:
    files = set()
    for path in paths:
        if not path.exists():
            raise ValueError(f"{path}: no such file or folder; give run directories or the folder above them")
        if path.is_file():
            files.add(path.resolve())
            continue
        run_dirs, _ = find_run_dirs([path])
        files.update((d / "runs.parquet").resolve() for d in run_dirs if (d / "runs.parquet").is_file())
    return sorted(files)


def _read_runs(file: Path) -> pa.Table:
    try:
        names = pq.read_schema(file).names
        lacking = [c for c in REQUIRED_COLUMNS if c not in names]
        if lacking:
            raise ValueError(f"{file} lacks column(s) {', '.join(lacking)}, which the repository analysis reads: it "
                             "is no runs.parquet of this raydist; run its launch again to rewrite it, or leave it out")
        present = [c for c in OPTIONAL_COLUMNS if c in names]
        table = pq.read_table(file, columns=[*REQUIRED_COLUMNS, *present])
        for column in OPTIONAL_COLUMNS:
            if column not in present:
                table = table.append_column(column, pa.nulls(table.num_rows, RUNS_SCHEMA.field(column).type))
        table = table.select(list(_SCHEMA.names)).cast(_SCHEMA)
    except (OSError, pa.ArrowException) as exc:
        raise ValueError(f"{file}: not a readable runs.parquet ({type(exc).__name__}: {exc}); run its launch again "
                         "to rewrite it, or leave it out") from exc
    unknown = sorted(set(table.column("outcome").to_pylist()) - set(OUTCOMES), key=str)
    if unknown:
        raise ValueError(f"{file}: outcome {unknown[0]!r} is none of {', '.join(OUTCOMES)}; its rows cannot be "
                         "counted: run its launch again to rewrite them, or leave it out")
    return table.append_column("run_dir", pa.array([str(file.parent)] * table.num_rows, pa.string()))


def _refuse_repeated_units(table: pa.Table) -> None:
    seen: dict[str, str] = {}
    for key, run_dir in zip(table.column("key").to_pylist(), table.column("run_dir").to_pylist(), strict=True):
        if seen.setdefault(key, run_dir) != run_dir:
            raise ValueError(f"unit {key} is in both {seen[key]} and {run_dir}: give only one of the two run "
                             "directories, or the unit counts twice")


def unfinished_run_dirs(paths: Iterable[str | Path]) -> list[Path]:
    """The run directories at or below ``paths`` that have no ``runs.parquet`` (a launch that
    was stopped before it compiled its rows: ``rows/`` only), sorted; ``load_runs`` leaves
    them out. Run the launch again to compile them."""
    run_dirs, _ = find_run_dirs([Path(p) for p in paths])
    return [d for d in run_dirs if not (d / "runs.parquet").is_file()]


def short_cells(table: pa.Table) -> list[dict]:
    """The cells (model x agent x level x seed x attempt, those with at least one row) that have
    fewer finished instances than the system (model x agent) has instances in all its rows: one
    dict each with ``model, agent, level, seed, attempt``, ``instances`` (the system's), ``finished`` (the
    cell's), ``errors`` (units of the cell that ended in an error) and ``missing`` (the
    instance ids without a finished unit, sorted). Sorted by model, agent, level, seed.

    A cell with no row at all is not guessed: levels may be run with different seeds (L0
    once, the transformed levels three times, §V-C)."""
    seen: dict[tuple, set] = {}
    cells: dict[tuple, tuple[set, list]] = {}
    for row in table.select(["instance_id", "model", "agent", "level", "seed", "attempt", "outcome"]).to_pylist():
        seen.setdefault((row["model"], row["agent"]), set()).add(row["instance_id"])
        done, errors = cells.setdefault((row["model"], row["agent"], row["level"], row["seed"], row["attempt"] or 0),
                                        (set(), []))
        if row["outcome"] in FINISHED:
            done.add(row["instance_id"])
        else:
            errors.append(row["instance_id"])
    out = []
    for (model, agent, level, seed, attempt), (done, errors) in cells.items():
        expected = seen[(model, agent)]
        if len(done) < len(expected):
            out.append({"model": model, "agent": agent, "level": level, "seed": seed, "attempt": attempt,
                        "instances": len(expected), "finished": len(done), "errors": len(errors),
                        "missing": sorted(expected - done)})
    return sorted(out, key=lambda r: (r["model"], r["agent"], level_key(r["level"]), r["seed"], r["attempt"]))


# --- grouping ------------------------------------------------------------------------------


@functools.cache
def _aliases() -> dict:
    return ALIASES


def level_key(level: str) -> tuple[bool, int, str]:
    """Sort key of a level name: L0 first, then by the number of levels composed (``L1+L3``:
    2, ``full``: 4), then by name. The last level in this order is the "highest" one."""
    parts = [n for part in level.split("+") for n in _aliases().get(part.strip(), (part.strip(),))]
    return level != BASELINE, len(parts), level


def finished_units(table: pa.Table) -> dict[tuple[str, str], dict[str, dict[str, list[dict]]]]:
    """The finished units of ``table`` as ``{(model, agent): {level: {instance_id: [row, ...]}}}``,
    rows (dicts of ``REQUIRED_COLUMNS``) in seed order; systems, levels and instances sorted
    (levels by ``level_key``)."""
    nested: dict = {}
    for row in sorted(table.select(list(REQUIRED_COLUMNS)).to_pylist(), key=lambda r: r["seed"]):
        if row["outcome"] in FINISHED:
            by_level = nested.setdefault((row["model"], row["agent"]), {})
            by_level.setdefault(row["level"], {}).setdefault(row["instance_id"], []).append(row)
    return {system: {level: dict(sorted(by_level[level].items())) for level in sorted(by_level, key=level_key)}
            for system, by_level in sorted(nested.items())}


def resolved_share(rows: list[dict]) -> float:
    """The share of ``rows`` (finished units of one instance at one level) that resolved it."""
    return fmean(row["outcome"] == RESOLVED for row in rows)


def paired_instances(by_level: dict[str, dict[str, list]], level: str) -> list[str]:
    """The instances (sorted) with a finished unit both at ``BASELINE`` and at ``level``."""
    return sorted(set(by_level.get(BASELINE, {})) & set(by_level.get(level, {})))


def levels_against_baseline(table: pa.Table):
    """Yield ``(model, agent, level, by_level, instances)`` for every level other than
    ``BASELINE`` of every system that has an instance finished at both (``instances``: those,
    sorted; ``by_level``: the system's ``finished_units`` entry), in ``finished_units`` order."""
    for (model, agent), by_level in finished_units(table).items():
        for level in by_level:
            instances = paired_instances(by_level, level)
            if level != BASELINE and instances:
                yield model, agent, level, by_level, instances
