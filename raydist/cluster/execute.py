"""The executor of one launch: a ``Job`` in (``raydist.cluster.job``), its phases run in
order, what ran out:

    pending -> images -> views -> runnable -> gate -> units

``execute_job`` runs them on Ray, with the launch's model servers and its spending ledger;
each phase is a function from frozen inputs to a frozen output. Rows are written only
through a ``RowSink``. A phase gets what it needs as a value, but for rows: the gate judges
the rows in its run directory, so that those of earlier launches (resume) count as well.
The driver (``raydist.driver.drive``) holds the run directory, compiles and reports.

``RowSink`` is the one writer of result rows: every way a unit ends (a result, an image that
could not be built, a view preparation that failed, a Ray task that died) reaches the run
directory through ``RowSink.write``, once per attempt, and nowhere else.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from raydist.cluster.failures import Failure, error_row
from raydist.cluster.job import Job
from raydist.cluster.prepare import describe_record, preparation_tasks, prepared_of
from raydist.cluster.run_images import Before, images_record
from raydist.cluster.scheduler import (
    ClusterTooSmall,
    UnitProgress,
    build_images,
    check_capacity,
    init_ray,
    interrupt_on_signals,
    raise_interrupt,
    run_preparations,
    run_units,
)
from raydist.cluster.serving import ModelServers
from raydist.cluster.unit_image import UnitSettings
from raydist.cluster.unit_key import SCRIPTED_AGENTS, RunUnit
from raydist.cluster.validity import GateResult, View, judge_views
from raydist.models.process import ModelServerError
from raydist.outcomes import OUTCOMES, InfrastructureError, classify_exception
from raydist.results.budget import Spending
from raydist.sandbox import BaseImageMissing, SandboxProvider, SandboxUnavailable, ensure_base_image
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


class RowSink:
    """Writes the rows of one store (``ResultStore`` or anything with ``write_row``) and tells
    ``on_written`` (e.g. a progress bar's ``finished``) about each; counts rows by outcome
    (``counts``) and keeps the outcome of each key's last row (``last``).

    ``write`` refuses a row whose ``outcome`` is not of the taxonomy (``ValueError``) and, through
    ``raydist.results.schema.normalise_row``, a row with a key the schema lacks (``KeyError``)."""

    def __init__(self, store, on_written: Callable[[dict], None] | None = None) -> None:
        self.store = store
        self.on_written = on_written
        self.counts: dict[str, int] = {}
        self.last: dict[str, str] = {}  # key -> the outcome of its last row written here

    def write(self, row: Mapping) -> None:
        """Write ``row`` durably (``ResultStore.write_row``; raises what it raises)."""
        if row.get("outcome") not in OUTCOMES:
            raise ValueError(f"result row {row.get('key')!r} has outcome {row.get('outcome')!r}; "
                             f"one of {', '.join(OUTCOMES)}")
        self.store.write_row(row)
        self.counts[row["outcome"]] = self.counts.get(row["outcome"], 0) + 1
        self.last[str(row["key"])] = str(row["outcome"])
        if self.on_written is not None:
            self.on_written(dict(row))

    def fail(self, unit, failure: Failure) -> None:
        """Write the error row of ``unit`` ended by ``failure``."""
        self.write(error_row(unit, failure))


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


@dataclass(frozen=True)
class Views:
    """What the views phase made: the preparation records (L1 statements, L4 rewrites) and
    failures, by ``(instance_id, seed, kind)``; those a spent budget kept from starting; and
    each unit view's inputs, by ``(instance_id, level, seed)``: its ``Prepared``, or the
    ``Failure`` of a preparation it needs (``raydist.cluster.prepare.prepared_of``)."""
    records: Mapping[Where, dict]
    errors: Mapping[Where, Failure]
    not_started: frozenset[Where] = frozenset()  # kept from starting by a spent budget
    inputs: Mapping[View, tuple[Prepared | None, Failure | None]] = field(default_factory=dict)

    def held(self, unit: RunUnit) -> bool:
        """Whether a preparation ``unit`` needs was kept from starting (the unit cannot run)."""

        return any((unit.instance_id, unit.seed, kind) in self.not_started for kind in levels_needing(unit.level))

    def prepared(self, unit: RunUnit) -> tuple[Prepared | None, Failure | None]:
        """``(Prepared, None)`` for ``unit``, or ``(None, failure)`` when a preparation it needs failed."""

        return self.inputs[view_of(unit)]


def views(job: Job, units: tuple[RunUnit, ...], settings: UnitSettings, servers: ModelServers) -> Views:
    """Compute on Ray (or read from the cache: ``Job.views_cache``, by the keys the plan gave
    them: ``Job.preparations``) every L1/L4 preparation ``units`` need; the view model is served
    (``servers``) only when a preparation that needs it is not cached yet. Once the launch's
    budget is spent (``servers.admission``), the remaining preparations do not start
    (``Views.not_started``)."""
    options = settings.view_options
    cache = job.views_cache
    records: dict[Where, dict] = {}
    errors: dict[Where, Failure] = {}
    todo = []
    for task in preparation_tasks(units):
        record = cache.get(job.preparations[task])
        if record is None:
            todo.append(task)
        else:
            records[(task.instance_id, task.seed, task.kind)] = record
    left: list = []
    if todo:
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
            cache.put(job.preparations[task], record)
            records[where] = record
            print(f"  {task.kind} {task.instance_id} seed {task.seed}: {describe_record(task.kind, record)}",
                  flush=True)

        left = run_preparations(todo, job.instances, options, servers.endpoint(job.view_model, "view")
                                if needs_model else None, settings, job.ray, on_record, stop=servers.spent)
        if left:
            print(f"  {len(left)} view preparations not started: budget spent", flush=True)
    return Views(records, errors, frozenset((t.instance_id, t.seed, t.kind) for t in left),
                 {view_of(u): prepared_of(u, records, errors) for u in units})


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
         sink: RowSink) -> GateResult:
    """The validity gate (SchrodingerRepo §V-C) on the views ``wanted``: runs the gate units
    without a row (``gate_units``) into ``sink`` (on the gate's store), judges every wanted view
    from the store's rows (``raydist.cluster.validity.judge_views``) and returns the verdict
    (the driver writes it to ``gate.json``)."""
    assert job.gate is not None
    for agent in SCRIPTED_AGENTS:
        batch = tuple(u for u in gate_units if u.agent == agent and view_of(u) in wanted)
        if not batch:
            continue
        print(f"validity gate: {len(batch)} {agent} units", flush=True)
        ready = runnable(job, batch, None, prepared, sink)
        agent_settings = replace(job.gate.settings[agent], sandbox=settings.sandbox)
        run_units(ready.units, job.instances, agent_settings, None, job.ray, sink.write, prepared=ready.prepared,
                  retry=job.retry)
    sink.store.compile([u.key for u in job.gate.units])
    rows = {(*view_of(u), u.agent): sink.store.read_row(u.key) for u in job.gate.units}
    result = judge_views(wanted, rows, job.instances)
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


def units(job: Job, ready: Runnable, settings: UnitSettings, servers: ModelServers, sink: RowSink,
          *, already_done: int = 0, execute: Callable[..., dict] | None = None) -> Ran:
    """Run ``ready`` on Ray (``raydist.cluster.scheduler.run_units``; ``execute``: what each task
    runs, None for ``raydist.cluster.unit.execute_unit``), every row into ``sink``, with a
    progress bar (``already_done``: the launch's units finished before it started). An LLM
    agent's model and a question's judge are served by ``servers``, after the view model is
    released (unless one of them is it: its CPUs, or GPU, go to the agents). Once the launch's
    budget is spent, the remaining units do not start. Returns what ran: the last outcome of
    each unit counted, an infrastructure error retried once."""
    if job.view_model.name not in (job.model.name, job.judge.name if job.judge else None):
        servers.release(job.view_model.name)
    if job.judge is not None:  # repository questions: the judge scores every answer
        settings = replace(settings, judge_endpoint=servers.endpoint(job.judge, "judge"))
    endpoint = servers.endpoint(job.model, "agent") if settings.agent_kind == "llm" else None
    errors = sum(sink.counts.values())  # rows of units that could not run (their image or view failed)
    left = run_units(ready.units, job.instances, settings, endpoint, job.ray, sink.write,
                     UnitProgress(total=len(job.units), already_done=already_done + errors, errors=errors),
                     prepared=ready.prepared, stop=servers.spent, retry=job.retry,
                     **({} if execute is None else {"execute": execute}))
    counts: dict[str, int] = {}
    for unit in ready.units:
        if unit.key in sink.last:
            counts[sink.last[unit.key]] = counts.get(sink.last[unit.key], 0) + 1
    skipped = {u.key for u in left}
    return Ran(tuple(u.key for u in ready.units if u.key not in skipped), counts, tuple(left))


@dataclass(frozen=True)
class Executed:
    """What ``execute_job`` did: the gate's ``verdict`` (None: not gated or nothing ran), what
    the units phase ``ran`` (None: no unit was runnable or nothing ran), what the model calls
    spent (``spending``; None when nothing ran), whether SIGTERM or Ctrl-C ``interrupted`` it and
    the launch's ``images`` (``raydist.cluster.run_images.images_record``; None when the engine did
    not answer at the end)."""

    verdict: GateResult | None = None
    ran: Ran | None = None
    spending: Spending | None = None
    interrupted: bool = False
    images: dict | None = None


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
    provider, base_image = _docker(job)
    before = Before(provider.client)
    if not todo.units:
        return Executed(images=_images(provider.client, job, base_image, before))
    signal.signal(signal.SIGTERM, raise_interrupt)
    try:
        done = _run_phases(job, todo, base_image, store, gate_store, execute)
    except KeyboardInterrupt:
        print("\ninterrupted: finished rows are kept; run the same command again to resume", file=sys.stderr,
              flush=True)
        done = Executed(interrupted=True)
    finally:
        _shutdown_ray()
        _sweep_at_end(provider)
    return replace(done, images=_images(provider.client, job, base_image, before))


def _images(client, job: Job, base_image: str, before: Before) -> dict | None:
    """The launch's image record, or None (said on stderr) when the engine does not answer now:
    the rows are written and the tables still to compile."""
    try:
        return images_record(client, job, base_image, before)
    except Exception as exc:
        if classify_exception(exc)[1] != "docker":
            raise
        print(f"the Docker daemon did not answer when the launch's images were measured ({type(exc).__name__}); "
              "images.json is not written", file=sys.stderr, flush=True)
        return None


def _run_phases(job: Job, todo: Pending, base_image: str, store, gate_store,
                execute: Callable[..., dict] | None) -> Executed:
    """images -> views -> gate -> units on Ray for the units of ``todo``."""
    dashboard = init_ray(job.ray)
    if dashboard:
        print(f"Ray dashboard: {dashboard} (units' tasks are named <instance_id>/<level>/s<seed>/<key>)", flush=True)
    interrupt_on_signals()  # also while it waits on Ray for a preparation or a unit
    try:
        check_capacity(job.ray)
    except ClusterTooSmall as exc:
        raise ClusterRefused(str(exc)) from exc
    settings = replace(job.settings, sandbox=replace(job.settings.sandbox, base_image=base_image))
    built = Images(settings, build_images((*todo.units, *todo.gate_units), job.instances, settings, job.ray))
    try:  # a model no node can hold is refused before anything is served
        servers = ModelServers(job.budget, max_calls=job.ray.max_concurrency,
                               models=(job.model, job.view_model, job.judge))
    except ModelServerError as exc:
        raise ClusterRefused(str(exc)) from exc
    sink, gate_sink = RowSink(store), RowSink(gate_store) if gate_store is not None else None
    verdict: GateResult | None = None
    ran: Ran | None = None
    try:
        with servers:
            prepared = views(job, (*todo.units, *todo.gate_units), settings, servers)
            ready = runnable(job, todo.units, built, prepared, sink)
            if job.gate is not None and gate_sink is not None:
                verdict = gate(job, {view_of(u) for u in ready.units}, todo.gate_units, settings, prepared, gate_sink)
                bad = verdict.views()
                ready = Runnable(tuple(u for u in ready.units if view_of(u) not in bad), ready.prepared, ready.held)
            if ready.units:
                ran = units(job, ready, settings, servers, sink, already_done=len(job.units) - len(todo.units),
                            execute=execute)
            spending = servers.spending(job.units, (*ready.held, *(ran.not_started if ran else ())))
    except ModelServerError as exc:
        raise _server_failure(exc) from exc
    return Executed(verdict, ran, spending)


def _server_failure(exc: Exception) -> InfrastructureError:
    """One line for a model server that did not start: its first line names the server, how it
    failed and its log file (the log's last lines stay in the log)."""
    first = str(exc).strip().splitlines()[0].removesuffix(", last lines:") if str(exc).strip() else type(exc).__name__
    return InfrastructureError(f"the model server did not start: {first}; read its log, then check the local_models "
                               "entry's command (llama.cpp needs pip install 'raydist[local]')", cause="model_server")


def _docker(job: Job):
    """The sandbox provider (``raydist.sandbox.SandboxProvider``) and the base image tag;
    ``InfrastructureError`` when either is missing, ``ClusterRefused`` (exit status 2) when the
    provider cannot enforce ``sandbox.limits`` on its host (``SandboxProvider.check``)."""
    try:
        client = job.settings.sandbox.connect()
        base_image = ensure_base_image(client, job.settings.sandbox.base_image)
    except SandboxUnavailable as exc:
        raise InfrastructureError(str(exc), cause="docker") from exc
    except BaseImageMissing as exc:
        raise InfrastructureError(str(exc), cause="base_image_missing") from exc
    try:  # a provider that cannot enforce the limits (rootless Podman on cgroup v1) runs nothing
        client.check(job.settings.sandbox.limits)
    except ValueError as exc:
        raise ClusterRefused(str(exc)) from exc
    removed = client.sweep_orphans()
    if removed:
        print(f"removed {removed} containers left by an earlier run that was killed", flush=True)
    return client, base_image


def _sweep_at_end(provider: SandboxProvider) -> None:
    """Remove the containers of this launch's ended workers. A Docker daemon that does not answer
    now (restarted while the last units ended) is said on stderr, not raised: the rows are
    written and the tables still to compile, and the next launch's sweep removes what is left."""
    try:
        provider.sweep_orphans()
    except Exception as exc:
        if classify_exception(exc)[1] != "docker":
            raise
        print(f"the Docker daemon did not answer the final clean-up ({type(exc).__name__}); the next launch "
              "removes any container left", file=sys.stderr, flush=True)


def _shutdown_ray() -> None:
    import ray  # deferred: importing Ray is heavy and reads the launcher's environment defaults

    if ray.is_initialized():
        ray.shutdown()
