"""The model a launch talks to, for the duration of the launch.

A local model (an entry of ``local_models``) is served by a ``ModelServer`` Ray actor that
raydist starts here and stops when the block exits, also on error or interrupt; a hosted
model needs no server. Scripted agents use no model at all.

The actor supervises its server (``raydist.models.supervisor``): a server that dies or hangs
is restarted, within a bound, possibly on another port. The endpoint names the actor
(``server_name``), so model calls in Ray tasks ask it for the current address. With
``replicas: N`` there are N actors, spread over the nodes, and the endpoint names them all
(``replica_names``): each process routes its calls over them with litellm's Router.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager

from raydist.cluster.scheduler import RayOptions, init_ray
from raydist.cluster.served import ServedModel
from raydist.models.admission import Admission, Budget, UsageTotals
from raydist.models.endpoint import ModelEndpoint
from raydist.models.pricing import register_local_model
from raydist.models.process import DEFAULT_HOST, ModelServerError
from raydist.models.supervisor import supervisor_policy
from raydist.results.budget import Spending


@contextmanager
def serve_model(model: str, model_cfg: dict | None) -> Iterator:
    """Yield the ``ModelEndpoint`` of ``model`` (agents and view preparation use it).

    ``model_cfg`` is the ``local_models`` entry (command, model_path, grammar_server,
    num_cpus, num_gpus, startup_timeout_s, and optionally host, health_path, liveness_path,
    ``supervisor``: fields of ``SupervisorPolicy``, and ``replicas``: how many servers, each
    with its own CPUs or GPUs, spread over the nodes by a Ray placement group; requests then
    go through litellm's Router over them, ``raydist.models.router``), an entry with only
    ``litellm_model`` and ``api_base`` for an OpenAI-compatible server that already runs (its
    ``grammar_server`` defaults to ``none``), or None for a hosted litellm model; in the
    command, ``{python}`` is this interpreter and ``{host}``, ``{port}``, ``{model_path}``
    and ``{llama_server}`` (``raydist.models.llama_server``) are filled in by the server actor. Raises
    ``ModelServerError`` with the server's log tail when a local server does not start, and
    naming the entry when the cluster has too few GPUs or CPUs for it (``check_placeable``)."""
    if model_cfg is None:
        yield ModelEndpoint(litellm_model=model)
        return
    if model_cfg.get("api_base") and not model_cfg.get("command"):
        # An OpenAI-compatible server someone else runs: reached as is, nothing to start.
        yield ModelEndpoint(litellm_model=model_cfg["litellm_model"], api_base=model_cfg["api_base"], local=True,
                            grammar_server=model_cfg.get("grammar_server", "none"))
        return
    import ray

    replicas = replica_count(model, model_cfg)
    check_placeable(model, model_cfg)  # a launch asked this before serving anything (ModelServers)
    base = f"raydist-model-server-{uuid.uuid4().hex[:12]}"  # unique: several launches may share a cluster
    names = [base] if replicas == 1 else [f"{base}-r{i}" for i in range(replicas)]
    namespace = ray.get_runtime_context().namespace
    group = None if replicas == 1 else _spread_group(model, model_cfg, replicas)
    servers = []
    try:
        actors = [_server_actor(name, namespace, model_cfg, group, i) for i, name in enumerate(names)]
        command, arguments = server_command(model_cfg), server_arguments(model, model_cfg)
        servers = [actor.remote(command, **arguments) for actor in actors]
        api_bases = ray.get([server.start.remote() for server in servers])
        register_local_model(model_cfg["litellm_model"])
        yield ModelEndpoint(
            litellm_model=model_cfg["litellm_model"], api_base=api_bases[0], local=True,
            grammar_server=model_cfg.get("grammar_server", "llama_cpp"),
            server_name=names[0] if replicas == 1 else None, server_namespace=namespace,
            replica_names=() if replicas == 1 else tuple(names),
        )
    finally:
        _stop(servers)
        if group is not None:
            ray.util.remove_placement_group(group)


SERVER_RUNTIME_ENV = {"env_vars": {"RAY_worker_niceness": "0"}}
"""Runtime environment of a server actor: its worker, and the server it forks, run at nice 0.

Ray starts every worker at nice 15 (its ``worker_niceness`` setting), below the raylet, the
Docker daemon and the driver; a model server forked from such a worker would compute at the
same low priority as the units' own work. llama.cpp's threads wait for each other at every
layer, so any process that takes a core for a moment stalls the whole batch. With nice 0 the
server keeps its cores while the units (still at 15) fill the moments it waits. This is what
Ray's job manager does for a job's supervisor actor (``ray.dashboard.modules.job.job_manager``);
starting a worker at the raylet's own priority needs no privilege."""


@contextmanager
def serve_for_command(model: str, model_cfg: dict | None, ray_options=None) -> Iterator:
    """``serve_model`` for a command that runs outside a launch (the recall probe, the fresh
    task builder): a ``local_models`` entry with a server ``command`` gets a local Ray first
    (``raydist.cluster.scheduler.init_ray`` with ``ray_options``, default ``RayOptions()``) to run
    its server actor; any other model is reached as it is. Yields the ``ModelEndpoint``."""
    if model_cfg is not None and model_cfg.get("command"):
        init_ray(ray_options or RayOptions())
    with serve_model(model, model_cfg) as endpoint:
        yield endpoint


def _server_actor(name: str, namespace: str, model_cfg: dict, group, index: int):
    """``ModelServer`` with its Ray options: its name, CPUs and GPUs, ``SERVER_RUNTIME_ENV``,
    and with replicas its bundle of the placement group."""
    options = {"name": name, "namespace": namespace, "num_cpus": model_cfg.get("num_cpus", 1),
               "num_gpus": model_cfg.get("num_gpus", 0), "runtime_env": SERVER_RUNTIME_ENV}
    if group is not None:
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        options["scheduling_strategy"] = PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=index)
    from raydist.models.server import ModelServer  # deferred: ray

    return ModelServer.options(**options)


def _stop(servers: list) -> None:
    import ray

    stops = [server.stop.remote() for server in servers]
    for ref in stops:
        try:
            ray.get(ref, timeout=30)
        except Exception:  # noqa: BLE001 - the actor is killed below either way
            pass
    for server in servers:
        ray.kill(server)


def _spread_group(model: str, model_cfg: dict, replicas: int):
    """A Ray placement group of ``replicas`` bundles (the entry's CPUs and GPUs each), SPREAD
    over the nodes (Ray packs them onto fewer nodes only when the others lack room); waits up to
    the entry's ``startup_timeout_s`` for room. Raises ``ModelServerError`` naming the entry when
    the cluster has none."""
    from ray.util.placement_group import placement_group

    bundle = {"CPU": float(model_cfg.get("num_cpus", 1)), "GPU": float(model_cfg.get("num_gpus", 0))}
    bundle = {key: value for key, value in bundle.items() if value > 0} or {"CPU": 0.001}
    group = placement_group([dict(bundle) for _ in range(replicas)], strategy="SPREAD")
    timeout = float(model_cfg.get("startup_timeout_s", 180))
    if not group.wait(timeout_seconds=timeout):
        import ray

        ray.util.remove_placement_group(group)
        raise ModelServerError(f"local_models.{model}: {replicas} replicas of {bundle} could not be placed on the "
                               f"Ray cluster within {timeout:g} s (startup_timeout_s); it has "
                               f"{ray.available_resources()} free: lower replicas or free the resources")
    return group


def replica_count(model: str, model_cfg: dict) -> int:
    """``local_models.<model>.replicas``: how many servers of the entry a launch starts
    (default 1). Raises ``ModelServerError`` naming the entry unless it is an integer >= 1."""
    value = model_cfg.get("replicas", 1)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ModelServerError(f"local_models.{model}.replicas={value!r}: give a whole number of servers, at least 1")
    return value


def check_placeable(model: str, model_cfg: dict) -> None:
    """Refuse, before anything starts, a ``local_models`` entry whose ``replicas`` x ``num_gpus``
    (or x ``num_cpus``) exceed what the connected Ray cluster has in all (a vLLM entry on a
    machine without a GPU would otherwise wait for one forever).

    Raises:
        ModelServerError: names the entry, what it needs and the cluster's total.
    """
    import ray

    replicas = replica_count(model, model_cfg)
    total = ray.cluster_resources()
    for key, resource in (("num_gpus", "GPU"), ("num_cpus", "CPU")):
        each = float(model_cfg.get(key, 1 if key == "num_cpus" else 0) or 0)
        have = float(total.get(resource, 0))
        if each * replicas > have:
            times = f" x replicas={replicas}" if replicas > 1 else ""
            raise ModelServerError(
                f"local_models.{model}: {key}={each:g}{times} but the Ray cluster has {have:g} {resource}s in all; "
                f"serve it on a cluster with {resource}s (cluster=remote) or lower {key}")


class ModelServers:
    """The models a launch serves, each started on first use and stopped by ``release`` or
    when the ``with`` block ends (also on error or interrupt), and the launch's spending on
    them: every endpoint handed out reports its calls to one
    ``raydist.models.admission.Admission`` (the ``budget`` ledger and each model's calls in
    flight, at most ``max_calls``), opened with the first endpoint, so a launch that calls no
    model starts no ledger.

    Every model of ``models`` that raydist starts (its ``local_models`` entry has a
    ``command``) is first checked to fit the connected cluster (``check_placeable``: raises
    ``ModelServerError`` naming the entry), before anything is served."""

    def __init__(self, budget: Budget | None = None, *, max_calls: int = 1,
                 models: Iterable[ServedModel | None] = ()) -> None:
        from contextlib import ExitStack

        for model in models:
            if model is not None and model.local is not None and model.local.get("command"):
                check_placeable(model.name, dict(model.local))
        self.budget, self.max_calls = budget or Budget(), int(max_calls)
        self.admission: Admission | None = None
        self._stacks: dict[str, ExitStack] = {}
        self._endpoints: dict[str, ModelEndpoint] = {}

    def __enter__(self) -> ModelServers:
        return self

    def __exit__(self, *exc) -> None:
        for name in list(self._stacks):
            self.release(name)
        if self.admission is not None:
            self.admission.close()

    def endpoint(self, model: ServedModel, purpose: str) -> ModelEndpoint:
        """The ``ModelEndpoint`` of ``model`` (``serve_model`` of its ``local_models`` entry;
        a hosted model's at once), started once, reporting its calls under ``purpose`` (one of
        ``raydist.models.admission.PURPOSES``). Raises ``ModelServerError`` when the server
        does not start."""
        from contextlib import ExitStack

        if self.admission is None:
            self.admission = Admission(self.budget, max_calls=self.max_calls)
        if model.name not in self._endpoints:
            stack = ExitStack()
            self._endpoints[model.name] = stack.enter_context(serve_model(model.name, model.local))
            self._stacks[model.name] = stack
        attached = self.admission.attach(self._endpoints[model.name], purpose)
        assert attached is not None
        return attached

    def spent(self) -> str | None:
        """Why the budget is used up (``Admission.spent``), or None while some is left."""
        return None if self.admission is None else self.admission.spent()

    def spending(self, units: Sequence, not_started: Iterable) -> Spending:
        """The launch's ``Spending``: its ``budget``, what the model calls spent so far (zeros
        before any) and which of ``units`` (``RunUnit``s, in plan order) are among
        ``not_started``, kept from starting by the spent budget (``stopped`` only when some are).
        Read it before the ``with`` block ends (the ledger goes with it)."""
        keys = {u.key for u in not_started}
        left = [{"key": u.key, "name": f"{u.instance_id} {u.level} seed {u.seed}"} for u in units if u.key in keys]
        reason = self.spent() if left else None
        if left:
            print(f"budget: {reason}; {len(left)} units not started (the same command with a larger budget runs "
                  "them)", flush=True)
        totals = UsageTotals().as_dict() if self.admission is None else self.admission.totals()
        return Spending({"usd": self.budget.usd, "tokens": self.budget.tokens}, totals, reason, tuple(left))

    def serving(self, name: str) -> bool:
        """Whether ``name`` has been started and not released."""
        return name in self._stacks

    def release(self, name: str) -> None:
        """Stop ``name``'s server (if it runs), freeing its CPUs or GPU."""
        self._endpoints.pop(name, None)
        stack = self._stacks.pop(name, None)
        if stack is not None:
            stack.close()


def server_command(model_cfg: dict) -> list[str]:
    """The server argv of a ``local_models`` entry: its ``command`` with ``{python}`` made this
    interpreter (so the server runs from raydist's environment) and ``{num_cpus}`` the whole
    CPUs the entry reserves from Ray (``num_cpus``, at least 1: a server's compute threads);
    ``{host}``, ``{port}``, ``{model_path}`` and ``{llama_server}`` stay for the server actor to
    fill in on its node.

    ``{num_cpus}`` exists because a CPU server with more compute threads than the CPUs it holds
    collapses when anything else runs: llama.cpp's threads meet at a barrier after every layer,
    and one descheduled thread stalls the rest. Measured on 2 cores with two competing busy
    processes, Gemma 3 270M generated 0.5 tokens/s with ``--threads 2`` and 17 with
    ``--threads 1`` (50 and 27 on an idle machine); ``bench/serving.py --load`` repeats it."""
    threads = str(max(1, int(float(model_cfg.get("num_cpus") or 1))))
    return [part.replace("{python}", sys.executable).replace("{num_cpus}", threads) for part in model_cfg["command"]]


def server_arguments(model: str, model_cfg: dict) -> dict:
    """The ``ModelServer`` keyword arguments of the ``local_models`` entry ``model``: model path
    (None for the embedded GGUF), the address to bind (``host``: ``DEFAULT_HOST``, loopback,
    unless the entry names one; with 0.0.0.0 the actor advertises its node's IP in
    ``api_base``, so units on other nodes reach the server), start-up timeout (s), health and
    liveness paths, and the supervision policy. Raises ``ModelServerError`` naming the entry when its ``supervisor``
    is not a valid ``SupervisorPolicy``, so a bad key fails here and not inside the actor."""
    policy = supervisor_policy(model, model_cfg)
    model_path = model_cfg.get("model_path")
    return {
        "model_path": None if model_path in (None, "embedded") else model_path,
        "host": model_cfg.get("host") or DEFAULT_HOST,
        "startup_timeout": float(model_cfg.get("startup_timeout_s", 180)),
        "health_path": model_cfg.get("health_path", "/v1/models"),
        "liveness_path": model_cfg.get("liveness_path"),
        "policy": policy,
    }
