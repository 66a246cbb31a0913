"""How a run unit can end: the one outcome taxonomy every path of raydist uses.

Every result row has exactly one ``outcome``:

- ``resolved``: the recovered patch makes every FAIL_TO_PASS and PASS_TO_PASS test pass.
- ``unresolved``: the agent finished (``agent_exit`` says how: ``submitted``, ``step_limit``,
  ``cost_limit``, ``time_limit``, ``format_errors``, ``model_error``) and the patch did not
  resolve the instance. A weak model lands here, and only here.
- ``input_error``: the instance cannot be run as given (malformed row, gold or test patch
  that does not apply, no test command). Never retried: rerunning changes nothing.
- ``infrastructure_error``: the machine failed the unit (Docker, the model server
  unreachable, the host out of memory or disk). Retried with backoff, within a bound.
- ``bug``: an exception raised by raydist itself. Never retried; reported with its traceback.

Rates (resolved rate, mean steps, tokens, cost) are computed over *finished* units
(``resolved`` + ``unresolved``); the other three are counted apart, by ``error_cause``.
"""

from __future__ import annotations

import errno

RESOLVED = "resolved"
UNRESOLVED = "unresolved"
INPUT_ERROR = "input_error"
INFRASTRUCTURE_ERROR = "infrastructure_error"
BUG = "bug"

OUTCOMES = (RESOLVED, UNRESOLVED, INPUT_ERROR, INFRASTRUCTURE_ERROR, BUG)
FINISHED = frozenset({RESOLVED, UNRESOLVED})
"""Outcomes that enter rates: the agent ran to an end and the patch was graded."""
ERRORS = frozenset({INPUT_ERROR, INFRASTRUCTURE_ERROR, BUG})

# How an agent's run ended (``agent_exit``), for finished units.
AGENT_EXITS = ("submitted", "step_limit", "cost_limit", "time_limit", "format_errors", "model_error")


class UnitError(Exception):
    """Base of the errors that end a unit with a named outcome and cause.

    ``cause`` is a short stable token (``docker``, ``model_unreachable``, ``disk_full``,
    ``patch_does_not_apply``...) that summaries group by; the message says what to do."""

    outcome: str = BUG

    def __init__(self, message: str, *, cause: str = "unknown", retry_after: float | None = None):
        super().__init__(message)
        self.cause = cause
        self.retry_after = retry_after


class InputError(UnitError):
    """The instance itself cannot be run as given; recorded once, never retried."""

    outcome = INPUT_ERROR


class InfrastructureError(UnitError):
    """The machine, not the model or the instance, failed the unit; retried within a bound.

    ``retry_after`` (seconds) is honoured when the failing service gave one."""

    outcome = INFRASTRUCTURE_ERROR


def classify_exception(exc: BaseException) -> tuple[str, str]:
    """``(outcome, cause)`` of an exception that ended a unit.

    ``UnitError`` subclasses carry their own; Docker and connection failures, a full disk and
    memory exhaustion are infrastructure; anything else is a raydist ``bug``."""
    if isinstance(exc, UnitError):
        return exc.outcome, exc.cause
    if isinstance(exc, MemoryError):
        return INFRASTRUCTURE_ERROR, "host_out_of_memory"
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return INFRASTRUCTURE_ERROR, "disk_full"
    try:
        import docker.errors
        import requests.exceptions

        if isinstance(exc, (docker.errors.DockerException, requests.exceptions.ConnectionError)):
            return INFRASTRUCTURE_ERROR, "docker"
    except ImportError:  # pragma: no cover - both are dependencies
        pass
    if isinstance(exc, (ConnectionError, TimeoutError)):
        return INFRASTRUCTURE_ERROR, "connection"
    return BUG, type(exc).__name__


def retryable(outcome: str) -> bool:
    """Only infrastructure errors run again; input errors and bugs would fail the same way."""
    return outcome == INFRASTRUCTURE_ERROR
