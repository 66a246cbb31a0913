"""``dry_run=true``: the plan of a launch, printed, with nothing started (no Docker, no Ray,
no model, and no model's weights assembled or downloaded): the units per instance, level and
seed, how many are finished already, the images and view preparations they need, and the
estimated cost and time. Without a served model's weights (``Job.keys_unknown``) the unit keys
are not a run's, so it says that how many are finished cannot be told and counts every unit.

Estimates come from what is known, and say where from: time from the measured
``wall_seconds`` of finished units of the same benchmark, agent and model under
``output_root`` (their ``runs.parquet``), cost from litellm's price table (0 for a model
raydist serves) times ``step_limit x max_tokens`` completion tokens per unit, never above
``cost_limit`` per unit.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq

from raydist.cluster.job import Job
from raydist.models.pricing import UnknownPrice, price_per_token
from raydist.outcomes import FINISHED
from raydist.results import ResultStore
from raydist.views import levels_needing


@dataclass(frozen=True)
class Estimate:
    """Seconds and USD of the units still to run; None where nothing tells. ``basis`` says
    what each number rests on."""

    seconds: float | None
    cost: float | None
    basis: str


def finished_keys(job: Job) -> set[str]:
    """Keys of ``job``'s units with a finished row in its run directory (read only)."""
    if not (job.run_dir / "rows").is_dir():
        return set()
    return ResultStore(job.run_dir).finished_keys([u.key for u in job.units], retry_errors=job.retry.retry_errors)


def measured_unit_seconds(job: Job) -> list[float]:
    """``wall_seconds`` of every finished unit in the ``runs.parquet`` tables below
    ``<output_root>/<benchmark>/<agent>/<model>/`` of ``job``."""
    folder = Path(job.output_root) / job.benchmark / job.agent / job.model.name
    seconds = []
    for table in sorted(folder.glob("**/runs.parquet")) if folder.is_dir() else []:
        try:
            rows = pq.read_table(table, columns=["outcome", "wall_seconds"]).to_pylist()
        except Exception:  # noqa: BLE001 - a table being written is skipped, not fatal
            continue
        seconds += [r["wall_seconds"] for r in rows if r["outcome"] in FINISHED and r["wall_seconds"]]
    return seconds


def estimate(job: Job, todo: int, measured: list[float]) -> Estimate:
    """Time and cost of ``todo`` units of ``job`` (``measured``: seconds of finished units)."""
    basis = []
    seconds = None
    if measured:
        per_unit = sum(measured) / len(measured)
        seconds = todo * per_unit / max(1, job.ray.max_concurrency)
        basis.append(f"time: {per_unit:.1f} s per unit measured over {len(measured)} finished units, "
                     f"{job.ray.max_concurrency} in flight")
    else:
        basis.append("time: no finished unit of this benchmark, agent and model yet (run benchmark.limit=1 "
                     "first to measure one)")
    settings = job.settings.agent_settings
    if job.settings.agent_kind != "llm" or job.model.local is not None:
        cost = 0.0
        basis.append("cost: 0 (no model, or a model raydist serves)")
    else:
        try:
            _, output_price = price_per_token(job.model.name)
        except UnknownPrice as exc:
            cost = None
            basis.append(f"cost: unknown ({exc})")
        else:
            tokens = int(settings.step_limit) * int(settings.max_tokens)
            per_unit = tokens * output_price
            cap = float(settings.cost_limit)
            if cap > 0:
                per_unit = min(per_unit, cap)
            cost = todo * per_unit
            basis.append(f"cost: {tokens} completion tokens per unit at ${output_price:.2e}/token"
                         + (f", at most cost_limit ${cap:g} per unit" if cap > 0 else "")
                         + "; prompt tokens not counted")
    return Estimate(seconds, cost, "; ".join(basis))


def _attempts(units) -> str:
    attempts = 1 + max((u.attempt for u in units), default=0)
    return f" x {attempts} attempts" if attempts > 1 else ""


def plan_text(job: Job) -> str:
    """The dry run's report of ``job``."""
    done = set() if job.keys_unknown else finished_keys(job)
    measured = measured_unit_seconds(job)
    todo = [u for u in job.units if u.key not in done]
    instances = sorted({u.instance_id for u in job.units})
    views = Counter((u.level, u.seed) for u in job.units)
    before = f"{len(done)} finished before, {len(todo)} to run" if not job.keys_unknown else (
        f"finished before unknown, at most {len(todo)} to run")
    lines = [f"{job.title}: dry run, nothing started", f"run directory: {job.run_dir}",
             f"units: {len(job.units)} planned ({len(instances)} instances x {len(views)} level/seed views"
             f"{_attempts(job.units)}), {before}"]
    if job.keys_unknown:
        lines.append(f"  (which units finished before cannot be told without the model's weights: {job.keys_unknown})")
    lines.append("per level and seed: " + ", ".join(f"{level} s{seed}: {n}" for (level, seed), n in views.items()))
    per_instance = Counter(u.instance_id for u in todo)
    lines += [f"  {iid}: {per_instance.get(iid, 0)} to run of "
              f"{sum(1 for u in job.units if u.instance_id == iid)}" for iid in instances]
    gate_units = [] if job.gate is None else [u for u in job.gate.units if (u.instance_id, u.level, u.seed)
                                              in {(t.instance_id, t.level, t.seed) for t in todo}]
    if job.gate is not None:
        lines.append(f"validity gate: up to {len(gate_units)} oracle/null units (rows in {job.gate.store_dir})")
    recipes = {recipe.key() for u in (*todo, *gate_units)
               if (recipe := job.instances[u.instance_id].recipe) is not None}
    lines.append(f"images: {len(recipes)} instance images on base image "
                 f"{job.settings.sandbox.base_image or 'the default (raydist/sandbox/base_image.sh)'}")
    wanted = {(u.instance_id, u.seed, kind) for u in (*todo, *gate_units) for kind in levels_needing(u.level)}
    tasks = Counter(t.kind for t in job.preparations if (t.instance_id, t.seed, t.kind) in wanted)
    if tasks:
        lines.append("view preparations: " + ", ".join(f"{kind}: {n}" for kind, n in sorted(tasks.items()))
                     + f" (view model {job.view_model.name}; cached ones cost nothing)")
    result = estimate(job, len(todo), measured)
    time_text = "unknown" if result.seconds is None else f"{result.seconds / 60:.1f} min"
    cost_text = "unknown" if result.cost is None else f"${result.cost:.4f}"
    lines += [f"estimated time: {time_text}; estimated cost: {cost_text}", f"  ({result.basis})"]
    return "\n".join(lines) + "\n"


def print_plan(job: Job) -> None:
    """Print ``plan_text``."""
    print(plan_text(job), end="", flush=True)
