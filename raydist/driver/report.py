"""The last two phases: ``compile`` (rows -> runs.parquet, steps.parquet, preds) and
``report`` (the tables -> summary.md), and the exit status they imply."""

from __future__ import annotations

import pyarrow as pa

from raydist.cluster.execute import Ran
from raydist.cluster.job import Job
from raydist.cluster.validity import GateResult
from raydist.outcomes import ERRORS
from raydist.results import (
    action_mix,
    action_mix_markdown,
    error_counts,
    integrity_counts,
    integrity_markdown,
    summarise,
    to_markdown,
)
from raydist.results.budget import EXIT_BUDGET_SPENT, Spending


def compile_tables(job: Job, store, ran: Ran | None) -> pa.Table:
    """Write the run directory's tables from the rows of ``job``'s units (``ResultStore.compile``).

    The rows are read back from the run directory on purpose, not taken from ``ran``: a
    launch resumes, and the rows earlier launches wrote for the same units count too. ``ran``
    (None: nothing ran in this launch, or it was interrupted) is checked against them: a unit
    this launch ran without a row raises ``RuntimeError`` naming it (a row lost is a bug)."""
    table = store.compile([u.key for u in job.units])
    if ran is not None:
        found = set(table.column("key").to_pylist())
        lost = [key for key in ran.keys if key not in found]
        if lost:
            raise RuntimeError(f"{len(lost)} units ran in this launch but have no row in {job.run_dir}: "
                               f"{', '.join(lost[:5])}")
    return table


def report(job: Job, table: pa.Table, gate: GateResult | None, *, interrupted: bool,
           spending: Spending | None = None) -> str:
    """The Markdown summary of ``table``: rates per model x agent x level, errors by cause,
    the action mix and exposure audit, the integrity flags, the validity gate's verdict (``gate``: None when
    it did not run in this launch) and what the model calls spent (``spending``: None when
    nothing ran), naming the units a spent budget kept from starting."""
    note = "Interrupted before the plan finished." if interrupted else ""
    if spending is not None and spending.summary_line():
        note = " ".join(filter(None, [note, spending.summary_line()]))
    text = to_markdown(summarise(table), title=job.title, planned=len(job.units), note=note,
                       errors=error_counts(table))
    text += action_mix_markdown(action_mix(table))
    text += integrity_markdown(integrity_counts(table))
    text += gate_markdown(gate, gated=job.gate is not None)
    return text + (spending.markdown() if spending is not None else "")


def exit_status(table: pa.Table, *, interrupted: bool, spending: Spending | None = None) -> int:
    """130 when interrupted; 1 when a planned unit's row is an error (``input_error``,
    ``infrastructure_error`` or ``bug``: the tables are complete but some units have no
    result); 3 (``EXIT_BUDGET_SPENT``) when the budget kept units from starting and none
    ended in an error; else 0."""
    if interrupted:
        return 130
    if any(outcome in ERRORS for outcome in table.column("outcome").to_pylist()):
        return 1
    return EXIT_BUDGET_SPENT if spending is not None and spending.stopped else 0


def gate_markdown(result: GateResult | None, *, gated: bool) -> str:
    """Markdown section on the validity gate: ``""`` when the launch is not gated (scripted
    agents: their run is the check), a note when the gate had nothing to check in this launch,
    else the views checked and every excluded view with its reason."""
    if not gated:
        return ""
    if result is None:
        return "\n## Validity gate\n\nNot run in this launch (nothing left to run).\n"
    lines = ["", "## Validity gate", "",
             f"{result.checked} views checked (oracle must resolve, null must not); "
             f"{len(result.excluded)} excluded and not run:"]
    lines += [f"- {e.instance_id} {e.level} seed {e.seed}: {e.reason}" for e in result.excluded]
    if result.contracts:
        # Not a model failure: a correct fix under another name fails these instances' tests.
        lines += ["", "Validity risk: naming contracts (names the FAIL_TO_PASS tests call that only the gold "
                  "patch defines; a correct fix under another name fails; rows: `naming_contract`, `contract_used`):"]
        lines += [f"- {iid}: {', '.join(names)}" for iid, names in sorted(result.contracts.items())]
    return "\n".join(lines) + "\n"
