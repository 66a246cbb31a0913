"""``raydist report``: the summary of finished run directories, read back from their rows.

A main-job run directory holds ``rows/<key>.parquet`` (one per finished unit) and, once a
launch compiled them, ``runs.parquet``; the report reads the rows (they are the source of
truth, ``runs.parquet`` only has the units of the last launch's plan). A problems run
directory (``variants.parquet``) already has its full ``summary.md``, which is printed as is.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from raydist.results.budget import Spending
from raydist.results.schema import RUNS_SCHEMA
from raydist.results.summary import action_mix, action_mix_markdown, error_counts, summarise, to_markdown


def is_run_dir(path: Path) -> bool:
    """Whether ``path`` is a main-job run directory (it has a ``rows`` folder or ``runs.parquet``)."""
    return (path / "rows").is_dir() or (path / "runs.parquet").is_file()


def is_problems_run_dir(path: Path) -> bool:
    """Whether ``path`` is a problems run directory (``variants.parquet`` beside ``summary.md``)."""
    return (path / "variants.parquet").is_file() and (path / "summary.md").is_file()


def find_run_dirs(paths: Iterable[str | Path]) -> tuple[list[Path], list[Path]]:
    """``(main-job run dirs, problems run dirs)`` at or below ``paths``, each sorted and without
    repeats. Below a run directory only the run directories of ``--multirun`` jobs are looked
    for, in folders named ``key=value...`` (``raydist._util.run_dirs.job_name``): its own
    folders (rows, trajectories...) hold none."""
    main, problems = set(), set()
    for path in map(Path, paths):
        for folder, subdirs, _ in os.walk(path):
            candidate = Path(folder)
            if is_run_dir(candidate):
                main.add(candidate)
            elif is_problems_run_dir(candidate):
                problems.add(candidate)
            else:
                continue
            subdirs[:] = [name for name in subdirs if "=" in name]
    return sorted(main), sorted(problems)


def read_rows(run_dir: Path) -> pa.Table:
    """Every result row of ``run_dir`` as a ``RUNS_SCHEMA`` table, in key order: the
    ``rows/*.parquet`` files, or ``runs.parquet`` when the folder has no rows. A row file that
    cannot be read is skipped (the launch that resumes runs its unit again)."""
    files = sorted((run_dir / "rows").glob("*.parquet"))
    if not files:
        return pq.read_table(run_dir / "runs.parquet", schema=RUNS_SCHEMA)
    tables = []
    for f in files:
        try:
            tables.append(pq.read_table(f, schema=RUNS_SCHEMA))
        except (OSError, pa.ArrowInvalid):
            continue
    return pa.concat_tables(tables) if tables else RUNS_SCHEMA.empty_table()


def report_markdown(run_dirs: Sequence[Path], problems_dirs: Sequence[Path] = ()) -> str:
    """The Markdown summary of ``run_dirs`` together (one table: rows are grouped by model x
    agent x level, so run directories of one sweep combine), then each problems run
    directory's ``summary.md``. "planned" is the number of rows: the plan is not stored; a
    directory whose last launch was stopped by its budget says so and names the units it did
    not start (``budget.json``)."""
    parts = []
    if run_dirs:
        table = pa.concat_tables([read_rows(d) for d in run_dirs])
        title = str(run_dirs[0]) if len(run_dirs) == 1 else f"{len(run_dirs)} run directories"
        parts.append(to_markdown(summarise(table), title=title, planned=table.num_rows, errors=error_counts(table))
                     + action_mix_markdown(action_mix(table)))
        parts += [_spending_markdown(d) for d in run_dirs if _spending_markdown(d)]
    parts += [(d / "summary.md").read_text() for d in problems_dirs]
    return "\n".join(parts)


def _spending_markdown(run_dir: Path) -> str:
    """The last launch's spending in ``run_dir`` (``budget.json``), headed by the directory; "" if none."""
    spending = Spending.read(run_dir)
    return "" if spending is None else spending.markdown().replace("## Model calls and budget",
                                                                  f"## Model calls and budget: {run_dir}", 1)


def report_main(paths: Sequence[str], output: str | None = None) -> int:
    """Print (and with ``output`` also write) the report of the run directories at or below
    ``paths``. Returns 0, or 1 with a message on stderr when none is found."""
    run_dirs, problems_dirs = find_run_dirs(paths)
    if not run_dirs and not problems_dirs:
        print(f"raydist: error: no run directory (a folder with rows/ or runs.parquet, or a problems run's "
              f"variants.parquet) at or below {' '.join(paths)}", file=sys.stderr)
        return 1
    text = report_markdown(run_dirs, problems_dirs)
    if output:
        Path(output).write_text(text)
    print(text, end="")
    return 0
