"""Run a plan on Ray: image builds first, then units with a bounded number in flight.

Ray stays at this edge: the remote functions below only call plain Python
(``raydist.cluster.unit.execute_unit``, ``raydist.sandbox.ensure_instance_image``). Each
finished unit's row is written by the driver the moment it arrives, so killing the driver
loses at most the units in flight, which the next launch runs again.

``UnitProgress`` is the bar of units across the cluster: done of planned, running, failed,
resolved, and the rate and ETA of this launch (tqdm, to stderr). Its counts are kept as the
rows arrive (constant work per row, never a pass over all rows), and it is redrawn at most
every ``mininterval`` seconds, so a sweep of 10,000 fast units does not spend its time drawing.
"""

from __future__ import annotations

import heapq
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tqdm import tqdm

from raydist.cluster.failures import Failure, error_row, task_failure
from raydist.cluster.prepare import run_preparation
from raydist.cluster.unit import UnitSettings, error_fields, execute_unit
from raydist.cluster.unit_key import RunUnit
from raydist.outcomes import ERRORS, RESOLVED, RetryPolicy, classify_exception
from raydist.sandbox import connect, ensure_instance_image

if TYPE_CHECKING:
    from raydist.models import ModelEndpoint
    from raydist.tasks import Instance
    from raydist.views import Prepared

DEFAULT_RETRY = RetryPolicy()
"""The default ``retry`` of ``run_units``: ``RetryPolicy``'s defaults."""

FAILURE = "__raydist_failure__"
"""Key of the dict a preparation task returns instead of a record when it failed."""


@dataclass(frozen=True)
class RayOptions:
    """``cluster``: where units run and how many at once (part of no unit key). Each unit's
    task shows in Ray's dashboard and ``ray list tasks`` under its name (``unit_task_name``)."""

    address: str | None = None
    """null: a local Ray on loopback; ``auto``: the cluster this node belongs to; ``ray://host:10001``:
    Ray Client. A dashboard URL (``http://host:8265``) takes jobs, not drivers: submit the
    launch there with ``ray job submit`` instead."""
    max_concurrency: int = 2
    """Run units in flight at once (at least 1). Above the cluster's slots, the surplus waits in
    Ray's queue and a node starts its next unit as one ends, without the driver's round trip."""
    cpus_per_unit: float = 0.5
    """Ray CPU reservation of one unit (the container has its own limit); above 0."""
    image_build_cpus: float = 1.0
    """Ray CPU reservation of one image build."""
    sandbox_resource: str = "sandbox"
    """Custom Ray resource of the nodes that run Docker work (``launch/ray_start.sh`` and a local
    Ray advertise ``sandbox``, one per CPU); units, image builds and view preparations ask for it."""
    sandbox_per_unit: float = 1.0
    """How much of ``sandbox_resource`` one unit holds (0: ask for none, for a cluster that does
    not advertise it); a launch whose cluster has no node with it fails at once, naming it."""
    dashboard: bool = False
    """A local Ray (no ``address``) also starts Ray's dashboard, on 127.0.0.1 only."""
    worker_lease_s: float = 60.0
    """Seconds the driver may keep a node's Ray worker for its next queued unit (above 0; ``hold_worker_leases``)."""

    def __post_init__(self) -> None:
        address = self.address if isinstance(self.address, str) else ""
        if address.startswith(("http://", "https://")):
            raise ValueError(
                f"cluster.address={address}: that is the Ray dashboard (job submission) address, which runs "
                f"jobs, not drivers; submit the launch to it: `ray job submit --address {address} "
                "--working-dir . -- python -m raydist.launch cluster=remote` (or raydist.launch_problems), or "
                "give cluster.address=auto on a node of the cluster, or ray://<head>:10001 (Ray Client)")
        if int(self.max_concurrency) < 1:
            raise ValueError(f"cluster.max_concurrency={self.max_concurrency}: must be at least 1")
        if float(self.cpus_per_unit) <= 0:
            raise ValueError(f"cluster.cpus_per_unit={self.cpus_per_unit}: must be above 0")
        if not float(self.worker_lease_s) > 0:
            raise ValueError(f"cluster.worker_lease_s={self.worker_lease_s}: must be above 0 (seconds)")
        if self.sandbox_resource in RAY_RESOURCES or not self.sandbox_resource:
            raise ValueError(f"cluster.sandbox_resource={self.sandbox_resource!r}: name a custom resource, not one "
                             f"of Ray's own ({', '.join(RAY_RESOURCES)})")
        amount = float(self.sandbox_per_unit)
        if amount < 0 or (amount > 1 and not amount.is_integer()):
            raise ValueError(f"cluster.sandbox_per_unit={self.sandbox_per_unit}: 0, a fraction below 1 or a whole "
                             "number (Ray's rule for resource amounts)")

    def sandbox(self, cpus: float) -> dict:
        """Ray ``.options()`` of a task that holds ``cpus`` CPUs and one unit's sandbox share."""
        resources = {self.sandbox_resource: float(self.sandbox_per_unit)} if self.sandbox_per_unit else {}
        return {"num_cpus": cpus, "resources": resources}


#: Resource names Ray defines itself; a sandbox resource must be another.
RAY_RESOURCES = ("CPU", "GPU", "memory", "object_store_memory")


class ClusterTooSmall(RuntimeError):
    """No live node of the connected Ray cluster offers what one unit asks for."""


def init_ray(options: RayOptions) -> str | None:
    """Start or join Ray once per process: join ``options.address`` when it is set, else start
    a new local instance (``address="local"``), never a cluster that happens to run on this
    machine (a ``ray start --head`` or another program's cluster, which a bare ``ray.init()``
    would join). A local instance binds 127.0.0.1 and has no dashboard unless
    ``options.dashboard`` (then on 127.0.0.1, on 8265 or the next free port): on a laptop or CI
    machine nothing listens beyond loopback. Returns the dashboard's URL, or None when
    there is none (or Ray was already initialised)."""
    import ray

    if ray.is_initialized():
        return None
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    hold_worker_leases(options)
    if options.address:
        context = ray.init(address=options.address, log_to_driver=False)
    else:
        # As launch/ray_start.sh does on a CPU node: one sandbox slot per CPU.
        context = ray.init(address="local", include_dashboard=bool(options.dashboard), dashboard_host="127.0.0.1",
                           log_to_driver=False, configure_logging=False,
                           resources={options.sandbox_resource: _local_cpus()})
    url = getattr(context, "dashboard_url", None)
    return f"http://{url}" if url else None


LEASE_ENV = "RAY_worker_lease_timeout_milliseconds"
"""Ray's setting (read from the environment as a Ray process starts): how long a submitter keeps a leased worker."""


def hold_worker_leases(options: RayOptions) -> None:
    """Let this driver keep a node's Ray worker for up to ``options.worker_lease_s`` while
    more tasks of the same kind wait in its queue (``LEASE_ENV``, set in this process before
    ``ray.init``; a local Ray's own processes inherit it).

    Why: Ray's default (0.5 s) returns the worker after every longer task, and the next task
    for that node needs a new lease through the driver's raylet (about 0.1 s on loopback with
    the slot idle): ``bench/scheduling.py`` ``nodes`` measured 2 and 3 nodes at 0.91 and 0.86
    scaling efficiency with it, 0.99 or more with 60 s. The cost: other work for that node
    (another launch's, or this driver's tasks of another kind) waits up to ``worker_lease_s``
    plus one task. It applies only while more tasks are in flight than free slots; else each
    worker goes back as its task ends. A Ray Client driver (``ray://``) ignores it."""
    os.environ[LEASE_ENV] = str(max(1, round(float(options.worker_lease_s) * 1000)))


def _local_cpus() -> int:
    """CPUs this process may use (its affinity where the OS has one): Ray's own default count."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def check_capacity(options: RayOptions) -> None:
    """Raise ``ClusterTooSmall`` naming the setting unless the connected cluster can run a
    unit: some live node has both a unit's CPUs (``cpus_per_unit``) and its sandbox share
    (``sandbox_per_unit`` of ``sandbox_resource``), and the cluster has ``cpus_per_unit`` and
    ``image_build_cpus`` CPUs in all. Without this, Ray would queue every unit forever. The
    message names the missing resource and the nodes' totals (a model server's room:
    ``raydist.cluster.serving.check_placeable``)."""
    import ray

    nodes = [n.get("Resources", {}) for n in ray.nodes() if n.get("Alive")]
    need = {"CPU": float(options.cpus_per_unit)}
    if options.sandbox_per_unit:
        need[options.sandbox_resource] = float(options.sandbox_per_unit)
    total = ray.cluster_resources()
    if not any(all(node.get(name, 0) >= amount for name, amount in need.items()) for node in nodes):
        missing = [name for name, amount in need.items() if not any(node.get(name, 0) >= amount for node in nodes)]
        name = (missing or [options.sandbox_resource])[0]
        raise ClusterTooSmall(
            f"no node of the Ray cluster has {need.get(name, 0):g} {name!r} for one unit (the cluster has "
            f"{total.get(name, 0):g} in all, over {len(nodes)} live node(s)); needed per unit: "
            + ", ".join(f"{amount:g} {n}" for n, amount in need.items())
            + ". Start Docker nodes with `launch/ray_start.sh worker` (it advertises 'sandbox', one per CPU), "
              "or set cluster.sandbox_resource / cluster.sandbox_per_unit (0: ask for none) to what the cluster "
              "offers")
    cpus = total.get("CPU", 0)
    for key, amount in (("cluster.cpus_per_unit", options.cpus_per_unit),
                        ("cluster.image_build_cpus", options.image_build_cpus)):
        if amount > cpus:
            raise ClusterTooSmall(f"{key}={amount} but the Ray cluster has {cpus:g} CPUs: no unit could ever be "
                                  "scheduled")


def node_fields() -> dict:
    """``{"node", "node_ip"}`` of the Ray node this code runs on: its id (as ``ray list
    nodes`` and ``ray logs --node-id`` take it) and its IP address (to reach it)."""
    import ray

    return {"node": ray.get_runtime_context().get_node_id(), "node_ip": ray.util.get_node_ip_address()}


def raise_interrupt(signum, frame):  # noqa: ARG001 - a signal handler's signature
    """Signal handler: stop the driver as Ctrl-C does (``KeyboardInterrupt``)."""
    raise KeyboardInterrupt


def interrupt_on_signals() -> None:
    """Make Ctrl-C and SIGTERM raise ``KeyboardInterrupt`` in the driver again: ``ray.init``
    installs handlers of its own, and a launch waiting on Ray must still stop cleanly."""
    import signal

    signal.signal(signal.SIGTERM, raise_interrupt)
    signal.signal(signal.SIGINT, raise_interrupt)


def _remote_unit():
    import ray

    @ray.remote(max_retries=0)
    def run_unit(execute, unit: RunUnit, instance: Instance, settings: UnitSettings,
                 endpoint: ModelEndpoint | None, prepared) -> dict:
        return {**execute(unit, instance, settings, endpoint, prepared), **node_fields()}

    return run_unit


def _remote_prepare():
    import ray

    @ray.remote(max_retries=0)
    def prepare(task, instance: Instance, options, endpoint: ModelEndpoint | None,
                settings: UnitSettings) -> dict:
        try:
            return run_preparation(task, instance, options, endpoint=endpoint, provider=settings.sandbox.provider,
                                   docker_host=settings.sandbox.docker_host,
                                   base_image=settings.sandbox.base_image, cache_dir=settings.cache_dir,
                                   limits=settings.sandbox.limits, grading_timeout_s=settings.sandbox.grading_timeout_s,
                                   image_namespace=settings.sandbox.image_namespace)
        except Exception as exc:  # noqa: BLE001 - classified here, where the exception still exists
            return {FAILURE: error_fields(exc)}

    return prepare


def run_bounded(remote, items: Sequence, args_of: Callable[[object], tuple], limit: int,
                on_result: Callable[[object, object, str | None], float | None],
                on_running: Callable[[int], None] | None = None,
                stop: Callable[[], object] | None = None,
                options_of: Callable[[object], dict] | None = None) -> list:
    """Run ``remote.remote(*args_of(item))`` for every item of ``items`` on Ray, in order, with
    at most ``limit`` (>= 1 used) in flight: the one bounded-concurrency loop of every stage
    (agent runs, view preparation, DyCodeEval generation and evaluation).

    ``on_result(item, result, error)`` is called in the driver as each task finishes, in
    finishing order: ``error`` is None on success, else ``"Type: message"`` of what the task
    raised (the Ray wrapper unwrapped; at most 4000 characters) and ``result`` None. A
    failure never stops the loop: the other items go on. When ``on_result`` returns a number
    of seconds (not None), the item runs again once that time has passed (the caller bounds
    how often: ``raydist.outcomes.RetryPolicy``); meanwhile other items use the slot.
    ``on_running(n)`` gets the number in flight after each round of submissions.

    ``stop()`` is asked before each submission (e.g. ``raydist.models.admission.Admission.spent``);
    once it returns something true, nothing more is submitted (retries waiting included) and
    the tasks in flight finish. Returns the items left, in order: never submitted, or waiting
    for a retry when it stopped ([] when every item ran to its end).
    ``options_of(item)``: the Ray ``.options()`` of the item's task, e.g. its ``name`` (as the
    dashboard and ``ray list tasks`` show it) and resources (None: ``remote`` as given).

    Work per item is constant (at most ``limit`` references are held, each dropped once its
    result is read), so a sweep of N items costs O(N) in the driver.
    """
    import ray

    pending = list(items)
    pending.reverse()
    # (not before, order, item): re-queued items, a heap, so that many retries waiting at once
    # (a lost node's units) cost log(n) each, not a scan per round
    waiting: list[tuple[float, int, object]] = []
    in_flight: dict = {}
    order = 0
    stopped = False
    while pending or in_flight or waiting:
        if stopped and not in_flight:
            break
        now = time.monotonic()
        due = []
        while waiting and waiting[0][0] <= now:
            due.append(heapq.heappop(waiting)[2])
        pending.extend(reversed(due))  # retries go first, earliest first: their slot was theirs
        while not stopped and pending and len(in_flight) < max(1, int(limit)):
            if stop is not None and stop():
                stopped = True
                break
            item = pending.pop()
            task = remote if options_of is None else remote.options(**options_of(item))
            in_flight[task.remote(*args_of(item))] = item
        if on_running:
            on_running(len(in_flight))
        next_due = waiting[0][0] if waiting else None
        timeout = None if next_due is None else max(0.0, next_due - time.monotonic())
        if stopped:
            timeout = None  # nothing waits for its retry any more: only the tasks in flight
        if not in_flight:
            time.sleep(timeout or 0.0)
            continue
        ready, _ = ray.wait(list(in_flight), num_returns=1, timeout=timeout)
        for ref in ready:
            item = in_flight.pop(ref)
            try:
                result = ray.get(ref)
            except Exception as exc:  # noqa: BLE001 - reported per item, the rest go on
                cause = getattr(exc, "cause", None) or exc
                delay = on_result(item, None, f"{type(cause).__name__}: {cause}"[:4000])
            else:
                delay = on_result(item, result, None)
            if isinstance(delay, (int, float)) and not isinstance(delay, bool):
                order += 1
                heapq.heappush(waiting, (time.monotonic() + float(delay), order, item))
    left = {id(item) for item in pending} | {id(w[2]) for w in waiting}
    return [item for item in items if id(item) in left]


def run_preparations(tasks: Sequence, instances: Mapping[str, Instance], options, endpoint: ModelEndpoint | None,
                     settings: UnitSettings,
                     ray_options: RayOptions, on_record: Callable[[object, dict | None, Failure | None], None],
                     stop: Callable[[], object] | None = None) -> list:
    """Run view preparations (``raydist.cluster.prepare``) with at most
    ``ray_options.max_concurrency`` in flight; ``on_record(task, record, failure)`` gets each
    result at once (``failure``: None, or a ``raydist.cluster.failures.Failure`` classified by
    ``raydist.outcomes``, ``record`` then None; a task that died is an infrastructure error).
    ``stop``: as in ``run_bounded``; returns the tasks it kept from starting."""
    resources = ray_options.sandbox(ray_options.cpus_per_unit)

    def on_result(task, result, error):
        if error is not None:
            on_record(task, None, task_failure(error))
        elif isinstance(result, dict) and FAILURE in result:
            on_record(task, None, Failure.of(result[FAILURE]))
        else:
            on_record(task, result, None)

    return run_bounded(_remote_prepare(), tasks,
                       lambda task: (task, instances[task.instance_id], options, endpoint, settings),
                       ray_options.max_concurrency, on_result, stop=stop,
                       options_of=lambda task: {**resources, "name": f"prepare {task.kind} {task.instance_id} "
                                                                     f"s{task.seed}"})


def _remote_image():
    import ray

    @ray.remote(max_retries=0)
    def build_image(recipe, provider, docker_host, base_tag, cache_dir) -> str:
        return ensure_instance_image(connect(provider, docker_host), recipe, base_tag=base_tag,
                                     cache_dir=Path(cache_dir)).tag

    return build_image


def build_images(units: Sequence[RunUnit], instances: Mapping[str, Instance], settings: UnitSettings,
                 options: RayOptions) -> dict[str, Failure]:
    """Build (or find) every instance image ``units`` need (one per recipe of their
    ``instances``) before any agent runs, in parallel.

    Returns ``{recipe_key: Failure}`` for recipes that failed
    (``raydist.outcomes.classify_exception`` of what the build raised); their units then
    record that error instead of each retrying the build."""
    import ray

    recipes = {}
    for unit in units:
        recipe = instances[unit.instance_id].recipe
        if recipe is not None:
            recipes.setdefault(recipe.key(), recipe)
    build, resources = _remote_image(), options.sandbox(options.image_build_cpus)
    sandbox = settings.sandbox
    refs = {key: build.options(**resources, name=f"image {key}").remote(r, sandbox.provider, sandbox.docker_host,
                                                                        sandbox.base_image, settings.cache_dir)
            for key, r in recipes.items()}
    failed = {}
    for key, ref in refs.items():
        try:
            ray.get(ref)
        except Exception as exc:  # noqa: BLE001 - reported per recipe, the rest go on
            cause = getattr(exc, "cause", None) or exc
            outcome, error_cause = classify_exception(cause)
            failed[key] = Failure(outcome, error_cause,
                                  f"instance image could not be built: {type(cause).__name__}: {cause}")
    return failed


class UnitProgress:
    """Counts units as their last row arrives; ``failed`` counts rows whose ``outcome`` is an
    error (``raydist.outcomes.ERRORS``: input, infrastructure, bug), ``resolved`` the resolved,
    ``running`` the Ray tasks in flight (``running(n)``, from the scheduler). tqdm's rate and
    ETA count only this launch's units (those ``already_done`` are its ``initial``)."""

    def __init__(self, total: int, already_done: int = 0, desc: str = "units", errors: int = 0,
                 mininterval: float = 0.5, file=None):
        """``already_done`` units count as done, ``errors`` of them as failed; ``file``: the
        stream (default stderr)."""
        self.failed = errors
        self.resolved = 0
        self._running = 0
        self.bar = tqdm(total=total, initial=already_done, desc=desc, unit="unit", dynamic_ncols=True,
                        mininterval=mininterval, file=file)
        self._refresh(force=True)

    @property
    def done(self) -> int:
        """Units with their last row (this launch's and those done before)."""
        return int(self.bar.n)

    def running(self, n: int) -> None:
        """``n`` units are in flight now (the scheduler says so after each round of
        submissions); redrawn when ``mininterval`` has passed since the last drawing."""
        if n != self._running:
            self._running = n
            due = time.time() - self.bar.last_print_t >= self.bar.mininterval
            self._refresh(force=due)

    def finished(self, row: dict) -> None:
        """The last row of a unit arrived (an error to be retried is not its last). The count
        in flight is left to ``running``: the scheduler submits the next unit at once, so
        counting this one off here would show one unit fewer than run whenever it draws."""
        self.failed += 1 if row.get("outcome") in ERRORS else 0
        self.resolved += 1 if row.get("outcome") == RESOLVED else 0
        self._refresh()
        self.bar.update(1)  # draws when mininterval has passed since the last drawing

    def _refresh(self, force: bool = False) -> None:
        self.bar.set_postfix(running=self._running, failed=self.failed, resolved=self.resolved, refresh=force)

    def close(self) -> None:
        """Draw the final counts and release the line."""
        self._refresh(force=True)
        self.bar.close()


def run_units(
    units: Sequence[RunUnit],
    instances: Mapping[str, Instance],
    settings: UnitSettings,
    endpoint: ModelEndpoint | None,
    options: RayOptions,
    on_row: Callable[[dict], None],
    progress=None,
    prepared: Mapping[str, Prepared | None] | None = None,
    execute: Callable[..., dict] = execute_unit,
    stop: Callable[[], object] | None = None,
    retry: RetryPolicy = DEFAULT_RETRY,
) -> list[RunUnit]:
    """Run ``units`` with at most ``options.max_concurrency`` in flight; ``on_row`` gets
    each row at once, with the ``node`` and ``node_ip`` that ran it (``node_fields``);
    ``prepared`` maps a unit's key to its ``raydist.views.Prepared`` (L1/L4 inputs);
    ``progress`` (a ``UnitProgress``) counts the units as they end and
    is closed when they all did, or on an error or interrupt.
    ``execute(unit, instance, settings, endpoint, prepared) -> row`` is what each Ray task
    runs (``raydist.cluster.unit.execute_unit``). Each task holds ``options.cpus_per_unit``
    CPUs and ``options.sandbox_per_unit`` of ``options.sandbox_resource``; raises
    ``ClusterTooSmall`` before submitting anything when no node has both.

    A unit whose row is an ``infrastructure_error`` (or whose task died: worker killed, node
    lost) runs again after ``retry``'s backoff, at most ``retry.max_attempts``
    times in all; every attempt's row goes to ``on_row`` (the last one stays), with
    ``attempts`` counting the tries. Input errors and bugs never run again. A unit whose node
    is lost mid-run is such a task: it runs again on a node that is left (its error row of
    that attempt names no node: the task never reported back). Each task is named after its
    unit (``unit_task_name``).

    ``stop()`` (e.g. a spent budget, ``raydist.models.admission.Admission.spent``) is asked
    before each unit is submitted; once it says stop, no unit starts. Returns the units that
    never started (no row written: the next launch runs them); a unit waiting for its retry
    keeps the error row of its last attempt."""
    check_capacity(options)
    resources = options.sandbox(options.cpus_per_unit)
    attempts: dict[str, int] = {}

    def finished(unit: RunUnit, row: dict | None, error: str | None) -> float | None:
        if error is not None:
            row = error_row(unit, task_failure(f"run unit task failed: {error}"))
        attempts[unit.key] = attempts.get(unit.key, 0) + 1
        row = {**row, "attempts": attempts[unit.key]}
        delay = retry.delay(attempts[unit.key], row.get("outcome"), row.get("retry_after"))
        on_row(row)
        if delay is not None:
            print(f"  {unit.instance_id} {unit.level} seed {unit.seed}: {row.get('error_cause')} "
                  f"(attempt {attempts[unit.key]} of {retry.max_attempts}); again in {delay:g} s",
                  flush=True)
        elif progress:
            progress.finished(row)
        return delay

    prepared = prepared or {}
    try:
        left = run_bounded(_remote_unit(), units,
                           lambda unit: (execute, unit, instances[unit.instance_id], settings, endpoint,
                                         prepared.get(unit.key)),
                           options.max_concurrency, finished, progress.running if progress else None, stop=stop,
                           options_of=lambda unit: {**resources, "name": unit_task_name(unit)})
    finally:
        if progress:
            progress.close()
    return [unit for unit in left if unit.key not in attempts]


def unit_task_name(unit: RunUnit) -> str:
    """The Ray task name of ``unit``: ``<instance_id>/<level>/s<seed>/<key>``, the name the
    dashboard and ``ray list tasks --filter name=...`` show it under."""
    return f"{unit.instance_id}/{unit.level}/s{unit.seed}/{unit.key}"
