"""The model a launch talks to, for the duration of the launch.

A local model (an entry of ``local_models``) is served by a ``ModelServer`` Ray actor that
raydist starts here and stops when the block exits, also on error or interrupt; a hosted
model needs no server. Scripted agents use no model at all.

The actor supervises its server (``raydist.models.supervisor``): a server that dies or hangs
is restarted, within a bound, possibly on another port. The endpoint names the actor
(``server_name``), so model calls in Ray tasks ask it for the current address.
"""

from __future__ import annotations

import sys
import uuid
from contextlib import contextmanager
from typing import Iterator

from raydist.models.process import DEFAULT_HOST, ModelServerError
from raydist.models.supervisor import SupervisorPolicy


@contextmanager
def serve_model(model: str, model_cfg: dict | None) -> Iterator:
    """Yield the ``ModelEndpoint`` of ``model`` (agents and view preparation use it).

    ``model_cfg`` is the ``local_models`` entry (command, model_path, grammar_server,
    num_cpus, num_gpus, startup_timeout_s, and optionally host, health_path, liveness_path and
    ``supervisor``: fields of ``SupervisorPolicy``), an entry with only ``litellm_model`` and
    ``api_base`` for an OpenAI-compatible server that already runs (its ``grammar_server``
    defaults to ``none``), or None for a hosted litellm model; in the
    command, ``{python}`` is this interpreter and ``{host}``, ``{port}``, ``{model_path}``
    are filled in by the server actor. Raises
    ``ModelServerError`` with the server's log tail when a local server does not start."""
    from raydist.models.endpoint import ModelEndpoint

    if model_cfg is None:
        yield ModelEndpoint(litellm_model=model)
        return
    if model_cfg.get("api_base") and not model_cfg.get("command"):
        # An OpenAI-compatible server someone else runs: reached as is, nothing to start.
        yield ModelEndpoint(litellm_model=model_cfg["litellm_model"], api_base=model_cfg["api_base"], local=True,
                            grammar_server=model_cfg.get("grammar_server", "none"))
        return
    import ray

    from raydist.models.pricing import register_local_model
    from raydist.models.server import ModelServer

    command, arguments = server_command(model_cfg), server_arguments(model, model_cfg)
    name = f"raydist-model-server-{uuid.uuid4().hex[:12]}"  # unique: several launches may share a cluster
    namespace = ray.get_runtime_context().namespace
    server = ModelServer.options(
        name=name, namespace=namespace,
        num_cpus=model_cfg.get("num_cpus", 1), num_gpus=model_cfg.get("num_gpus", 0),
    ).remote(command, **arguments)
    try:
        api_base = ray.get(server.start.remote())
        register_local_model(model_cfg["litellm_model"])
        yield ModelEndpoint(
            litellm_model=model_cfg["litellm_model"], api_base=api_base, local=True,
            grammar_server=model_cfg.get("grammar_server", "llama_cpp"),
            server_name=name, server_namespace=namespace,
        )
    finally:
        try:
            ray.get(server.stop.remote(), timeout=30)
        except Exception:  # noqa: BLE001 - the actor is killed below either way
            pass
        ray.kill(server)


class ModelServers:
    """The models a launch serves, each started on first use and stopped by ``release`` or
    when the ``with`` block ends (also on error or interrupt)."""

    def __init__(self) -> None:
        from contextlib import ExitStack

        self._stacks: dict[str, ExitStack] = {}
        self._endpoints: dict[str, object] = {}

    def __enter__(self) -> "ModelServers":
        return self

    def __exit__(self, *exc) -> None:
        for name in list(self._stacks):
            self.release(name)

    def endpoint(self, name: str, model_cfg: dict | None):
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
    interpreter (so the server runs from raydist's environment); ``{host}``, ``{port}`` and
    ``{model_path}`` stay for the server actor to fill in."""
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
