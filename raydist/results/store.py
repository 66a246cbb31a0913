"""Durable result rows and the tables compiled from them.

Each finished unit's row is written at once as ``rows/<key>.parquet`` through a temporary
file and an atomic rename, so a driver killed at any moment leaves either the whole row or
nothing; one file per key means a re-run can never duplicate a row. ``compile`` gathers the
rows of a plan into ``runs.parquet`` and ``preds.jsonl``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterable, Mapping

import pyarrow as pa
import pyarrow.parquet as pq

from raydist.results.schema import RUNS_SCHEMA, normalise_row


class ResultStore:
    """The result rows of one run directory.

    ``run_dir`` layout: ``rows/<key>.parquet`` (one per finished unit), ``trajectories/``,
    ``runs.parquet``, ``preds.jsonl``, ``summary.md``.
    """

    def __init__(self, run_dir: str | Path):
        self.run_dir = Path(run_dir)
        self.rows_dir = self.run_dir / "rows"
        self.trajectories_dir = self.run_dir / "trajectories"
        self.rows_dir.mkdir(parents=True, exist_ok=True)
        self.trajectories_dir.mkdir(parents=True, exist_ok=True)

    def row_path(self, key: str) -> Path:
        return self.rows_dir / f"{key}.parquet"

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

    def finished_keys(self, keys: Iterable[str], *, retry_errors: bool) -> set[str]:
        """Keys among ``keys`` that need no run: a row exists and, with ``retry_errors``,
        it records an agent outcome rather than an infrastructure error."""
        done = set()
        for key in keys:
            row = self.read_row(key)
            if row is None:
                continue
            if retry_errors and row.get("error_kind") == "infrastructure":
                continue
            done.add(key)
        return done

    def write_row(self, row: Mapping) -> Path:
        """Write one unit's row durably (fsync, then atomic rename). Returns its path.

        Raises ``OSError`` (e.g. ENOSPC for a full disk) with the path in the message; the
        rows already written are untouched."""
        table = pa.Table.from_pylist([normalise_row(row)], schema=RUNS_SCHEMA)
        final = self.row_path(row["key"])
        tmp = final.with_suffix(f".tmp{os.getpid()}")
        try:
            with open(tmp, "wb") as fh:
                pq.write_table(table, fh)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, final)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise OSError(exc.errno, f"could not write result row {final}: {exc.strerror}") from exc
        return final

    def compile(self, keys: Iterable[str]) -> pa.Table:
        """Write ``runs.parquet`` (one row per finished unit among ``keys``, in plan order)
        and ``preds.jsonl`` (SWE-bench predictions format plus ``level``, ``seed``,
        ``unit``). Returns the runs table."""
        rows = [r for r in (self.read_row(k) for k in keys) if r is not None]
        table = pa.Table.from_pylist(rows, schema=RUNS_SCHEMA)
        _atomic_write_parquet(table, self.run_dir / "runs.parquet")
        preds = [
            {
                "instance_id": r["instance_id"],
                "model_name_or_path": r["model"] if r["model"] != "-" else r["agent"],
                "model_patch": r["model_patch"] or "",
                "level": r["level"],
                "seed": r["seed"],
                "unit": r["key"],
            }
            for r in rows
        ]
        tmp = self.run_dir / "preds.jsonl.tmp"
        tmp.write_text("".join(json.dumps(p) + "\n" for p in preds))
        os.replace(tmp, self.run_dir / "preds.jsonl")
        return table


def _atomic_write_parquet(table: pa.Table, path: Path) -> None:
    tmp = path.with_suffix(".parquet.tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, path)
