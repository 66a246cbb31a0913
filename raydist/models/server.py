"""`ModelServer`, the thin Ray actor that owns one model server (`raydist.models.process`)
under a `Supervisor` (`raydist.models.supervisor`): a server that dies or hangs is restarted,
on a new port when its own is taken, and clients ask the actor (by its name) for the current
`api_base` (`current_server`, `follow_server`).

On a GPU node reserve the device through Ray, not through the command:

    server = ModelServer.options(num_gpus=1, num_cpus=4).remote(["vllm", "serve", ...])
    api_base = ray.get(server.start.remote())
    api_base = ray.get(server.api_base.remote(wait_s=300))  # after a restart: the new address
"""

from __future__ import annotations

import functools
import time
from dataclasses import replace

import ray

from raydist.models.endpoint import RESTART_WAIT_S, ModelEndpoint
from raydist.models.process import ALL_INTERFACES, LOG_TAIL_LINES, ModelServerError, ServerProcess
from raydist.models.supervisor import Supervisor, SupervisorPolicy

__all__ = ["ModelServer", "ModelServerError", "current_server", "follow_server", "ready_replicas"]


@ray.remote(max_restarts=0, max_concurrency=64)
class ModelServer:
    """Ray actor owning one `ServerProcess` under a `Supervisor`; the server dies with the
    actor's process.

    Construct with the arguments of `ServerProcess`, plus `policy`: a dict of
    `SupervisorPolicy` fields (restart bounds, health-check timing). Reserve resources with
    `.options`: `ModelServer.options(num_cpus=2)` for llama.cpp, `.options(num_gpus=1)` for
    `vllm serve`; give it a `name` so model calls in Ray tasks find it (`current_server`).
    When `host` is 0.0.0.0 the returned `api_base` names this node's IP so other nodes reach it.

    The actor is threaded (many tasks may wait in `api_base` during a restart); the server is
    forked only by the supervisor's own thread.
    """

    def __init__(self, command: list[str], *, policy: dict | None = None, **kwargs):
        if kwargs.get("host") == ALL_INTERFACES and not kwargs.get("advertise_host"):
            kwargs["advertise_host"] = ray.util.get_node_ip_address()
        self._process = ServerProcess(command, **kwargs)
        self._supervisor = Supervisor(self._process, SupervisorPolicy(**(policy or {})))

    def start(self) -> str:
        """Start the server and its supervision; returns `api_base`. Raises ModelServerError
        with the log tail when every start attempt failed."""
        return self._supervisor.start()

    def api_base(self, wait_s: float = 0.0, recheck: bool = False) -> str:
        """The current `api_base`, waiting up to `wait_s` s while a restart is under way;
        `recheck`: check the server now (the caller's requests just failed).
        Raises ModelServerError when the server failed for good, stopped, or is still restarting."""
        return self._supervisor.api_base(wait_s, recheck)

    def current(self, wait_s: float = 0.0, recheck: bool = False) -> tuple[str, int]:
        """`(api_base, restarts)`, as `api_base` waits (`Supervisor.current`)."""
        return self._supervisor.current(wait_s, recheck)

    def restarts(self) -> int:
        """How many times the server was restarted."""
        return self._supervisor.restarts

    def status(self) -> dict:
        """`Supervisor.status()`: state, restarts, api_base, pid, events, error."""
        return self._supervisor.status()

    def healthy(self) -> bool:
        """True when the server process runs and answers its health path."""
        return self._process.healthy()

    def pid(self) -> int | None:
        """Process id of the server (None when stopped), for monitoring and cleanup checks."""
        return self._process.pid

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        """The last `lines` lines of the server log."""
        return self._process.log_tail(lines)

    def stop(self) -> None:
        """Stop supervision and the server process (idempotent)."""
        self._supervisor.stop()


@functools.lru_cache(maxsize=16)
def _server_actor(name: str, namespace: str | None):
    return ray.get_actor(name, namespace=namespace)


def current_server(name: str, namespace: str | None = None, wait_s: float = RESTART_WAIT_S,
                   recheck: bool = False) -> tuple[str, int]:
    """`(api_base, restarts)` the named `ModelServer` actor reports now, waiting up to
    `wait_s` seconds while its server restarts (the address may change: a new port when the
    old one was taken; `restarts` grows by one with each restart).

    Args:
        name: the actor's Ray name (`ModelEndpoint.server_name`).
        namespace: its Ray namespace; None for the caller's.
        wait_s: longest wait for a restart, seconds.
        recheck: the caller's requests just failed: have the server checked now.

    Raises:
        ModelServerError: the actor is gone (its launch ended or its node died), or its
            server failed for good or is still restarting after `wait_s` seconds.
    """
    try:
        actor = _server_actor(name, namespace)
    except ValueError as exc:
        raise ModelServerError(f"model server actor {name!r} is gone (its launch has ended): {exc}") from exc
    try:
        return ray.get(actor.current.remote(wait_s=wait_s, recheck=recheck), timeout=wait_s + 60)
    except ray.exceptions.RayTaskError as exc:
        # The actor's own ModelServerError, without Ray's remote traceback around it.
        raise ModelServerError(str(exc.cause)) from None
    except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError) as exc:
        _server_actor.cache_clear()
        raise ModelServerError(f"model server actor {name!r} does not answer: {type(exc).__name__}: {exc}") from exc


def follow_server(endpoint: ModelEndpoint, wait_s: float, recheck: bool = False) -> ModelEndpoint:
    """`endpoint` at the address its supervised server has now, with that server's
    `server_generation`; `endpoint` itself when it names no supervisor (`server_name`). Waits
    up to `wait_s` seconds while the server restarts; `recheck` (after failed calls) has the
    server checked at once.

    Raises:
        ModelServerError: the supervisor is gone, its server failed for good, or it is still
            restarting after `wait_s` seconds.
    """
    if endpoint.server_name is None:
        return endpoint
    api_base, generation = current_server(endpoint.server_name, endpoint.server_namespace, wait_s, recheck)
    if (api_base, generation) == (endpoint.api_base, endpoint.server_generation):
        return endpoint
    return replace(endpoint, api_base=api_base, server_generation=generation)


def ready_replicas(names: tuple[str, ...], namespace: str | None, wait_s: float) -> list[tuple[str, str, int]]:
    """The replicas among the `ModelServer` actors `names` whose servers answer now, as
    `(name, api_base, restarts)`; when none does, waits up to `wait_s` seconds for the first
    that comes back and returns it alone.

    Raises:
        ModelServerError: every actor is gone, or no replica answers after `wait_s` seconds
            (the message gives each replica's reason).
    """
    actors, reasons = {}, {}
    for name in names:
        try:
            actors[name] = _server_actor(name, namespace)
        except ValueError:
            reasons[name] = "its actor is gone (its launch has ended)"
    calls = {actor.current.remote(wait_s=0.0): name for name, actor in actors.items()}
    ready = []
    for ref, name in calls.items():
        try:
            api_base, restarts = ray.get(ref, timeout=60)
            ready.append((name, api_base, restarts))
        except ray.exceptions.RayTaskError as exc:
            reasons[name] = str(exc.cause)
        except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError) as exc:
            _server_actor.cache_clear()
            reasons[name] = f"its actor does not answer: {type(exc).__name__}"
    if ready or wait_s <= 0:
        if not ready:
            raise ModelServerError(_no_replica(reasons))
        return ready
    # None answers: wait for the first replica whose supervisor has it running again.
    pending = {actors[name].current.remote(wait_s=wait_s): name for name in actors if name in reasons}
    deadline = time.monotonic() + wait_s + 60
    while pending and (left := deadline - time.monotonic()) > 0:
        done, _ = ray.wait(list(pending), num_returns=1, timeout=left)
        for ref in done:
            name = pending.pop(ref)
            try:
                api_base, restarts = ray.get(ref)
                return [(name, api_base, restarts)]
            except (ray.exceptions.RayTaskError, ray.exceptions.RayActorError) as exc:
                reasons[name] = str(getattr(exc, "cause", exc))
    raise ModelServerError(_no_replica(reasons, waited=wait_s))


def _no_replica(reasons: dict, waited: float = 0.0) -> str:
    detail = "; ".join(f"{name}: {reason}" for name, reason in sorted(reasons.items()))
    return f"no replica of the model answers (waited {waited:g} s): {detail}"
