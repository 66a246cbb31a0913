"""Naming contracts as a validity risk of finished runs: per system, level and instance with a
contract (the row's ``naming_contract``: names the FAIL_TO_PASS tests call that only the gold
patch defines, ``raydist.views.contracts``), the finished units, how many resolved, and how many
unresolved units did not define the names (``contract_used`` false): those may have fixed the
bug under other names, so they are counted apart from model failures.
"""

from __future__ import annotations

import json

import pyarrow as pa

from raydist.analysis.runs import level_key
from raydist.outcomes import FINISHED, RESOLVED


def contract_risk(table: pa.Table) -> list[dict]:
    """``{model, agent, level, instance_id, names, finished, resolved, unresolved,
    unresolved_without_names}`` per system, level and instance whose rows carry a non-empty
    ``naming_contract``, sorted by system, level (``level_key``) and instance; ``[]`` when the
    table has no such column or no contract."""
    if "naming_contract" not in table.column_names:
        return []
    cells: dict[tuple, dict] = {}
    columns = ["model", "agent", "level", "instance_id", "outcome", "naming_contract", "contract_used"]
    for row in table.select([c for c in columns if c in table.column_names]).to_pylist():
        names = json.loads(row["naming_contract"] or "[]")
        if not names or row["outcome"] not in FINISHED:
            continue
        cell = cells.setdefault((row["model"], row["agent"], row["level"], row["instance_id"]), {
            "model": row["model"], "agent": row["agent"], "level": row["level"], "instance_id": row["instance_id"],
            "names": ", ".join(names), "finished": 0, "resolved": 0, "unresolved": 0,
            "unresolved_without_names": 0})
        cell["finished"] += 1
        if row["outcome"] == RESOLVED:
            cell["resolved"] += 1
        else:
            cell["unresolved"] += 1
            cell["unresolved_without_names"] += row.get("contract_used") is False
    return [cells[k] for k in sorted(cells, key=lambda k: (k[0], k[1], level_key(k[2]), k[3]))]
