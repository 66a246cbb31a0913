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

from raydist.results.budget import Spending
from raydist.results.out_paths import OutPathError, check_out_file
from raydist.results.readers import DamagedTable, RunRows, read_run_rows
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
    """Every readable result row of ``run_dir`` as a ``RUNS_SCHEMA`` table, in key order
    (``raydist.results.readers.read_run_rows``; its damaged row files are left out: use that
    function to name them). Raises ``DamagedTable`` as it does."""
    return read_run_rows(run_dir).table


def report_markdown(run_dirs: Sequence[Path], problems_dirs: Sequence[Path] = ()) -> str:
    """The Markdown summary of ``run_dirs`` together (one table: rows are grouped by model x
    agent x level, so run directories of one sweep combine), then each problems run
    directory's ``summary.md``. "planned" is the number of rows: the plan is not stored; a
    directory whose last launch was stopped by its budget says so and names the units it did
    not start (``budget.json``). Raises ``DamagedTable`` for a damaged or foreign table, and
    ``DamagedRows`` for damaged row files (named and counted, never read as no rows)."""
    return _markdown([read_run_rows(d) for d in run_dirs], run_dirs, problems_dirs)


class DamagedRows(ValueError):
    """Row files of run directories that cannot be read (``damaged``: ``(file, reason)``) named
    and counted in the message; ``markdown`` is the report of the
    readable rows ("" when there are none), which names and counts the damaged files too."""

    def __init__(self, damaged: Sequence[tuple[Path, str]], markdown: str):
        files = [str(file) for file, _ in damaged]
        shown = ", ".join(files[:3]) + (f" and {len(files) - 3} more" if len(files) > 3 else "")
        super().__init__(f"{len(files)} result row file(s) damaged and not counted: {shown} ({damaged[0][1]}); run "
                         "the launch again (the same command) to run their units again")
        self.damaged = tuple(damaged)
        self.markdown = markdown


def _markdown(read: Sequence[RunRows], run_dirs: Sequence[Path], problems_dirs: Sequence[Path]) -> str:
    """``report_markdown`` of rows already read; raises ``DamagedRows`` when some row file is damaged."""
    parts = []
    damaged = [item for rows in read for item in rows.damaged]
    if run_dirs:
        table = pa.concat_tables([rows.table for rows in read])
        title = str(run_dirs[0]) if len(run_dirs) == 1 else f"{len(run_dirs)} run directories"
        if table.num_rows or not damaged:
            parts.append(to_markdown(summarise(table), title=title, planned=table.num_rows,
                                     errors=error_counts(table)) + action_mix_markdown(action_mix(table)))
        if damaged:
            parts.append(f"## Damaged rows\n\n{len(damaged)} result row file(s) could not be read and are in no "
                         "count above; run the launch again to run their units again:\n\n"
                         + "".join(f"- {file}\n" for file, _ in damaged))
        parts += [_spending_markdown(d) for d in run_dirs if _spending_markdown(d)]
    parts += [(d / "summary.md").read_text() for d in problems_dirs]
    text = "\n".join(parts)
    if damaged:
        raise DamagedRows(damaged, text if any(rows.table.num_rows for rows in read) else "")
    return text


def _spending_markdown(run_dir: Path) -> str:
    """The last launch's spending in ``run_dir`` (``budget.json``), headed by the directory; "" if none."""
    spending = Spending.read(run_dir)
    return "" if spending is None else spending.markdown().replace("## Model calls and budget",
                                                                  f"## Model calls and budget: {run_dir}", 1)


def report_main(paths: Sequence[str], output: str | None = None) -> int:
    """Print (and with ``output`` also write) the report of the run directories at or below
    ``paths``. Returns 0; 2 with one line on stderr when ``output`` cannot be written (nothing is
    read); 1 with one line on stderr when no run directory is found, a table is damaged or
    foreign (named), or ``output`` fails while written. Damaged row files are named and counted
    in the report of the readable rows, which is printed, and the status is 1; with no readable
    row only the line is printed."""
    try:
        out = check_out_file(output, "--output") if output else None
    except OutPathError as exc:
        print(f"raydist: error: {exc}", file=sys.stderr)
        return 2
    run_dirs, problems_dirs = find_run_dirs(paths)
    if not run_dirs and not problems_dirs:
        print(f"raydist: error: no run directory (a folder with rows/ or runs.parquet, or a problems run's "
              f"variants.parquet) at or below {' '.join(paths)}", file=sys.stderr)
        return 1
    status = 0
    try:
        text = report_markdown(run_dirs, problems_dirs)
    except DamagedRows as exc:
        text, status = exc.markdown, 1
        print(f"raydist: error: {exc}", file=sys.stderr)
    except DamagedTable as exc:
        print(f"raydist: error: {exc}", file=sys.stderr)
        return 1
    if not text:
        return status
    if out is not None:
        try:
            out.write_text(text)
        except OSError as exc:
            print(f"raydist: error: --output {out}: could not be written ({exc.strerror}); give another file "
                  "path", file=sys.stderr)
            return 1
    print(text, end="")
    return status
