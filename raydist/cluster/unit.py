"""One run unit, start to finish, in plain Python (the Ray task in ``scheduler`` only calls it).

Flow (docs/architecture.md), the same for every task kind (``raydist.cluster.kinds``): instance
image -> View (pure) -> agent sandbox with the view written and git re-initialised at the view
state, so no history reveals the original (``raydist.cluster.workspace``) -> agent
(``kind.run_agent``) -> ``kind.score`` (a patch recovered in original coordinates and graded, or
an answer translated back and judged) -> ``UnitResult`` -> one row (``result_fields``).
"""

from __future__ import annotations

import json
import time
import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from raydist.agents.integrity import integrity_columns, integrity_context
from raydist.agents.outcome import exposure_columns
from raydist.cluster.errors import UnitInputError
from raydist.cluster.kinds import Score, TaskKind, kind_of
from raydist.cluster.outputs import read_trajectory, scratch_trajectory
from raydist.cluster.unit_image import UnitImage, UnitSettings, unit_image
from raydist.cluster.unit_key import RunUnit
from raydist.cluster.workspace import install_view
from raydist.outcomes import BUG, InfrastructureError, agent_exit_of, classify_exception
from raydist.views import build_view

if TYPE_CHECKING:  # imported where used: the sandbox's Limits loads Docker
    pass

__all__ = ["UnitImage", "UnitInputError", "UnitResult", "UnitSettings", "error_fields", "execute_unit",
           "result_fields", "run_unit"]


@dataclass(frozen=True)
class UnitResult:
    """A unit whose agent ran to its end and whose run was scored: the agent's columns
    (``agent_columns``), its seconds in the sandbox, its ``agent_exit`` and, for a
    ``model_error`` exit, the agent's error; and the kind's ``Score``."""

    agent: Mapping[str, Any]
    agent_seconds: float
    agent_exit: str
    agent_error: str | None
    score: Score


def execute_unit(unit: RunUnit, instance, settings: UnitSettings, endpoint=None, prepared=None, *,
                 run=None) -> dict:
    """Run one unit and return its result row (see ``raydist.results.schema``), with the
    agent's per-command records under ``step_records`` when it ran (``ResultStore.write_row``
    stores them as the unit's steps) and the unit's files under ``files``
    (``raydist.cluster.outputs``: the trajectory, also of a run that failed after the agent
    saved one, and the grading log), which the driver writes into its run directory: nothing
    is written into ``settings.run_dir`` from here, which may be on another machine.

    ``prepared`` is the unit's ``raydist.views.Prepared`` (L1 statement, L4 rewrites) from
    ``raydist.cluster.prepare``; levels without L1/L4 need none.

    Never raises for an outcome of the run: the row's ``outcome`` is one of
    ``raydist.outcomes.OUTCOMES``. A finished run is ``resolved`` or ``unresolved`` with its
    ``agent_exit``; an exception is classified by ``raydist.outcomes.classify_exception``
    (``infrastructure_error``: Docker, image build, model server, retried within a bound;
    ``input_error``: the instance; ``bug``: raydist itself, with the traceback in ``error``),
    with its ``error_cause``. An error row also carries ``retry_after`` (seconds or None; not
    a stored column) for the scheduler's backoff.

    ``run(unit, instance, settings, endpoint, prepared, trajectory_path) -> fields`` is the
    run itself (default: ``run_unit``, the sandboxed agent scored by the instance's task kind,
    as ``result_fields``); it saves the trajectory at ``trajectory_path`` (a scratch file on
    this node)."""
    started = time.time()
    row = _base_row(unit)
    with scratch_trajectory(unit) as scratch:
        try:
            row.update((run or _run)(unit, instance, settings, endpoint, prepared, scratch))
        except Exception as exc:  # noqa: BLE001 - every failure must become a recorded row
            row.update(error_fields(exc))
        files = {**read_trajectory(scratch), **row.get("files", {})}
    if files:
        row["files"] = files
    row["wall_seconds"] = round(time.time() - started, 3)
    row["finished_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    return row


def error_fields(exc: BaseException) -> dict:
    """The row fields of a unit ended by ``exc``: ``outcome``, ``error_cause``, ``error``
    (``Type: message``; a bug's traceback follows, at most 4000 characters in all),
    ``resolved=False`` and ``retry_after``."""
    outcome, cause = classify_exception(exc)
    error = f"{type(exc).__name__}: {exc}"
    if outcome == BUG:
        error = f"{error}\n{traceback.format_exc()}"
    return {"outcome": outcome, "error_cause": cause, "error": error[:4000], "resolved": False,
            "retry_after": getattr(exc, "retry_after", None)}


def _base_row(unit: RunUnit) -> dict:
    return {
        "key": unit.key, "instance_id": unit.instance_id, "model": unit.model, "agent": unit.agent,
        "level": unit.level, "seed": unit.seed, "attempt": unit.attempt, "config_hash": unit.config_hash,
        "resolved": False,
    }


def result_fields(result: UnitResult) -> dict:
    """The row fields of a scored unit (``raydist.results.schema.RUNS_SCHEMA`` names, plus
    ``step_records`` and ``files``): the agent's columns, then the score's, its outcome and
    files; an error of the agent (``model_error``) and one of the scoring are joined, the
    scoring's cause kept. The one place a finished unit's row is written."""
    out = dict(result.agent)
    out["agent_seconds"] = result.agent_seconds
    out["agent_exit"] = result.agent_exit
    if result.agent_exit == "model_error":
        out["error"] = result.agent_error
    score = result.score
    out.update(score.columns, outcome=score.outcome, resolved=score.resolved)
    if score.files:
        out["files"] = dict(score.files)
    if score.error:
        out["error"] = score.error if not out.get("error") else f"{out['error']}\n{score.error}"
        out["error_cause"] = score.error_cause
    return out


def _run(unit: RunUnit, instance, settings: UnitSettings, endpoint, prepared, traj_path: Path) -> dict:
    return result_fields(run_unit(unit, instance, settings, endpoint, prepared, traj_path))


def run_unit(unit: RunUnit, instance, settings: UnitSettings, endpoint, prepared, traj_path: Path,
             kind: TaskKind | None = None) -> UnitResult:
    """Image -> view -> sandbox -> agent -> ``kind.score`` (``kind``: ``kind_of(instance)``).
    Raises what a step raises (``execute_unit`` records it)."""
    kind = kind or kind_of(instance)
    image = unit_image(instance, settings, tested=kind.needs_tests)
    view = build_view(instance, image.repo, unit.level, unit.seed, settings.view_options, prepared)
    kind.check_unit(instance, settings)
    t0 = time.time()
    with image.provider.create(image.tag, limits=settings.sandbox.limits, network=settings.sandbox.network,
                               labels={"raydist.unit": unit.key}, name=f"agent-{unit.key[:12]}") as box:
        initial = install_view(box, view)
        run = kind.run_agent(settings, view, box, endpoint, traj_path, instance, image.repo, initial)
    columns = agent_columns(run.outcome, view, instance)
    seconds = round(time.time() - t0, 3)
    agent_exit = agent_exit_or_raise(run.outcome, settings)
    score = kind.score(unit, instance, settings, image, view, run)
    return UnitResult(columns, seconds, agent_exit, run.outcome.error, score)


def agent_columns(outcome, view, instance=None) -> dict:
    """The row columns every agent run fills, patch or question: exit status, steps, tokens,
    cost, the view's size and statement source, the §IV RQ2 action mix, the §III-F exposure
    audit (``view_meta`` with its ``audit``), the integrity flags of its steps
    (``raydist.agents.integrity``, judged with ``instance``'s test files and the view's project
    names; scripted agents' steps too), and the step records (for the steps file)."""
    out = {
        "exit_status": outcome.exit_status, "steps": outcome.steps, "input_tokens": outcome.input_tokens,
        "output_tokens": outcome.output_tokens, "cost": outcome.cost, "view_files": len(view.files),
        "statement_source": view.meta.get("l1_source", "canonical"),
        "statement_attempts": int(view.meta.get("l1_attempts", 0)),
        **{f"actions_{category}": n for category, n in outcome.action_counts.items()},
        "step_records": [dict(r) for r in outcome.step_records],
    }
    exposure = exposure_columns(view, outcome.step_records)
    out["view_meta"] = json.dumps({**view.meta, "audit": exposure.pop("audit")}, default=str, sort_keys=True)
    out.update(exposure)
    out.update(integrity_columns(outcome.step_records, integrity_context(instance, view)))
    return out


def agent_exit_or_raise(outcome, settings: UnitSettings) -> str:
    """``agent_exit`` of a finished agent run (``raydist.outcomes.agent_exit_of``). Raises
    ``InfrastructureError`` for a run that did not end on its own (ModelUnreachable, or any end
    that is not the agent's): the machine failed it, not the model."""
    agent_exit = agent_exit_of(outcome.exit_status, cost=outcome.cost,
                               cost_limit=float(settings.agent_settings.cost_limit))
    if agent_exit is None:
        cause = "model_unreachable" if outcome.exit_status == "ModelUnreachable" else "agent_exit"
        raise InfrastructureError(outcome.error or f"the agent ended with {outcome.exit_status!r}", cause=cause)
    return agent_exit
