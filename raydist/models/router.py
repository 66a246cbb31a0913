"""Requests over the replicas of one served model (``local_models.<name>.replicas``).

litellm's ``Router`` does the routing: one deployment per replica that answers now, retries,
a cooldown for a replica whose requests fail, and a fallback to the others. Each process
builds its own Router from the endpoint (``replica_router``) and rebuilds it when the replicas'
supervisors report another set (a replica restarted, possibly on a new port, or one went down).

A conversation sticks to one replica while that replica answers: llama.cpp reuses the KV cache
of the prompt prefix it saw last, so an agent's next call is cheaper on the replica that served
its previous one. The replica is chosen by rendezvous hashing of the conversation's first two
messages over the replicas that answer (``pinned_replica``): the same conversation gets the same
replica in every process, only the conversations of a replica that goes down move, and they
come back when it rejoins. litellm's own session affinity (``optional_pre_call_checks=
["session_affinity"]``) does this only on its async path and only within one Router, so the
pin is made here as a model group of one deployment per replica, with a Router fallback to the
group of all replicas when the pinned one fails.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only: the endpoint module loads litellm
    from raydist.models.endpoint import ModelEndpoint

PLACEHOLDER_KEY = "raydist-local-no-key"  # = endpoint.LOCAL_PLACEHOLDER_KEY; a local server needs none


@dataclass(frozen=True)
class Replica:
    """One replica as its supervisor reports it: the ``ModelServer`` actor's Ray ``name``,
    the ``api_base`` its server answers at now, and how many times it was ``restarts``-ed."""

    name: str
    api_base: str
    restarts: int


@dataclass(frozen=True)
class RouterPolicy:
    """The litellm ``Router`` settings of a replicated model.

    Attributes:
        routing_strategy: litellm's strategy among the replicas of the fallback group;
            "simple-shuffle" (each Router sees only its own process's requests, so a
            "least-busy" count would not see the others').
        num_retries: further attempts the Router makes on a failed request (each on a
            replica that is not cooling down).
        allowed_fails: failures a replica may have per minute before it cools down.
        cooldown_time_s: seconds a failing replica gets no requests (its restart by the
            supervisor ends the cooldown earlier: the rebuilt Router knows it afresh).
    """

    routing_strategy: str = "simple-shuffle"
    num_retries: int = 2
    allowed_fails: int = 0
    cooldown_time_s: float = 10.0


def conversation_key(messages: Sequence[dict]) -> str:
    """Hex sha256 of the role and content of the first two messages (system prompt and first
    user message of an agent's conversation): the same for every call of one conversation."""
    head = [{"role": m.get("role"), "content": m.get("content")} for m in list(messages)[:2]]
    return hashlib.sha256(json.dumps(head, sort_keys=True, default=str).encode()).hexdigest()


def pinned_replica(key: str, names: Sequence[str]) -> str:
    """The replica among ``names`` that conversation ``key`` sticks to: highest random weight
    (rendezvous hashing, Thaler and Ravishankar 1998), so removing a name moves only the keys
    pinned to it. Raises ``ValueError`` when ``names`` is empty."""
    if not names:
        raise ValueError("pinned_replica needs at least one replica name")
    return max(names, key=lambda name: hashlib.sha256(f"{key}\0{name}".encode()).digest())


def pinned_group(litellm_model: str, name: str) -> str:
    """The Router model group holding only replica ``name``."""
    return f"{litellm_model}@{name}"


def model_list(litellm_model: str, replicas: Sequence[Replica]) -> list[dict]:
    """litellm Router deployments of ``replicas``: each once in the group ``litellm_model`` (all
    replicas) and once in its own ``pinned_group``. Deployment ids are
    ``<name>/shared/<restarts>`` and ``<name>/pinned/<restarts>``: a restarted replica is a new
    deployment, with no cooldown left from its previous process."""
    deployments = []
    for replica in replicas:
        params = {"model": litellm_model, "api_base": replica.api_base, "api_key": PLACEHOLDER_KEY}
        deployments.append({"model_name": litellm_model, "litellm_params": dict(params),
                            "model_info": {"id": f"{replica.name}/shared/{replica.restarts}"}})
        deployments.append({"model_name": pinned_group(litellm_model, replica.name), "litellm_params": dict(params),
                            "model_info": {"id": f"{replica.name}/pinned/{replica.restarts}"}})
    return deployments


class ReplicaRouter:
    """``route(model=..., messages=..., **litellm_kwargs)`` like ``litellm.completion``, over the
    replicas ``lookup`` reports.

    Args:
        litellm_model: the model name every replica serves (``openai/<alias>``).
        lookup: ``lookup(wait_s) -> [Replica]``: the replicas that answer now; when none does,
            it waits up to ``wait_s`` seconds for one and raises ``ModelUnreachable`` (or
            ``ModelServerError``) when none came.
        restart_wait_s: longest wait for a replica when none answers, seconds.
        policy: the Router's settings.

    Attributes:
        answered_by: name of the replica that served the last answer (None before the first).
        replicas: the replicas of the current Router.
    """

    def __init__(self, litellm_model: str, lookup: Callable[[float], list[Replica]], *,
                 restart_wait_s: float, policy: RouterPolicy | None = None):
        self.litellm_model = litellm_model
        self.lookup = lookup
        self.restart_wait_s = restart_wait_s
        self.policy = policy or RouterPolicy()
        self.answered_by: str | None = None
        self.replicas: tuple[Replica, ...] = ()
        self._router = None
        self._lock = threading.Lock()

    def __call__(self, *, model: str, messages: list[dict], **kwargs: Any):
        """One chat completion on the replica ``messages`` is pinned to, or the Router's choice
        among the others when that one fails. ``model`` must be ``litellm_model``; an
        ``api_base`` or ``api_key`` in ``kwargs`` is dropped (each replica has its own).

        Raises:
            ValueError: ``model`` is not the model the replicas serve.
            ModelUnreachable: no replica answered within ``restart_wait_s``.
            Exception: litellm's error when every replica the Router tried failed.
        """
        if model != self.litellm_model:
            raise ValueError(f"this router serves {self.litellm_model!r}, not {model!r}")
        kwargs = {k: v for k, v in kwargs.items() if k not in ("api_base", "api_key")}
        router, names = self._current_router()
        group = pinned_group(model, pinned_replica(conversation_key(messages), names))
        response = router.completion(model=group, messages=messages, **kwargs)
        model_id = (getattr(response, "_hidden_params", None) or {}).get("model_id")
        self.answered_by = str(model_id).split("/", 1)[0] if model_id else None
        return response

    def _current_router(self):
        """The Router over the replicas answering now, rebuilt when they changed."""
        replicas = tuple(sorted(self.lookup(self.restart_wait_s), key=lambda r: r.name))
        with self._lock:
            if self._router is None or replicas != self.replicas:
                self._router, self.replicas = self._build(replicas), replicas
            return self._router, [r.name for r in replicas]

    def _build(self, replicas: Sequence[Replica]):
        from litellm import Router

        policy = self.policy
        return Router(
            model_list=model_list(self.litellm_model, replicas),
            routing_strategy=policy.routing_strategy, num_retries=policy.num_retries,
            allowed_fails=policy.allowed_fails, cooldown_time=policy.cooldown_time_s,
            fallbacks=[{pinned_group(self.litellm_model, r.name): [self.litellm_model]} for r in replicas],
        )


_ROUTERS: dict[tuple, ReplicaRouter] = {}
_ROUTERS_LOCK = threading.Lock()


def completion_function(endpoint: ModelEndpoint) -> Callable[..., Any]:
    """What makes one request to ``endpoint`` (a ``ModelEndpoint``), called like
    ``litellm.completion(model=..., messages=..., **request_kwargs)``: ``litellm.completion``
    itself, or for a replicated model (``endpoint.replica_names``) this process's
    ``ReplicaRouter`` over them (``replica_router``, which imports Ray)."""
    if not endpoint.replica_names:
        import litellm

        return litellm.completion
    return replica_router(endpoint)


def replica_router(endpoint: ModelEndpoint) -> ReplicaRouter:
    """This process's ``ReplicaRouter`` of ``endpoint`` (a ``ModelEndpoint`` with
    ``replica_names``), built on first use: its replicas are asked of their ``ModelServer``
    actors (``raydist.models.server.ready_replicas``), so this imports Ray."""
    from raydist.models.endpoint import RESTART_WAIT_S  # deferred: litellm

    key = (endpoint.litellm_model, tuple(endpoint.replica_names), endpoint.server_namespace)
    with _ROUTERS_LOCK:
        if key not in _ROUTERS:
            _ROUTERS[key] = ReplicaRouter(endpoint.litellm_model, _actor_lookup(endpoint.litellm_model, *key[1:]),
                                          restart_wait_s=RESTART_WAIT_S)
        return _ROUTERS[key]


def _actor_lookup(litellm_model: str, names: tuple[str, ...], namespace: str | None):
    from raydist.models.retry import ModelUnreachable  # deferred: litellm
    from raydist.models.server import ModelServerError, ready_replicas  # deferred: ray

    def lookup(wait_s: float) -> list[Replica]:
        try:
            return [Replica(*found) for found in ready_replicas(names, namespace, wait_s)]
        except ModelServerError as exc:  # the machine failed the unit, not the model
            raise ModelUnreachable(f"model {litellm_model!r}: {exc}") from exc

    return lookup
