"""Durable result rows and the tables compiled from them.

Each finished unit's row is written at once as ``rows/<key>.parquet`` through a uniquely
named temporary file and an atomic rename (every file here is written that way), so a driver
killed at any moment leaves either the whole row or nothing; one file per key means a re-run can
never duplicate a row. The unit's step records travel in the row dict under ``step_records`` and
go to ``steps/<key>.parquet`` the same way, before the row, so a row on disk always has its
steps beside it; so do its files (``files``: trajectory and grading log, sent back from
whichever node ran the unit, so the run directory on the driver is complete). ``compile``
gathers the rows of a plan into ``runs.parquet``, ``steps.parquet`` and ``preds/`` (SWE-bench
predictions).
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterable, Mapping
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from raydist._util.files import atomic_write_parquet, atomic_write_text, temporary_beside
from raydist._util.storage import push
from raydist.outcomes import OUTCOMES, retryable
from raydist.results.export import PREDS_DIR, write_predictions
from raydist.results.schema import RUNS_SCHEMA, STEPS_SCHEMA, conform_table, normalise_row, step_rows, table_from_rows

#: Rows ``ResultStore.compile`` holds as one-row tables before combining them (see ``_row_tables``).
COMBINE_ROWS = 256

#: Folders of the run directory that hold the units' files (``raydist.cluster.outputs``).
FILE_FOLDERS = ("trajectories", "grading")


class ResultStore:
    """The result rows of one run directory.

    ``run_dir`` layout: ``rows/<key>.parquet`` (one per finished unit), ``steps/<key>.parquet``
    (its executed commands, when it ran any), ``trajectories/`` and ``grading/`` (the units'
    files, ``FILE_FOLDERS``), ``runs.parquet``, ``steps.parquet``, ``preds/``,
    ``summary.md``. ``mirror`` (a ``raydist._util.storage.Storage``, the run directory's place
    under ``storage=``): each row's files are copied there once written (``write_row``); the
    rest is the launch's to copy (``raydist._util.storage.mirrored``).
    """

    def __init__(self, run_dir: str | Path, mirror=None):
        self.run_dir = Path(run_dir)
        self.mirror = mirror
        self.rows_dir = self.run_dir / "rows"
        self.steps_dir = self.run_dir / "steps"
        self.trajectories_dir = self.run_dir / "trajectories"
        for folder in (self.rows_dir, self.steps_dir, *(self.run_dir / f for f in FILE_FOLDERS)):
            folder.mkdir(parents=True, exist_ok=True)

    def row_path(self, key: str) -> Path:
        return self.rows_dir / f"{key}.parquet"

    def steps_path(self, key: str) -> Path:
        return self.steps_dir / f"{key}.parquet"

    def read_row(self, key: str) -> dict | None:
        """The stored row of unit ``key``, or None. A row file that cannot be read (a disk
        that filled up mid-write before the rename cannot produce one, but a damaged disk
        can) counts as absent so the unit runs again."""
        path = self.row_path(key)
        if not path.exists():
            return None
        try:
            return pq.read_table(path).to_pylist()[0]
        except Exception:
            return None

    def read_steps(self, key: str) -> list[dict] | None:
        """The stored ``STEPS_SCHEMA`` rows of unit ``key`` in step order (``[]`` when it ran no
        command), or None when its steps file cannot be read."""
        path = self.steps_path(key)
        if not path.exists():
            return []
        try:
            return pq.read_table(path).to_pylist()
        except Exception:
            return None

    def finished_keys(self, keys: Iterable[str], *, retry_errors: bool) -> set[str]:
        """Keys among ``keys`` that need no run: a row with an ``outcome`` exists, its steps
        file (if any) is a whole Parquet file (its footer reads) and, with ``retry_errors``,
        its outcome is not an ``infrastructure_error`` (``raydist.outcomes.retryable``). Input
        errors and bugs stay: rerunning would fail the same way.

        Linear in ``keys`` and cheap per key: the folders are listed once, and of each row only
        its ``outcome`` column is read (``read_outcome``)."""
        rows, steps = _stems(self.rows_dir), _stems(self.steps_dir)
        done = set()
        for key in keys:
            if key not in rows:
                continue
            outcome = self.read_outcome(key)
            if outcome not in OUTCOMES or (key in steps and not _whole_parquet(self.steps_path(key))):
                continue
            if retry_errors and retryable(outcome):
                continue
            done.add(key)
        return done

    def read_outcome(self, key: str) -> str | None:
        """The ``outcome`` of unit ``key``'s stored row: None when it has no row, or one that
        cannot be read or has no such column (the unit runs again)."""
        try:
            with pq.ParquetFile(self.row_path(key)) as handle:
                table = handle.read(columns=["outcome"])
        except _UNREADABLE:
            return None
        if "outcome" not in table.column_names or not table.num_rows:
            return None
        return table.column("outcome")[0].as_py()

    def write_row(self, row: Mapping) -> Path:
        """Write one unit's row durably (fsync, then atomic rename). Returns its path.

        ``row["files"]`` (optional: ``{"<folder>/<name>": text}``, a folder of
        ``FILE_FOLDERS``) is written first, each file atomically; the ``trajectory`` column
        becomes the path of the file written to ``trajectories/``. Then
        ``row["step_records"]`` (optional: ``ViewEnvironment.steps`` dicts) as the unit's
        steps file; a row without step records removes a steps file left by an earlier
        attempt of the unit, so the steps on disk are always the row's own.

        With a ``mirror``, the unit's files, steps and row are then copied there, in that order.

        Raises ``OSError`` (e.g. ENOSPC for a full disk, a storage that cannot be written) with
        the path in the message; the rows already written are untouched. Raises ``KeyError``
        naming a missing field or a key that is no column of the row (``normalise_row``),
        ``ValueError`` naming a key of a step record that is no column of ``steps.parquet`` or a
        required one it lacks (``table_from_rows``), ``ValueError`` naming a file path outside
        ``FILE_FOLDERS``; nothing is written then."""
        files = {self._file_path(name): text for name, text in (row.get("files") or {}).items()}
        trajectory = [str(path) for path in files if path.parent == self.trajectories_dir]
        if trajectory:
            row = {**row, "trajectory": trajectory[0]}
        table = table_from_rows([normalise_row(row)], RUNS_SCHEMA, "runs.parquet")
        steps = step_rows(row, row.get("step_records") or ())
        steps_table = table_from_rows(steps, STEPS_SCHEMA, "steps.parquet") if steps else None
        for path, text in files.items():
            try:
                atomic_write_text(path, text)
            except OSError as exc:
                raise OSError(exc.errno, f"could not write unit file {path}: {exc.strerror}") from exc
        if steps_table is not None:
            _durable_write(steps_table, self.steps_path(row["key"]), "steps")
        else:
            self.steps_path(row["key"]).unlink(missing_ok=True)
        written = _durable_write(table, self.row_path(row["key"]), "result row")
        if self.mirror is not None:
            self._copy_to_mirror(row["key"], files)
        return written

    def _copy_to_mirror(self, key: str, files) -> None:
        """Copy unit ``key``'s files (steps before row, as on disk) to ``self.mirror``; a steps
        file of an earlier attempt is removed there as here. Raises ``OSError`` naming the file."""
        steps = self.steps_path(key)
        if not steps.exists():
            self.mirror.delete(steps.relative_to(self.run_dir).as_posix())
        push(self.run_dir, self.mirror, [*files, *([steps] if steps.exists() else []), self.row_path(key)])

    def _file_path(self, name: str) -> Path:
        """Where the unit file ``<folder>/<name>`` goes; ``ValueError`` unless the folder is one
        of ``FILE_FOLDERS`` and the name a plain file name (the names come from another
        process and must never steer a write elsewhere)."""
        folder, _, base = name.partition("/")
        if folder not in FILE_FOLDERS or not base or "/" in base or base.startswith(".") or "\0" in base:
            raise ValueError(f"unit file {name!r} is not <folder>/<file name> with a folder of "
                             f"{', '.join(FILE_FOLDERS)}")
        return self.run_dir / folder / base

    def compile(self, keys: Iterable[str]) -> pa.Table:
        """Write ``runs.parquet`` (one row per finished unit among ``keys``, in plan order),
        ``steps.parquet`` (their executed commands, ``STEPS_SCHEMA``, in plan then step
        order; an unreadable steps file contributes none) and
        ``preds/<model>__<agent>__<level>__s<seed>.jsonl``: one SWE-bench predictions file per
        cell with one prediction per instance, which the official harness and sb-cli take as
        is (``raydist.results.export``: the harness keys predictions by instance_id, so cells
        must not share a file; ``model_name_or_path`` names the cell and the run, so harness
        logs do not collide).
        Returns the runs table. Raises ``ValueError`` naming the key when a stored row or step
        has a column the schema lacks (a file of an older schema): it is refused, not dropped.

        Rows stay Arrow tables throughout and steps are streamed unit by unit into
        ``steps.parquet``, so memory grows with the rows (under 1 KiB each once combined), not
        their steps; at most ``COMBINE_ROWS`` rows are held as one-row tables at a time."""
        rows_present, steps_present = _stems(self.rows_dir), _stems(self.steps_dir)
        tables = self._row_tables(k for k in keys if k in rows_present)
        table = pa.concat_tables(tables).combine_chunks() if tables else RUNS_SCHEMA.empty_table()
        del tables
        atomic_write_parquet(self.run_dir / "runs.parquet", table)
        self._write_steps(k for k in table.column("key").to_pylist() if k in steps_present)
        self._write_preds(table)
        return table

    def _row_tables(self, keys: Iterable[str]) -> list[pa.Table]:
        """The readable stored rows of ``keys``, in order, as tables of up to ``COMBINE_ROWS``
        rows each (one chunk per column).

        A one-row table read back from its file costs about 60 KiB of native memory (a buffer,
        array and field object per column), some 100 times the row's data, and glibc keeps the
        freed memory in the driver; holding every row that way until one final combine made
        compile the driver's peak, 60 KiB per unit (600 MiB for 10,000 units). Combining every
        ``COMBINE_ROWS`` rows as they are read bounds that part to one batch."""
        tables, batch = [], []
        for key in keys:
            row = self._row_table(key)
            if row is not None:
                batch.append(row)
            if len(batch) == COMBINE_ROWS:
                tables.append(pa.concat_tables(batch).combine_chunks())
                batch = []
        if batch:
            tables.append(pa.concat_tables(batch).combine_chunks())
        return tables

    def _row_table(self, key: str) -> pa.Table | None:
        """The stored row of ``key`` as a one-row ``RUNS_SCHEMA`` table; None when it cannot be
        read; ``ValueError`` for a column the schema lacks."""
        try:
            with pq.ParquetFile(self.row_path(key)) as handle:
                table = handle.read()
        except _UNREADABLE:
            return None
        return conform_table(table, RUNS_SCHEMA, f"runs.parquet row of unit {key}")

    def _write_steps(self, keys: Iterable[str]) -> None:
        """``steps.parquet`` from the steps files of ``keys``, in that order, one unit in memory
        at a time."""
        final = self.run_dir / "steps.parquet"
        with temporary_beside(final) as (fh, tmp):
            with pq.ParquetWriter(fh, STEPS_SCHEMA) as writer:
                for key in keys:
                    try:
                        with pq.ParquetFile(self.steps_path(key)) as handle:
                            steps = handle.read()
                    except _UNREADABLE:
                        steps = None  # an unreadable steps file contributes none
                    if steps is not None and steps.num_rows:
                        writer.write_table(conform_table(steps, STEPS_SCHEMA, f"steps.parquet rows of unit {key}"))
            fh.flush()
            os.replace(tmp, final)

    def _write_preds(self, table: pa.Table) -> None:
        """``preds/<model>__<agent>__<level>__s<seed>.jsonl`` of the rows of ``table``
        (``raydist.results.export``); a ``.jsonl`` left in ``preds/`` by an earlier layout or
        cell is removed, so the folder holds exactly this run's cells."""
        written = {path.name for path, _ in write_predictions(table, self.run_dir)}
        for old in (self.run_dir / PREDS_DIR).glob("*.jsonl"):
            if old.name not in written:
                old.unlink(missing_ok=True)


def _stems(folder: Path) -> set[str]:
    """The stems of the ``.parquet`` files in ``folder`` (one listing: which units have a file)."""
    try:
        with os.scandir(folder) as entries:
            return {e.name.removesuffix(".parquet") for e in entries
                    if e.name.endswith(".parquet") and not e.name.startswith(".")}
    except FileNotFoundError:
        return set()


def _whole_parquet(path: Path) -> bool:
    """Whether ``path`` is a Parquet file whose footer reads (a file renamed into place after an
    fsync is whole; a damaged disk can leave one that is not)."""
    try:
        with pq.ParquetFile(path) as handle:
            return handle.metadata is not None
    except _UNREADABLE:
        return False


#: What reading a damaged, truncated or foreign file raises (pyarrow's errors, the OS's, a
#: column the file lacks).
_UNREADABLE = (OSError, pa.ArrowException, KeyError)


def _durable_write(table: pa.Table, final: Path, what: str) -> Path:
    """Write ``table`` to ``final`` through an fsynced temporary file and an atomic rename."""
    try:
        with temporary_beside(final) as (fh, tmp):
            pq.write_table(table, fh)
            fh.flush()
            os.fsync(fh.fileno())
            os.replace(tmp, final)
    except OSError as exc:
        raise OSError(exc.errno, f"could not write {what} {final}: {exc.strerror}") from exc
    return final


class RunDirBusy(RuntimeError):
    """Another launch holds the run directory's lock."""


LOCK_NAME = ".launch.lock"


@contextmanager
def run_dir_lock(run_dir: str | Path):
    """Hold the lock of ``run_dir`` (``fcntl.flock`` on ``<run_dir>/.launch.lock``) for the
    duration of the ``with`` block: one launch at a time writes a run directory. The lock
    file holds the holder's pid; the kernel releases the lock when the process ends, however
    it ends (kill -9 included), so a stale file never blocks a later launch.

    Raises ``RunDirBusy`` at once (no waiting) when another process holds it, naming the run
    directory and the holder's pid."""
    folder = Path(run_dir)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / LOCK_NAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
            raise RunDirBusy(f"run directory {folder} is in use by another launch (pid {holder}); wait for it "
                             f"to finish, or choose another output_root") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield path
    finally:
        os.close(fd)  # releases the lock
