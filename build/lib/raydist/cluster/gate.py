"""The validity gate (SchrodingerRepo §V-C): before an LLM agent is spent on a view, the
oracle agent (the gold patch written through the view) must resolve it and the null agent
(no change) must not. A view that fails is excluded from the launch and reported, never
silently used. Gate rows are ordinary unit rows of the scripted agents, kept in
``<output_root>/<benchmark>/_gate/`` and reused by every later launch.
"""

from __future__ import annotations

import json

from raydist.cluster.plan import SCRIPTED_AGENTS
from raydist.cluster.prepare import prepared_of
from raydist.outcomes import ERRORS, RESOLVED


def gate_todo(job, todo: list) -> list:
    """Gate units (oracle and null) of the views ``todo`` will use that have no row yet."""
    if job.gate_units is None:
        return []
    from raydist.results import ResultStore

    wanted = {(u.instance_id, u.level, u.seed) for u in todo}
    store = ResultStore(job.gate_dir)
    done = store.finished_keys([u.key for u in job.gate_units], retry_errors=True)
    return [u for u in job.gate_units if (u.instance_id, u.level, u.seed) in wanted and u.key not in done]


def run_gate(job, wanted: set, records: dict, errors: dict) -> list[dict]:
    """The validity gate (SchrodingerRepo §V-C): on every view the LLM agent will see
    (``wanted``: ``(instance_id, level, seed)``), the oracle must resolve and the null agent
    must not. Runs the gate units without a row,
    then returns the views that fail, each ``{"instance_id", "level", "seed", "reason"}``,
    and writes them to ``gate.json`` in the run directory."""
    from raydist.cluster.prepare import failure_row
    from raydist.cluster.runner import run_units
    from raydist.results import ResultStore
    from raydist.results.store import atomic_write_text

    store = ResultStore(job.gate_dir)
    keys = [u.key for u in job.gate_units]
    done = store.finished_keys(keys, retry_errors=True)
    todo = [u for u in job.gate_units if u.key not in done and (u.instance_id, u.level, u.seed) in wanted]
    for agent in SCRIPTED_AGENTS:
        batch = [u for u in todo if u.agent == agent]
        if not batch:
            continue
        print(f"validity gate: {len(batch)} {agent} units", flush=True)
        prepared, runnable = {}, []
        for unit in batch:
            value, failure = prepared_of(unit, records, errors)
            if failure is not None:
                store.write_row(failure_row(unit, failure))
            else:
                prepared[unit.key] = value
                runnable.append(unit)
        run_units(runnable, job.instances, job.gate_settings[agent], None, job.ray, store.write_row,
                  prepared=prepared)
    rows = {}
    for unit in job.gate_units:
        row = store.read_row(unit.key)
        rows[(unit.instance_id, unit.level, unit.seed, unit.agent)] = row
    excluded = []
    checked = 0
    for iid, level, seed in sorted(wanted, key=str):
        oracle, null = rows.get((iid, level, seed, "oracle")), rows.get((iid, level, seed, "null"))
        checked += 1
        reason = None
        if oracle is None or null is None:
            reason = "the gate did not run"
        elif oracle.get("outcome") in ERRORS:
            reason = f"oracle: {oracle['outcome']} ({oracle.get('error_cause')}): {_first_line(oracle)}"
        elif oracle.get("outcome") != RESOLVED:
            reason = "the oracle (gold patch through the view) does not resolve"
        elif null.get("outcome") in ERRORS:
            reason = f"null: {null['outcome']} ({null.get('error_cause')}): {_first_line(null)}"
        elif null.get("outcome") == RESOLVED:
            reason = "the null agent (no change) resolves: FAIL_TO_PASS does not fail on this view"
        if reason:
            excluded.append({"instance_id": iid, "level": level, "seed": seed, "reason": reason})
    store.compile(keys)
    atomic_write_text(job.run_dir / "gate.json", json.dumps({"checked": checked, "excluded": excluded}, indent=1))
    print(f"validity gate: {checked} views checked, {len(excluded)} excluded", flush=True)
    for item in excluded:
        print(f"  excluded {item['instance_id']} {item['level']} seed {item['seed']}: {item['reason']}", flush=True)
    return excluded


def _first_line(row: dict) -> str:
    return (row.get("error") or "").strip().splitlines()[0][:300] if row.get("error") else ""


def gate_report(job) -> str:
    """Markdown section on the validity gate: skipped for scripted agents (their run is the
    check), else the views checked and every excluded view with its reason (from gate.json)."""
    if job.gate_units is None:
        return ""
    path = job.run_dir / "gate.json"
    if not path.exists():
        return "\n## Validity gate\n\nNot run in this launch (nothing left to run).\n"
    data = json.loads(path.read_text())
    lines = ["", "## Validity gate", "",
             f"{data['checked']} views checked (oracle must resolve, null must not); "
             f"{len(data['excluded'])} excluded and not run:"]
    lines += [f"- {e['instance_id']} {e['level']} seed {e['seed']}: {e['reason']}" for e in data["excluded"]]
    return "\n".join(lines) + "\n"
