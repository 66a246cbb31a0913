"""The driver: one launch as a list of phases.

    plan -> pending -> images -> views -> gate -> units -> compile -> report

``raydist.driver.plan.plan_job`` is the plan; ``raydist.driver.phases`` holds the rest up to the units,
``raydist.driver.report`` the last two. Each phase takes frozen values and returns one;
rows are written through one ``RowSink`` per run directory.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable
from dataclasses import replace

from raydist.cluster.scheduler import raise_interrupt
from raydist.cluster.validity import GateResult
from raydist.driver import phases
from raydist.driver.plan import Job, JobError
from raydist.driver.report import compile_tables, exit_status, report
from raydist.outcomes import InfrastructureError
from raydist.results.budget import BUDGET_FILE, Spending


def run_job(job: Job, *, execute: Callable[..., dict] | None = None) -> int:
    """Run the units of ``job`` that are not finished yet, then write ``runs.parquet``,
    ``steps.parquet``, ``preds/`` and ``summary.md`` in ``job.run_dir``, print the
    summary and return the exit status (``raydist.driver.report.exit_status``: 0, 1, 3 or 130),
    and ``budget.json`` (``raydist.results.budget.Spending``): what the model calls spent and
    the units ``job.budget`` kept from starting.

    One launch at a time holds ``job.run_dir`` (``raydist.results.run_dir_lock``): a second
    one raises ``JobError`` at once, naming the directory and the holder's pid. With
    ``job.storage``, the run directories are mirrored there (``raydist._util.storage.mirrored``:
    filled from it first, each row copied as written, everything copied at the end); a storage
    that cannot be written raises ``JobError`` naming ``storage`` before anything runs. SIGTERM and
    Ctrl-C stop scheduling; rows already written stay and the tables are compiled from them.
    Raises ``InfrastructureError`` (one line: what failed, what to do) for Docker that cannot
    be reached, a missing base image, a full disk and a model server that does not start;
    ``JobError`` for a setting the cluster cannot satisfy.

    ``execute`` is what each unit's Ray task runs (``raydist.cluster.scheduler.run_units``;
    None: ``raydist.cluster.unit.execute_unit``, the sandboxed agent and grading)."""
    from raydist._util.storage import StorageError, mirrored, open_storage
    from raydist.results import RunDirBusy, run_dir_lock

    try:
        if job.storage is not None:
            open_storage(job.storage)
        mirrors = {folder: job.mirror(folder) for folder in _run_dirs(job)}
    except StorageError as exc:
        raise JobError(str(exc)) from exc
    try:
        with run_dir_lock(job.run_dir), mirrored(mirrors[job.run_dir], job.run_dir):
            gate_dir = job.gate.store_dir if job.gate is not None else None
            with mirrored(mirrors.get(gate_dir), gate_dir or job.run_dir):
                return _run_locked(job, mirrors, execute)
    except RunDirBusy as exc:
        raise JobError(str(exc)) from exc
    except OSError as exc:  # the storage could not be read or written
        raise _disk_failure(exc) from exc


def _run_dirs(job: Job) -> list:
    """The run directories a launch writes: its own and the validity gate's."""
    return [job.run_dir, *([job.gate.store_dir] if job.gate is not None else [])]


def _run_locked(job: Job, mirrors: dict, execute: Callable[..., dict] | None) -> int:
    from raydist._util.files import atomic_write_text
    from raydist.results import ResultStore

    store = ResultStore(job.run_dir, mirror=mirrors[job.run_dir])
    gate_store = ResultStore(job.gate.store_dir, mirror=mirrors[job.gate.store_dir]) if job.gate is not None else None
    todo = phases.pending(job, store, gate_store)
    print(f"{job.title}: {len(job.units)} units planned, {todo.finished_before} finished before, "
          f"{len(todo.units)} to run; results in {job.run_dir}", flush=True)
    client, base_image = _docker(job)
    interrupted, verdict, ran, spending = False, None, None, None
    if todo.units:
        signal.signal(signal.SIGTERM, raise_interrupt)
        try:
            verdict, ran, spending = _execute(job, todo, base_image, store, gate_store, execute)
        except OSError as exc:
            raise _disk_failure(exc) from exc
        except KeyboardInterrupt:
            interrupted = True
            print("\ninterrupted: finished rows are kept; run the same command again to resume",
                  file=sys.stderr, flush=True)
        finally:
            _shutdown_ray()
            _sweep(client)
    table = compile_tables(job, store, ran)
    if spending is not None:
        spending.write(job.run_dir)
    elif (job.run_dir / BUDGET_FILE).exists():
        (job.run_dir / BUDGET_FILE).unlink()  # nothing ran: an earlier launch's record no longer applies
    text = report(job, table, verdict, interrupted=interrupted, spending=spending)
    atomic_write_text(job.run_dir / "summary.md", text)
    print(text, flush=True)
    return exit_status(table, interrupted=interrupted, spending=spending)


def _execute(job: Job, todo: phases.Pending, base_image: str, store,
             gate_store, execute: Callable[..., dict] | None) -> tuple[GateResult | None, phases.Ran | None,
                                                                         Spending]:
    """images -> views -> gate -> units on Ray; returns the gate's verdict (None: not gated),
    what the units phase ran (None: no unit was runnable) and what the model calls spent.
    Every model call reports to the launch's ledger (``raydist.models.admission``); once
    ``job.budget`` is spent, no view preparation or unit starts."""
    from raydist.cluster.progress import UnitProgress
    from raydist.cluster.scheduler import init_ray, interrupt_on_signals
    from raydist.cluster.serving import ModelServers
    from raydist.models.admission import Admission
    from raydist.models.server import ModelServerError
    from raydist.results.sink import RowSink

    dashboard = init_ray(job.ray)
    if dashboard:
        print(f"Ray dashboard: {dashboard} (units' tasks are named <instance_id>/<level>/s<seed>/<key>)", flush=True)
    interrupt_on_signals()  # also while it waits on Ray for a preparation or a unit
    _check_capacity(job)
    built = phases.images(job, (*todo.units, *todo.gate_units), base_image)
    sink = RowSink(store)
    verdict, ran, held = None, None, ()
    try:
        with ModelServers() as servers, Admission(job.budget, max_calls=job.ray.max_concurrency) as admission:
            view_model = job.view_model
            prepared = phases.views(job, (*todo.units, *todo.gate_units), built.settings,
                                    lambda: admission.attach(servers.endpoint(view_model.name, view_model.local),
                                                             "view"), stop=admission.spent)
            ready = phases.runnable(job, todo.units, built, prepared, sink)
            held = ready.held
            if job.gate is not None:
                verdict = phases.gate(job, {phases.view_of(u) for u in ready.units}, todo.gate_units,
                                      built.settings, prepared, gate_store)
                bad = verdict.views()
                ready = phases.Runnable(tuple(u for u in ready.units if phases.view_of(u) not in bad),
                                        ready.prepared)
            if view_model.name not in (job.model.name, job.judge.name if job.judge else None):
                servers.release(view_model.name)  # free its CPUs (or GPU) for the agents
            if ready.units:
                endpoint = (admission.attach(servers.endpoint(job.model.name, job.model.local), "agent")
                            if built.settings.agent_kind == "llm" else None)
                settings = built.settings
                if job.judge is not None:  # repository questions: the judge scores every answer
                    judge = admission.attach(servers.endpoint(job.judge.name, job.judge.local), "judge")
                    settings = replace(settings, judge=replace(settings.judge, endpoint=judge))
                # The bar starts after preparation and the gate printed theirs.
                already = len(job.units) - len(todo.units)
                progress = UnitProgress(total=len(job.units), already_done=already + sum(sink.counts.values()),
                                        errors=sum(sink.counts.values()))
                try:
                    ran = phases.units(job, ready, settings, endpoint, sink, progress, stop=admission.spent,
                                       execute=execute)
                finally:
                    progress.close()
            spending = _spending(job, admission, (*held, *(ran.not_started if ran else ())))
    except ModelServerError as exc:
        raise _server_failure(exc) from exc
    return verdict, ran, spending


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


def _disk_failure(exc: OSError) -> InfrastructureError:
    """A failed read or write of the host: a full disk says to free space, anything else to check
    the path or connection the error names."""
    from raydist.outcomes import classify_exception

    _, cause = classify_exception(exc)  # disk_full, connection, or the error's type name
    if cause == "disk_full":
        return InfrastructureError(f"{exc}; free space or choose another output_root (finished rows are kept)",
                                   cause=cause)
    return InfrastructureError(f"{exc}; check the path or connection named there (finished rows are kept)",
                               cause=cause)


def _docker(job: Job):
    """The Docker client and the base image tag; ``InfrastructureError`` when either is missing."""
    from raydist.sandbox import BaseImageMissing, SandboxUnavailable, connect, ensure_base_image

    try:
        client = connect(job.settings.docker_host)
        base_image = ensure_base_image(client, job.settings.base_image)
    except SandboxUnavailable as exc:
        raise InfrastructureError(str(exc), cause="docker") from exc
    except BaseImageMissing as exc:
        raise InfrastructureError(str(exc), cause="base_image_missing") from exc
    _sweep(client, announce=True)
    return client, base_image


def _sweep(client, announce: bool = False) -> None:
    from raydist.sandbox import sweep_orphans

    removed = sweep_orphans(client)
    if removed and announce:
        print(f"removed {removed} containers left by an earlier run that was killed", flush=True)


def _check_capacity(job: Job) -> None:
    import ray

    from raydist.cluster.scheduler import ClusterTooSmall, check_capacity

    try:
        check_capacity(job.ray)
    except ClusterTooSmall as exc:
        raise JobError(str(exc)) from exc
    cpus = ray.cluster_resources().get("CPU", 0)
    for key, need in (("cluster.cpus_per_unit", job.ray.cpus_per_unit),
                      ("cluster.image_build_cpus", job.ray.image_build_cpus)):
        if need > cpus:
            raise JobError(f"{key}={need} but the Ray cluster has {cpus:g} CPUs: no unit could ever be scheduled")
    from raydist.cluster.serving import check_placeable
    from raydist.models.server import ModelServerError

    for served in (job.model, job.view_model):
        if served.local is not None and served.local.get("command"):
            try:
                check_placeable(served.name, dict(served.local))
            except ModelServerError as exc:
                raise JobError(str(exc)) from exc


def _shutdown_ray() -> None:
    import ray

    if ray.is_initialized():
        ray.shutdown()
