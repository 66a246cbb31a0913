"""Keep one model server answering: detect that it died or hung, restart it within a bound.

A monitoring thread checks the `ServerProcess` every `check_interval_s` seconds:

- the process exited (`exit_code` set: a crash, the OOM killer, a stray `kill -9`), or
- `liveness_path` did not answer within `health_timeout_s`, `hang_checks` times in a row
  (a stopped or wedged process; llama-server's and vLLM's `/health` answer while they generate),

and then kills what is left and starts it again, on the same port when that port is free and
on a new one otherwise (another listener took it), up to `start_attempts` tries with
exponential backoff. A server that cannot be brought back, or that died more than
`max_restarts` times, leaves the supervisor `failed`: `api_base()` then raises
`ModelServerError` with the reason and the log tail, at once, instead of looping forever.

Clients ask `api_base(wait_s)` for the current address: it waits while a restart is under way,
so a model call that failed because the server died can simply be retried afterwards.

Every spawn happens on the monitoring thread: the server's PR_SET_PDEATHSIG is tied to the
thread that forks it, and this thread lives exactly as long as the supervision.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from raydist.models.process import ModelServerError, ServerProcess, free_port, port_is_free

logger = logging.getLogger("raydist.models.supervisor")

NEW, STARTING, READY, RESTARTING, FAILED, STOPPED = "new", "starting", "ready", "restarting", "failed", "stopped"


@dataclass(frozen=True)
class SupervisorPolicy:
    """How a `Supervisor` watches and restarts its server.

    Attributes:
        check_interval_s: seconds between two checks.
        health_timeout_s: seconds one liveness request may take.
        hang_checks: failed liveness checks in a row that make the server hung; a hang is
            noticed within about `hang_checks * (health_timeout_s + check_interval_s)` seconds.
        start_attempts: tries to (re)start it before giving up (each bounded by the
            server's `startup_timeout`).
        backoff_s: wait before the second try; doubled before each further one.
        max_restarts: restarts over the supervisor's life; one more death fails it.
    """

    check_interval_s: float = 5.0
    health_timeout_s: float = 10.0
    hang_checks: int = 3
    start_attempts: int = 3
    backoff_s: float = 2.0
    max_restarts: int = 10

    def __post_init__(self):
        for name in ("check_interval_s", "health_timeout_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"SupervisorPolicy.{name} must be > 0, got {getattr(self, name)!r}")
        for name in ("hang_checks", "start_attempts"):
            if getattr(self, name) < 1:
                raise ValueError(f"SupervisorPolicy.{name} must be >= 1, got {getattr(self, name)!r}")
        if self.backoff_s < 0 or self.max_restarts < 0:
            raise ValueError(f"SupervisorPolicy.backoff_s and max_restarts must be >= 0, got "
                             f"{self.backoff_s!r} and {self.max_restarts!r}")


def supervisor_policy(model: str, entry: dict) -> dict:
    """The ``supervisor`` mapping of the ``local_models`` entry ``model`` (empty when absent),
    checked against ``SupervisorPolicy``'s fields and bounds. Raises ``ModelServerError``
    naming the entry, so a bad key fails before anything starts and not inside a server actor."""
    policy = dict(entry.get("supervisor") or {})
    try:
        SupervisorPolicy(**policy)
    except (TypeError, ValueError) as exc:
        raise ModelServerError(f"local_models.{model}.supervisor={policy}: {exc}; its keys are the fields of "
                               "raydist.models.supervisor.SupervisorPolicy") from exc
    return policy


class Supervisor:
    """Starts `process`, watches it on a thread and restarts it under `policy`.

    Thread-safe: `api_base`, `restarts` and `status` may be called from any thread while the
    monitor runs. `start()` blocks until the first start succeeded or every attempt failed.
    """

    def __init__(self, process: ServerProcess, policy: SupervisorPolicy | None = None):
        self.process = process
        self.policy = policy or SupervisorPolicy()
        self._cond = threading.Condition()
        self._state = NEW
        self._error: str | None = None
        self._restarts = 0
        self._events: list[str] = []
        self._stopping = threading.Event()
        self._wake = threading.Event()  # check now, not at the next interval
        self._checks = 0
        self._thread: threading.Thread | None = None
        self._grace = 10.0

    def start(self) -> str:
        """Start the server (bounded attempts) and the monitor; returns `api_base`.

        Raises:
            ModelServerError: no attempt got a healthy server; names the attempts and carries
                the last attempt's log tail.
        """
        with self._cond:
            if self._thread is None:
                self._state = STARTING
                self._thread = threading.Thread(target=self._monitor, name="model-server-monitor", daemon=True)
                self._thread.start()
            self._cond.wait_for(lambda: self._state != STARTING)
            return self._current(0)

    def api_base(self, wait_s: float = 0.0, recheck: bool = False) -> str:
        """The server's current `api_base`, waiting up to `wait_s` seconds while it restarts
        (`current` without the restart count)."""
        return self.current(wait_s, recheck)[0]

    def current(self, wait_s: float = 0.0, recheck: bool = False) -> tuple[str, int]:
        """`(api_base, restarts)` of the running server, waiting up to `wait_s` seconds while
        it restarts. A client compares `restarts` with the value of its failed calls: equal
        means the same server process simply did not answer them.

        `recheck=True` is for a client whose calls just failed: the server is checked at once
        rather than at the next interval, so a death is acted on before the client retries.

        Raises:
            ModelServerError: the server failed for good (reason and log tail), was stopped,
                or is still restarting after `wait_s` seconds.
        """
        with self._cond:
            if recheck and self._state == READY:
                seen = self._checks
                self._wake.set()
                self._cond.wait_for(lambda: self._checks > seen or self._state != READY,
                                    timeout=min(wait_s, self.policy.health_timeout_s + 5))
            self._cond.wait_for(lambda: self._state not in (STARTING, RESTARTING), timeout=wait_s)
            return self._current(wait_s), self._restarts

    @property
    def restarts(self) -> int:
        """How many times the server was restarted (0 while the first process runs)."""
        with self._cond:
            return self._restarts

    def status(self) -> dict:
        """`{"state", "restarts", "api_base", "pid", "events", "error"}`: the state (new,
        starting, ready, restarting, failed, stopped), the restart count, the address when
        ready (else None), the server pid, what happened (one line each) and the error."""
        with self._cond:
            return {"state": self._state, "restarts": self._restarts,
                    "api_base": self.process.api_base if self._state == READY else None,
                    "pid": self.process.pid, "events": list(self._events), "error": self._error}

    def stop(self, grace: float = 10.0) -> None:
        """Stop monitoring and the server (SIGTERM, SIGKILL after `grace` s); idempotent."""
        self._grace = grace
        self._stopping.set()
        self._wake.set()
        with self._cond:
            thread = self._thread
            self._cond.notify_all()
        if thread is not None and thread is not threading.current_thread():
            # A start in progress notices the flag within its next health poll (0.5 s).
            thread.join(timeout=grace + self.policy.health_timeout_s + 5)
        self.process.stop(grace=grace)
        with self._cond:
            if self._state != FAILED:
                self._state = STOPPED
            self._cond.notify_all()

    def _current(self, waited: float) -> str:
        if self._state == READY:
            return self.process.api_base
        if self._state == FAILED:
            raise ModelServerError(self._error)
        if self._state in (STOPPED, NEW):
            raise ModelServerError(f"the model server on {self.process.host} is {self._state}: "
                                   "its launch ended, so no model call can reach it any more")
        raise ModelServerError(f"the model server on {self.process.host} is still {self._state} after "
                               f"waiting {waited:g} s (events: {'; '.join(self._events[-3:]) or 'none'})")

    def _set(self, state: str, event: str | None = None, error: str | None = None) -> None:
        with self._cond:
            self._state = state
            if event:
                self._events.append(event)
                logger.warning("model server %s", event)
                self.process.note(event)
            if error:
                self._error = error
            self._cond.notify_all()

    def _monitor(self) -> None:
        try:
            if not self._launch():
                return
            misses = 0
            while True:
                self._wake.wait(self.policy.check_interval_s)
                self._wake.clear()
                if self._stopping.is_set():
                    return
                code = self.process.exit_code
                if code is None:
                    alive = self.process.alive(timeout=self.policy.health_timeout_s)
                    # a process that died before or during an unanswered check is a death, not a miss
                    code = None if alive else self.process.exit_code
                if code is None:
                    misses = 0 if alive else misses + 1
                    if alive or misses < self.policy.hang_checks:
                        self._checked()
                        continue
                    reason = (f"on port {self.process.port} did not answer {self.process.liveness_path} within "
                              f"{self.policy.health_timeout_s:g} s {misses} times in a row (hung)")
                else:
                    reason = f"on port {self.process.port} exited with code {code}"
                misses = 0
                if self._stopping.is_set():
                    return
                if self._restarts >= self.policy.max_restarts:
                    self.process.kill()
                    self._set(FAILED, f"{reason}; not restarted: already restarted {self._restarts} times",
                              error=f"model server {reason} after {self._restarts} restart(s), the most "
                                    f"max_restarts={self.policy.max_restarts} allows; log {self.process.log_path}, "
                                    f"last lines:\n{self.process.log_tail()}")
                    return
                with self._cond:
                    self._restarts += 1
                self._set(RESTARTING, f"{reason}; restarting ({self._restarts}/{self.policy.max_restarts})")
                self.process.kill()
                if not self._launch():
                    return
                self._checked()
        except Exception as exc:  # noqa: BLE001 - the monitor must leave a state clients can read
            self._set(FAILED, f"monitor failed: {type(exc).__name__}: {exc}",
                      error=f"the model server's monitor failed: {type(exc).__name__}: {exc}")
        finally:
            # Stopped here, on the thread that forked it: once this thread ends, the kernel
            # SIGKILLs the server anyway (PR_SET_PDEATHSIG), with no chance to shut down.
            if self._stopping.is_set():
                self.process.stop(grace=self._grace)
            else:
                self.process.kill()

    def _checked(self) -> None:
        with self._cond:
            self._checks += 1
            self._cond.notify_all()

    def _launch(self) -> bool:
        """Start the process, retrying with backoff; READY and True, or FAILED and False."""
        last: Exception | None = None
        attempts = self.policy.start_attempts
        for attempt in range(attempts):
            if attempt and self._stopping.wait(self.policy.backoff_s * 2 ** (attempt - 1)):
                return False
            if self._stopping.is_set():
                return False
            old = self.process.port
            if old is not None and (attempt > 0 or not port_is_free(old, self.process.host)):
                self.process.port = free_port(self.process.host)
                self.process.note(f"port {old} is taken or failed: moving to port {self.process.port}")
            try:
                self.process.start(cancel=self._stopping)
            except ModelServerError as exc:
                last = exc
                self.process.kill()
                logger.warning("model server start %d/%d failed: %s", attempt + 1, attempts, exc)
                continue
            self._set(READY, f"ready at {self.process.api_base} (pid {self.process.pid})")
            return True
        if self._stopping.is_set():
            return False
        self._set(FAILED, f"could not be started in {attempts} attempt(s)",
                  error=f"the model server could not be started in {attempts} attempt(s) "
                        f"(policy start_attempts); last attempt: {last}")
        return False
