"""Reading a run directory's result tables back, refusing damaged or foreign files by name.

A row file or ``runs.parquet`` that is cut short, is no Parquet, or is Parquet of another
schema is never read as empty or as rows of nulls: ``read_runs_file`` raises ``DamagedTable``
naming the file and what is wrong with it, and ``read_run_rows`` returns the damaged row files
beside the readable rows so that a report can name and count them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from raydist.results.schema import RUNS_SCHEMA, conform_table

#: What to do about a damaged runs table or row file, said once in every message.
_REMEDY = "run its launch again (the same command) to rewrite it, or leave the run directory out"


class DamagedTable(ValueError):
    """A result table that cannot be read as ``RUNS_SCHEMA`` rows: ``path`` and ``reason`` (what
    is wrong with it); the message names both and what to do."""

    def __init__(self, path: Path, reason: str, remedy: str = _REMEDY):
        super().__init__(f"{path}: {reason}; {remedy}")
        self.path, self.reason = Path(path), reason


def read_runs_file(path: Path) -> pa.Table:
    """The rows of ``path`` (a ``rows/<key>.parquet`` file or a ``runs.parquet``) as a
    ``RUNS_SCHEMA`` table (``conform_table``: columns it lacks are null).

    Raises ``DamagedTable`` naming ``path`` when it is missing, is not a whole Parquet file (cut
    short, or another format), lacks a required column of ``RUNS_SCHEMA`` (named; a foreign
    table), has a column the schema lacks, or a column of a type that does not cast."""
    try:
        with pq.ParquetFile(path) as handle:
            table = handle.read()
    except FileNotFoundError:
        raise DamagedTable(path, "no such file") from None
    except (OSError, pa.ArrowException) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise DamagedTable(path, f"not a whole Parquet file, cut short or of another format ({reason})") from None
    required = [f.name for f in RUNS_SCHEMA if not f.nullable]
    lacking = [name for name in required if name not in table.column_names]
    if lacking:
        raise DamagedTable(path, f"not a raydist result table: it lacks required column(s) {', '.join(lacking)} "
                                 f"(it has {', '.join(table.column_names) or 'no column'})")
    try:
        return conform_table(table, RUNS_SCHEMA, str(path))
    except (ValueError, pa.ArrowException) as exc:
        raise DamagedTable(path, f"not a raydist result table: {str(exc).splitlines()[0]}") from None


@dataclass(frozen=True)
class RunRows:
    """The result rows of one run directory: ``table`` (``RUNS_SCHEMA``, the readable rows in
    key order) and ``damaged`` (``(file, reason)`` of each row file that could not be read,
    sorted by file; its unit is in no table)."""

    table: pa.Table
    damaged: tuple[tuple[Path, str], ...]


def read_run_rows(run_dir: Path) -> RunRows:
    """Every result row of ``run_dir``: its ``rows/*.parquet`` files (the source of truth), or
    its ``runs.parquet`` when ``rows/`` holds none. A damaged row file is returned in
    ``damaged``, never dropped in silence.

    Raises ``DamagedTable`` naming the file when ``runs.parquet`` is read and is damaged or
    foreign, and naming ``run_dir`` when it has neither row files nor ``runs.parquet`` (a launch
    that finished no unit)."""
    files = sorted((run_dir / "rows").glob("*.parquet"))
    if not files:
        if not (run_dir / "runs.parquet").exists():
            raise DamagedTable(run_dir, "no result rows (rows/ holds no .parquet file and there is no "
                               "runs.parquet): its launch finished no unit", "run it again")
        return RunRows(read_runs_file(run_dir / "runs.parquet"), ())
    tables, damaged = [], []
    for file in files:
        try:
            tables.append(read_runs_file(file))
        except DamagedTable as exc:
            damaged.append((file, exc.reason))
    table = pa.concat_tables(tables) if tables else RUNS_SCHEMA.empty_table()
    return RunRows(table, tuple(damaged))
