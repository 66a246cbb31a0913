"""The high-leakage subset of a benchmark: the instances a recall probe put at or above a
level (``benchmark.leakage`` and ``benchmark.min_leakage``; SchrodingerRepo §IV-A runs one
model on 300 instances with high leakage evidence)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq

from raydist.recall.score import LEVELS, level_rank
from raydist.recall.table import TABLE_NAME

__all__ = ["Leakage", "leakage_levels", "read_leakage", "select_by_leakage"]


def leakage_levels(path: str | Path) -> dict[str, str]:
    """``{instance_id: level}`` from a probe's ``recall.parquet`` (or the run directory holding
    it): the highest ``instance_level`` over the table's models.

    Raises:
        ValueError: naming ``benchmark.leakage`` when there is no such table or it lacks the
            ``instance_id``/``instance_level`` columns.
    """
    table_path = Path(path) / TABLE_NAME if Path(path).is_dir() else Path(path)
    if not table_path.is_file():
        raise ValueError(f"benchmark.leakage={str(path)!r}: no probe table there; write one with "
                         "`python -m raydist.launch_recall benchmark=... model=...` "
                         "(its run directory holds recall.parquet)")
    table = pq.read_table(table_path)
    missing = {"instance_id", "instance_level"} - set(table.column_names)
    if missing:
        raise ValueError(f"benchmark.leakage={str(path)!r}: not a probe table (no {', '.join(sorted(missing))} column)")
    levels: dict[str, str] = {}
    for instance_id, level in zip(table.column("instance_id").to_pylist(), table.column("instance_level").to_pylist()):
        if instance_id not in levels or level_rank(level) > level_rank(levels[instance_id]):
            levels[instance_id] = level
    return levels


@dataclass(frozen=True)
class Leakage:
    """``benchmark.leakage`` read: the probe table's highest level per instance (``levels``,
    ``leakage_levels``) and the least level kept (``min_level``, one of ``LEVELS``)."""

    path: str
    levels: Mapping[str, str]
    min_level: str

    def select(self, instances) -> list:
        """The ``instances`` (in their order) whose probed level is ``min_level`` or higher;
        instances the table does not hold are left out. Raises ``ValueError`` naming
        ``benchmark.leakage`` when the table has no row for any of ``instances``."""
        known = [i for i in instances if i.instance_id in self.levels]
        if not known:
            raise ValueError(f"benchmark.leakage={self.path!r}: the table has no row for any of the "
                             f"{len(instances)} instance(s) of this benchmark selection; probe them first")
        floor = level_rank(self.min_level)
        return [i for i in known if level_rank(self.levels[i.instance_id]) >= floor]


def read_leakage(path: str | Path, min_level: str) -> Leakage:
    """The probe table at ``path`` (``benchmark.leakage``) and the least level to keep
    (``benchmark.min_leakage``), read and checked before any instance is loaded.

    Raises:
        ValueError: naming ``benchmark.min_leakage`` for an unknown level, ``benchmark.leakage``
            for a missing table or one that is not a probe's (``leakage_levels``).
    """
    if min_level not in LEVELS:
        raise ValueError(f"benchmark.min_leakage={min_level!r}: choose one of {', '.join(LEVELS)}")
    return Leakage(str(path), leakage_levels(path), min_level)


def select_by_leakage(instances, path: str | Path, min_level: str) -> list:
    """The ``instances`` (in their order) whose probed level is ``min_level`` or higher
    (``read_leakage(path, min_level).select(instances)``); instances the table does not hold
    are left out. Raises ``ValueError`` as ``read_leakage`` and ``Leakage.select`` do."""
    return read_leakage(path, min_level).select(instances)
