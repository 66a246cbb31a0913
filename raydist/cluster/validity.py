"""The validity gate's verdicts (SchrodingerRepo §V-C): before an LLM agent is spent on a
view, the oracle agent (the gold patch written through the view) must resolve it and the null
agent (no change) must not. A view that fails is excluded from the launch and reported, never
silently used. Gate rows are ordinary unit rows of the scripted agents, kept in
``<output_root>/<benchmark>/_gate/`` and reused by every later launch (``raydist.cluster.execute``
runs them); this module only judges them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field

from raydist.outcomes import ERRORS, RESOLVED
from raydist.views.contracts import naming_contract

View = tuple[str, str, int]
"""``(instance_id, level, seed)``: one view."""


@dataclass(frozen=True)
class Exclusion:
    """A view the gate keeps from the LLM agent, and why."""

    instance_id: str
    level: str
    seed: int
    reason: str


@dataclass(frozen=True)
class GateResult:
    """``checked`` views, of which ``excluded`` failed the gate; ``contracts``: instance id ->
    its naming contract (``raydist.views.contracts``: names the FAIL_TO_PASS tests call that only
    the gold patch defines), for the instances that have one. A contract excludes nothing: it is
    a validity risk (a correct fix under another name fails), reported apart from model failures."""

    checked: int
    excluded: tuple[Exclusion, ...]
    contracts: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def views(self) -> set[View]:
        """The excluded views as ``(instance_id, level, seed)``."""
        return {(e.instance_id, e.level, e.seed) for e in self.excluded}

    def to_json(self) -> str:
        """``{"checked", "excluded": [{"instance_id", "level", "seed", "reason"}], "naming_contracts":
        {instance_id: [name, ...]}}`` (gate.json)."""
        return json.dumps({"checked": self.checked, "excluded": [asdict(e) for e in self.excluded],
                           "naming_contracts": {k: list(v) for k, v in sorted(self.contracts.items())}}, indent=1)


def judge_views(wanted: Iterable[View], rows: Mapping[tuple[str, str, int, str], Mapping | None],
                instances: Mapping[str, object] | None = None) -> GateResult:
    """The gate's verdict on each view of ``wanted`` from ``rows``, keyed ``(instance_id, level,
    seed, agent)`` with agent ``oracle`` or ``null`` (a missing row: the gate did not run), and the
    naming contract of each of ``instances`` (id -> instance) that has one."""
    excluded = []
    views = sorted(set(wanted), key=str)
    for iid, level, seed in views:
        reason = _reason(rows.get((iid, level, seed, "oracle")), rows.get((iid, level, seed, "null")))
        if reason:
            excluded.append(Exclusion(iid, level, seed, reason))
    contracts = {iid: tuple(c.labels()) for iid in sorted({v[0] for v in views})
                 if instances and iid in instances and (c := naming_contract(instances[iid])).names}
    return GateResult(checked=len(views), excluded=tuple(excluded), contracts=contracts)


def _reason(oracle: Mapping | None, null: Mapping | None) -> str | None:
    if oracle is None or null is None:
        return "the gate did not run"
    if oracle.get("outcome") in ERRORS:
        return f"oracle: {oracle['outcome']} ({oracle.get('error_cause')}): {_first_line(oracle)}"
    if oracle.get("outcome") != RESOLVED:
        return "the oracle (gold patch through the view) does not resolve"
    if null.get("outcome") in ERRORS:
        return f"null: {null['outcome']} ({null.get('error_cause')}): {_first_line(null)}"
    if null.get("outcome") == RESOLVED:
        return "the null agent (no change) resolves: FAIL_TO_PASS does not fail on this view"
    return None


def _first_line(row: Mapping) -> str:
    return (row.get("error") or "").strip().splitlines()[0][:300] if row.get("error") else ""
