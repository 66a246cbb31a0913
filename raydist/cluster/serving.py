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
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from raydist.cluster.scheduler import RayOptions, init_ray
from raydist.models.endpoint import ModelEndpoint
from raydist.models.pricing import register_local_model
from raydist.models.process import DEFAULT_HOST, ModelServerError
from raydist.models.supervisor import SupervisorPolicy


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
    # The entry's own settings are checked before the cluster is asked anything about it.
    command, arguments = server_command(model_cfg), server_arguments(model, model_cfg)
    check_placeable(model, model_cfg)
    base = f"raydist-model-server-{uuid.uuid4().hex[:12]}"  # unique: several launches may share a cluster
    names = [base] if replicas == 1 else [f"{base}-r{i}" for i in range(replicas)]
    namespace = ray.get_runtime_context().namespace
    group = None if replicas == 1 else _spread_group(model, model_cfg, replicas)
    servers = []
    try:
        servers = [_server_actor(name, namespace, model_cfg, group, i).remote(command, **arguments)
                   for i, name in enumerate(names)]
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
    when the ``with`` block ends (also on error or interrupt)."""

    def __init__(self) -> None:
        from contextlib import ExitStack

        self._stacks: dict[str, ExitStack] = {}
        self._endpoints: dict[str, object] = {}

    def __enter__(self) -> ModelServers:
        return self

    def __exit__(self, *exc) -> None:
        for name in list(self._stacks):
            self.release(name)

    def endpoint(self, name: str, model_cfg: Mapping[str, Any] | None):
        """The ``ModelEndpoint`` of ``name`` (``serve_model``), started once."""
        from contextlib import ExitStack

        if name not in self._endpoints:
            stack = ExitStack()
            self._endpoints[name] = stack.enter_context(serve_model(name, model_cfg))
            self._stacks[name] = stack
        return self._endpoints[name]

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
    interpreter (so the server runs from raydist's environment); ``{host}``, ``{port}``,
    ``{model_path}`` and ``{llama_server}`` stay for the server actor to fill in on its node."""
    return [part.replace("{python}", sys.executable) for part in model_cfg["command"]]


def server_arguments(model: str, model_cfg: dict) -> dict:
    """The ``ModelServer`` keyword arguments of the ``local_models`` entry ``model``: model path
    (None for the embedded GGUF), the address to bind (``host``: ``DEFAULT_HOST``, loopback,
    unless the entry names one; with 0.0.0.0 the actor advertises its node's IP in
    ``api_base``, so units on other nodes reach the server), start-up timeout (s), health and
    liveness paths, and the supervision policy. Raises ``ModelServerError`` naming the entry when its ``supervisor``
    is not a valid ``SupervisorPolicy``, so a bad key fails here and not inside the actor."""
    policy = dict(model_cfg.get("supervisor") or {})
    try:
        SupervisorPolicy(**policy)
    except (TypeError, ValueError) as exc:
        raise ModelServerError(f"local_models.{model}.supervisor={policy}: {exc}; its keys are the fields of "
                               "raydist.models.supervisor.SupervisorPolicy") from exc
    model_path = model_cfg.get("model_path")
    return {
        "model_path": None if model_path in (None, "embedded") else model_path,
        "host": model_cfg.get("host") or DEFAULT_HOST,
        "startup_timeout": float(model_cfg.get("startup_timeout_s", 180)),
        "health_path": model_cfg.get("health_path", "/v1/models"),
        "liveness_path": model_cfg.get("liveness_path"),
        "policy": policy,
    }
