"""The executor of one launch: a ``Job`` in (``raydist.cluster.job``), its phases run in
order, what ran out:

    pending -> images -> views -> runnable -> gate -> units

``execute_job`` runs them on Ray, with the launch's model servers and its spending ledger;
each phase is a function from frozen inputs to a frozen output. Rows are written only
through a ``RowSink``. A phase gets what it needs as a value, but for rows: the gate judges
the rows in its run directory, so that those of earlier launches (resume) count as well.
The driver (``raydist.driver.drive``) holds the run directory, compiles and reports.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from raydist._util.files import atomic_write_text
from raydist.cluster.job import Job
from raydist.cluster.prepare import PrepCache, describe_record, preparation_tasks, prepared_of, task_key
from raydist.cluster.progress import UnitProgress
from raydist.cluster.scheduler import (
    ClusterTooSmall,
    build_images,
    check_capacity,
    init_ray,
    interrupt_on_signals,
    raise_interrupt,
    run_preparations,
    run_units,
)
from raydist.cluster.serving import ModelServers, check_placeable
from raydist.cluster.unit_image import UnitSettings
from raydist.cluster.unit_key import SCRIPTED_AGENTS, RunUnit
from raydist.cluster.validity import GateResult, View, judge_views
from raydist.models.admission import Admission
from raydist.models.process import ModelServerError
from raydist.outcomes import InfrastructureError
from raydist.results.budget import Spending
from raydist.results.sink import Failure, RowSink
from raydist.sandbox import BaseImageMissing, SandboxUnavailable, connect, ensure_base_image, sweep_orphans
from raydist.tasks.schema import Recipe
from raydist.views import levels_needing
from raydist.views.base import Prepared


class ClusterRefused(ValueError):
    """The cluster cannot satisfy a setting of the launch (no node offers what one unit asks
    for, a model that no node can hold); the message names the setting. The driver reports it
    as a setting error (exit status 2)."""
Where = tuple[str, int, str]
"""``(instance_id, seed, kind)``: one view preparation."""


@dataclass(frozen=True)
class Pending:
    """The units without a finished row (``ResultStore.finished_keys``): the agent's and the
    gate's for the views those use; ``finished_before`` counts the agent's finished units."""
    units: tuple[RunUnit, ...]
    gate_units: tuple[RunUnit, ...]
    finished_before: int


def view_of(unit: RunUnit) -> View:
    """``(instance_id, level, seed)`` of ``unit``."""
    return unit.instance_id, unit.level, unit.seed


def pending(job: Job, store, gate_store=None) -> Pending:
    """What of ``job`` must still run, from the rows of ``store`` (and ``gate_store`` for the
    gate units, whose error rows always run again)."""
    done = store.finished_keys([u.key for u in job.units], retry_errors=job.retry.retry_errors)
    todo = tuple(u for u in job.units if u.key not in done)
    gate_todo: tuple[RunUnit, ...] = ()
    if job.gate is not None and gate_store is not None:
        wanted = {view_of(u) for u in todo}
        gate_done = gate_store.finished_keys([u.key for u in job.gate.units], retry_errors=True)
        gate_todo = tuple(u for u in job.gate.units if view_of(u) in wanted and u.key not in gate_done)
    return Pending(todo, gate_todo, len(done))


@dataclass(frozen=True)
class Images:
    """The unit settings with the base image resolved, and the recipes that failed to build."""
    settings: UnitSettings
    failed: Mapping[str, Failure]

    def failure_of(self, job: Job, unit: RunUnit) -> Failure | None:
        """The build failure of ``unit``'s image, or None."""
        recipe = job.instances[unit.instance_id].recipe
        return None if recipe is None else self.failed.get(recipe.key())


def images(job: Job, units: tuple[RunUnit, ...], base_image: str) -> Images:
    """Build (or find) on Ray every instance image ``units`` need, before any agent runs."""

    settings = replace(job.settings, sandbox=replace(job.settings.sandbox, base_image=base_image))
    recipes: dict[str, Recipe] = {}
    for unit in units:
        recipe = job.instances[unit.instance_id].recipe
        if recipe is not None:
            recipes.setdefault(recipe.key(), recipe)
    return Images(settings, build_images(recipes, settings, job.ray))


@dataclass(frozen=True)
class Views:
    """Preparation records (L1 statements, L4 rewrites) and failures, by ``(instance_id, seed, kind)``."""
    records: Mapping[Where, dict]
    errors: Mapping[Where, Failure]
    not_started: frozenset[Where] = frozenset()  # kept from starting by a spent budget

    def held(self, unit: RunUnit) -> bool:
        """Whether a preparation ``unit`` needs was kept from starting (the unit cannot run)."""

        return any((unit.instance_id, unit.seed, kind) in self.not_started for kind in levels_needing(unit.level))

    def prepared(self, unit: RunUnit) -> tuple[Prepared | None, Failure | None]:
        """``raydist.cluster.prepare.prepared_of`` for ``unit``."""

        return prepared_of(unit, self.records, self.errors)


def views(job: Job, units: tuple[RunUnit, ...], settings: UnitSettings, view_endpoint: Callable[[], object],
          stop: Callable[[], object] | None = None) -> Views:
    """Compute on Ray (or read from the cache: ``Job.cache("views")``) every L1/L4
    preparation ``units`` need; ``view_endpoint()`` serves the view model, called only when a
    preparation that needs it is not cached yet. ``stop()`` true (a spent budget) keeps the
    remaining preparations from starting (``Views.not_started``)."""
    options = settings.view_options
    cache = PrepCache(job.views_cache)
    records: dict[Where, dict] = {}
    errors: dict[Where, Failure] = {}
    keys = {}
    todo = []
    for task in preparation_tasks(units):
        keys[task] = task_key(task, job.instances[task.instance_id], options, job.view_model.identity)
        record = cache.get(keys[task])
        if record is None:
            todo.append(task)
        else:
            records[(task.instance_id, task.seed, task.kind)] = record
    if not todo:
        return Views(records, errors)
    needs_model = any(t.kind == "L1" for t in todo) or options.l4_llm_attempts > 0
    print(f"preparing {len(todo)} views (L1 paraphrases, L4 rewrites with their test gate)"
          + (f" with view model {options.model}" if needs_model else ""), flush=True)

    def on_record(task, record, failure: Failure | None) -> None:
        where = (task.instance_id, task.seed, task.kind)
        if failure is not None:
            errors[where] = failure
            print(f"  {task.kind} {task.instance_id} seed {task.seed}: FAILED ({failure.outcome}): "
                  f"{failure.error.splitlines()[0][:200]}", flush=True)
            return
        cache.put(keys[task], record)
        records[where] = record
        print(f"  {task.kind} {task.instance_id} seed {task.seed}: {describe_record(task.kind, record)}", flush=True)

    left = run_preparations(todo, job.instances, options, view_endpoint() if needs_model else None, settings,
                            job.ray, on_record, stop=stop)
    if left:
        print(f"  {len(left)} view preparations not started: budget spent", flush=True)
    return Views(records, errors, frozenset((t.instance_id, t.seed, t.kind) for t in left))


@dataclass(frozen=True)
class Runnable:
    """Units that can run and the ``Prepared`` inputs of each, by key."""

    units: tuple[RunUnit, ...]
    prepared: Mapping[str, Prepared | None]
    held: tuple[RunUnit, ...] = ()  # a preparation they need was not started (budget spent): no row


def runnable(job: Job, units: tuple[RunUnit, ...], built: Images | None, prepared: Views, sink: RowSink) -> Runnable:
    """Those of ``units`` whose image was built (``built``; None: not checked) and whose
    preparations succeeded; each other unit's error row goes to ``sink``, but for a unit whose
    preparation was not started (``Views.held``): it has no row and is ``Runnable.held``."""
    ok, inputs, held = [], {}, []
    for unit in units:
        if prepared.held(unit):
            held.append(unit)
            continue
        failure = built.failure_of(job, unit) if built is not None else None
        value = None
        if failure is None:
            value, failure = prepared.prepared(unit)
        if failure is not None:
            sink.fail(unit, failure)
            continue
        ok.append(unit)
        inputs[unit.key] = value
    return Runnable(tuple(ok), inputs, tuple(held))


def gate(job: Job, wanted: set[View], gate_units: tuple[RunUnit, ...], settings: UnitSettings, prepared: Views,
         gate_store) -> GateResult:
    """The validity gate (SchrodingerRepo §V-C) on the views ``wanted``: runs the gate units
    without a row (``gate_units``) into ``gate_store``, judges every wanted view from the rows
    (``raydist.cluster.validity.judge_views``), writes ``gate.json`` in the run directory and returns the
    verdict."""
    assert job.gate is not None
    sink = RowSink(gate_store)
    for agent in SCRIPTED_AGENTS:
        batch = tuple(u for u in gate_units if u.agent == agent and view_of(u) in wanted)
        if not batch:
            continue
        print(f"validity gate: {len(batch)} {agent} units", flush=True)
        ready = runnable(job, batch, None, prepared, sink)
        agent_settings = replace(job.gate.settings[agent], sandbox=settings.sandbox)
        run_units(ready.units, job.instances, agent_settings, None, job.ray, sink.write, prepared=ready.prepared,
                  retry=job.retry)
    rows = {(*view_of(u), u.agent): gate_store.read_row(u.key) for u in job.gate.units}
    result = judge_views(wanted, rows)
    gate_store.compile([u.key for u in job.gate.units])
    atomic_write_text(job.run_dir / "gate.json", result.to_json())
    print(f"validity gate: {result.checked} views checked, {len(result.excluded)} excluded", flush=True)
    for e in result.excluded:
        print(f"  excluded {e.instance_id} {e.level} seed {e.seed}: {e.reason}", flush=True)
    return result


@dataclass(frozen=True)
class Ran:
    """The units this launch ran (``keys``, in plan order) and the outcome of each one's last
    row, counted (``outcomes``: outcome -> units); an infrastructure error retried counts once."""
    keys: tuple[str, ...]
    outcomes: Mapping[str, int]
    not_started: tuple[RunUnit, ...] = ()  # kept from starting by a spent budget: no row


def units(job: Job, ready: Runnable, settings: UnitSettings, endpoint, sink: RowSink, progress=None,
          stop: Callable[[], object] | None = None, *, execute: Callable[..., dict] | None = None) -> Ran:
    """Run ``ready`` on Ray (``raydist.cluster.scheduler.run_units``; ``execute``: what each task
    runs, None for ``raydist.cluster.unit.execute_unit``), every row into ``sink``; returns
    what ran. ``stop()`` true (a spent budget) keeps the remaining units from starting."""
    last: dict[str, str] = {}

    def write(row) -> None:
        sink.write(row)
        last[row["key"]] = row["outcome"]

    left = run_units(ready.units, job.instances, settings, endpoint, job.ray, write, progress,
                     prepared=ready.prepared, stop=stop, retry=job.retry,
                     **({} if execute is None else {"execute": execute}))
    counts: dict[str, int] = {}
    for outcome in last.values():
        counts[outcome] = counts.get(outcome, 0) + 1
    skipped = {u.key for u in left}
    return Ran(tuple(u.key for u in ready.units if u.key not in skipped), counts, tuple(left))


@dataclass(frozen=True)
class Executed:
    """What ``execute_job`` did: the gate's ``verdict`` (None: not gated or nothing ran), what
    the units phase ``ran`` (None: no unit was runnable or nothing ran), what the model calls
    spent (``spending``; None when nothing ran) and whether SIGTERM or Ctrl-C ``interrupted`` it."""

    verdict: GateResult | None = None
    ran: Ran | None = None
    spending: Spending | None = None
    interrupted: bool = False


def execute_job(job: Job, store, gate_store=None, *, execute: Callable[..., dict] | None = None) -> Executed:
    """Run the units of ``job`` without a finished row in ``store`` (``pending``; the gate's rows
    are in ``gate_store``): images -> views -> gate -> units on Ray, every row into its store as
    it arrives. Every model call reports to the launch's ledger (``raydist.models.admission``);
    once ``job.budget`` is spent, no view preparation or unit starts. SIGTERM and Ctrl-C stop
    scheduling (``Executed.interrupted``); rows already written stay. Ray is shut down and the
    launch's containers are removed at the end. ``execute`` is what each unit's Ray task runs
    (None: ``raydist.cluster.unit.execute_unit``, the sandboxed agent and grading).

    Raises ``ClusterRefused`` for a cluster that cannot run one unit as configured and
    ``InfrastructureError`` (one line: what failed, what to do) for Docker that cannot be
    reached, a missing base image or a model server that does not start."""
    todo = pending(job, store, gate_store)
    print(f"{job.title}: {len(job.units)} units planned, {todo.finished_before} finished before, "
          f"{len(todo.units)} to run; results in {job.run_dir}", flush=True)
    client, base_image = _docker(job)
    if not todo.units:
        return Executed()
    signal.signal(signal.SIGTERM, raise_interrupt)
    try:
        return _run_phases(job, todo, base_image, store, gate_store, execute)
    except KeyboardInterrupt:
        print("\ninterrupted: finished rows are kept; run the same command again to resume", file=sys.stderr,
              flush=True)
        return Executed(interrupted=True)
    finally:
        _shutdown_ray()
        _sweep(client)


def _run_phases(job: Job, todo: Pending, base_image: str, store, gate_store,
                execute: Callable[..., dict] | None) -> Executed:
    """images -> views -> gate -> units on Ray for the units of ``todo``."""
    dashboard = init_ray(job.ray)
    if dashboard:
        print(f"Ray dashboard: {dashboard} (units' tasks are named <instance_id>/<level>/s<seed>/<key>)", flush=True)
    interrupt_on_signals()  # also while it waits on Ray for a preparation or a unit
    _check_capacity(job)
    built = images(job, (*todo.units, *todo.gate_units), base_image)
    sink = RowSink(store)
    verdict: GateResult | None = None
    ran: Ran | None = None
    held: tuple[RunUnit, ...] = ()
    try:
        with ModelServers() as servers, Admission(job.budget, max_calls=job.ray.max_concurrency) as admission:
            view_model = job.view_model
            prepared = views(job, (*todo.units, *todo.gate_units), built.settings,
                             lambda: admission.attach(servers.endpoint(view_model.name, view_model.local), "view"),
                             stop=admission.spent)
            ready = runnable(job, todo.units, built, prepared, sink)
            held = ready.held
            if job.gate is not None:
                verdict = gate(job, {view_of(u) for u in ready.units}, todo.gate_units, built.settings, prepared,
                               gate_store)
                bad = verdict.views()
                ready = Runnable(tuple(u for u in ready.units if view_of(u) not in bad), ready.prepared)
            if view_model.name not in (job.model.name, job.judge.name if job.judge else None):
                servers.release(view_model.name)  # free its CPUs (or GPU) for the agents
            if ready.units:
                endpoint = (admission.attach(servers.endpoint(job.model.name, job.model.local), "agent")
                            if built.settings.agent_kind == "llm" else None)
                settings = built.settings
                if job.judge is not None:  # repository questions: the judge scores every answer
                    judge_endpoint = admission.attach(servers.endpoint(job.judge.name, job.judge.local), "judge")
                    settings = replace(settings, judge_endpoint=judge_endpoint)
                # The bar starts after preparation and the gate printed theirs.
                already = len(job.units) - len(todo.units)
                progress = UnitProgress(total=len(job.units), already_done=already + sum(sink.counts.values()),
                                        errors=sum(sink.counts.values()))
                try:
                    ran = units(job, ready, settings, endpoint, sink, progress, stop=admission.spent, execute=execute)
                finally:
                    progress.close()
            spending = _spending(job, admission, (*held, *(ran.not_started if ran else ())))
    except ModelServerError as exc:
        raise _server_failure(exc) from exc
    return Executed(verdict, ran, spending)


def _spending(job: Job, admission, not_started) -> Spending:
    """The launch's ``Spending``: the ledger's totals and the units the budget kept from
    starting, in plan order (``stopped`` only when there are some)."""
    keys = {u.key for u in not_started}
    left = [{"key": u.key, "name": f"{u.instance_id} {u.level} seed {u.seed}"} for u in job.units if u.key in keys]
    reason = admission.spent() if left else None
    if left:
        print(f"budget: {reason}; {len(left)} units not started (the same command with a larger budget runs "
              "them)", flush=True)
    return Spending({"usd": job.budget.usd, "tokens": job.budget.tokens}, admission.totals(), reason, tuple(left))


def _server_failure(exc: Exception) -> InfrastructureError:
    """One line for a model server that did not start: its first line names the server, how it
    failed and its log file (the log's last lines stay in the log)."""
    first = str(exc).strip().splitlines()[0].removesuffix(", last lines:") if str(exc).strip() else type(exc).__name__
    return InfrastructureError(f"the model server did not start: {first}; read its log, then check the local_models "
                               "entry's command (llama.cpp needs pip install 'raydist[local]')", cause="model_server")


def _check_capacity(job: Job) -> None:
    """``ClusterRefused`` naming the setting when the connected cluster cannot run one unit,
    one image build or the served models as configured."""
    import ray  # deferred: importing Ray is heavy and reads the launcher's environment defaults

    try:
        check_capacity(job.ray)
    except ClusterTooSmall as exc:
        raise ClusterRefused(str(exc)) from exc
    cpus = ray.cluster_resources().get("CPU", 0)
    for key, need in (("cluster.cpus_per_unit", job.ray.cpus_per_unit),
                      ("cluster.image_build_cpus", job.ray.image_build_cpus)):
        if need > cpus:
            raise ClusterRefused(f"{key}={need} but the Ray cluster has {cpus:g} CPUs: no unit could ever be "
                                 "scheduled")
    for served in (job.model, job.view_model):
        if served.local is not None and served.local.get("command"):
            try:
                check_placeable(served.name, dict(served.local))
            except ModelServerError as exc:
                raise ClusterRefused(str(exc)) from exc


def _docker(job: Job):
    """The Docker client and the base image tag; ``InfrastructureError`` when either is missing."""
    try:
        client = connect(job.settings.sandbox.docker_host)
        base_image = ensure_base_image(client, job.settings.sandbox.base_image)
    except SandboxUnavailable as exc:
        raise InfrastructureError(str(exc), cause="docker") from exc
    except BaseImageMissing as exc:
        raise InfrastructureError(str(exc), cause="base_image_missing") from exc
    _sweep(client, announce=True)
    return client, base_image


def _sweep(client, announce: bool = False) -> None:
    removed = sweep_orphans(client)
    if removed and announce:
        print(f"removed {removed} containers left by an earlier run that was killed", flush=True)


def _shutdown_ray() -> None:
    import ray  # deferred: importing Ray is heavy and reads the launcher's environment defaults

    if ray.is_initialized():
        ray.shutdown()
