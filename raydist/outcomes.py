"""How a run unit can end: the one outcome taxonomy every path of raydist uses.

Every result row has exactly one ``outcome``:

- ``resolved``: the recovered patch makes every FAIL_TO_PASS and PASS_TO_PASS test pass.
- ``unresolved``: the agent finished (``agent_exit`` says how: ``submitted``, ``step_limit``,
  ``cost_limit``, ``time_limit``, ``format_errors``, ``model_error``) and the patch did not
  resolve the instance. A weak model lands here, and only here. ``model_error`` is a
  non-transient refusal of the model server (400 bad request, context window exceeded,
  content policy): asking again would get the same answer, so the unit ends.
- ``answered``: the agent finished a repository question (SWE-QA, ``raydist.qa``) and its answer
  was scored by the judge (``qa_score``; an empty answer scores 0 without a judge call). It is
  the ``resolved``/``unresolved`` of a question: a finished unit, but no patch was graded.
- ``input_error``: the instance cannot be run as given (malformed row, gold or test patch
  that does not apply, no test command). Never retried: rerunning changes nothing.
- ``infrastructure_error``: the machine failed the unit (Docker, the model server
  unreachable, the host out of memory or disk, a Ray worker lost). Retried with exponential
  backoff (honouring a server's ``Retry-After``), at most ``RetryPolicy.max_attempts`` times
  per launch.
- ``bug``: an exception raised by raydist itself. Never retried; its traceback is the row's
  ``error``.

Rates (resolved rate, mean steps, tokens, cost) are computed over *finished* units
(``resolved`` + ``unresolved``), answer scores over ``answered`` ones; the other three are
counted apart, by ``error_cause``.
"""

from __future__ import annotations

import errno
from dataclasses import dataclass

from raydist.views.recover import PatchApplyError

RESOLVED = "resolved"
UNRESOLVED = "unresolved"
ANSWERED = "answered"
INPUT_ERROR = "input_error"
INFRASTRUCTURE_ERROR = "infrastructure_error"
BUG = "bug"

OUTCOMES = (RESOLVED, UNRESOLVED, ANSWERED, INPUT_ERROR, INFRASTRUCTURE_ERROR, BUG)
FINISHED = frozenset({RESOLVED, UNRESOLVED})
"""Outcomes that enter resolve rates: the agent ran to an end and the patch was graded."""
SCORED = frozenset({ANSWERED})
"""Outcomes that enter answer scores: the agent ran to an end on a question and was judged."""
ERRORS = (INPUT_ERROR, INFRASTRUCTURE_ERROR, BUG)
"""Outcomes that are counted apart from the rates, in this order."""

# How an agent's run ended (``agent_exit``), for finished units.
AGENT_EXITS = ("submitted", "step_limit", "cost_limit", "time_limit", "format_errors", "model_error")

#: mini-swe-agent's exit statuses (``minisweagent.exceptions``) and raydist's ``ModelError``
#: (a non-transient model failure, ``raydist.agents.loop``) -> ``agent_exit``.
#: ``LimitsExceeded`` is the step or the cost limit: ``agent_exit_of`` tells them apart.
_EXIT_STATUSES = {
    "Submitted": "submitted",
    "LimitsExceeded": "step_limit",
    "TimeExceeded": "time_limit",
    "FormatError": "format_errors",
    "RepeatedFormatError": "format_errors",
    "ModelError": "model_error",
}


class UnitError(Exception):
    """Base of the errors that end a unit with a named outcome and cause.

    ``cause`` is a short stable token (``docker``, ``model_unreachable``, ``disk_full``,
    ``patch_does_not_apply``...) that summaries group by; the message says what to do.
    ``retry_after`` (seconds) is the wait a failing service asked for, if any."""

    outcome: str = BUG
    default_cause: str = "unknown"

    def __init__(self, message: str, *, cause: str | None = None, retry_after: float | None = None):
        super().__init__(message)
        self.cause = cause or self.default_cause
        self.retry_after = retry_after


class InputError(UnitError):
    """The instance itself cannot be run as given; recorded once, never retried."""

    outcome = INPUT_ERROR
    default_cause = "bad_instance"


class InfrastructureError(UnitError):
    """The machine or a service it needs (Docker, the model server, the disk), not the model
    or the instance, failed: one unit (its row's outcome; retried within a bound) or a whole
    launch before or between its units (exit status 1, the message on one line).

    ``retry_after`` (seconds) is honoured when the failing service gave one."""

    outcome = INFRASTRUCTURE_ERROR
    default_cause = "infrastructure"


def agent_exit_of(exit_status: str, *, cost: float = 0.0, cost_limit: float = 0.0) -> str | None:
    """The ``agent_exit`` of an agent run that ended with ``exit_status`` (mini-swe-agent's
    names, see ``_EXIT_STATUSES``), or None when the status is not an end of the agent's own
    (e.g. ``ModelUnreachable``: an infrastructure failure). ``LimitsExceeded`` is
    ``cost_limit`` when ``0 < cost_limit <= cost`` (USD; mini-swe-agent's own test), else
    ``step_limit``."""
    exit_ = _EXIT_STATUSES.get(exit_status)
    if exit_ == "step_limit" and 0 < cost_limit <= cost:
        return "cost_limit"
    return exit_


def classify_exception(exc: BaseException) -> tuple[str, str]:
    """``(outcome, cause)`` of an exception that ended a unit.

    ``UnitError`` subclasses carry their own; a Docker daemon that cannot be reached, an
    image that cannot be built, connection failures, a full disk and memory exhaustion are
    infrastructure; a patch that does not apply to its base is an input error; anything else
    is a raydist ``bug`` (cause: the exception's type name)."""
    if isinstance(exc, UnitError):
        return exc.outcome, exc.cause
    if isinstance(exc, MemoryError):
        return INFRASTRUCTURE_ERROR, "host_out_of_memory"
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return INFRASTRUCTURE_ERROR, "disk_full"
    known = _known_exception(exc)
    if known is not None:
        return known
    if isinstance(exc, (ConnectionError, TimeoutError)):
        return INFRASTRUCTURE_ERROR, "connection"
    return BUG, type(exc).__name__


def _known_exception(exc: BaseException) -> tuple[str, str] | None:
    import docker.errors  # deferred: this module is pure and imported by results/, which needs no Docker
    import requests.exceptions

    from raydist.sandbox.engine import SandboxUnavailable  # deferred: docker
    from raydist.sandbox.images import BaseImageMissing, ImageBuildError  # deferred: docker

    if isinstance(exc, (SandboxUnavailable, docker.errors.DockerException, requests.exceptions.ConnectionError)):
        return INFRASTRUCTURE_ERROR, "docker"
    if isinstance(exc, ImageBuildError):
        return INFRASTRUCTURE_ERROR, "image_build"
    if isinstance(exc, BaseImageMissing):
        return INFRASTRUCTURE_ERROR, "base_image_missing"
    if isinstance(exc, PatchApplyError):
        return INPUT_ERROR, "patch_does_not_apply"
    return None


def retryable(outcome: str) -> bool:
    """Only infrastructure errors run again; input errors and bugs would fail the same way."""
    return outcome == INFRASTRUCTURE_ERROR


@dataclass(frozen=True)
class RetryPolicy:
    """``resume``: what runs again. A unit that ended in an infrastructure error runs again
    within one launch, at most ``max_attempts`` times in all: attempt n (1-based) that fails
    waits ``min(backoff_max_s, backoff_s * 2 ** (n - 1))`` seconds before the next, or the
    failing service's ``Retry-After`` when that is longer (capped at ``backoff_max_s`` too), so
    no unit retries forever and none waits forever. Part of no unit key."""

    retry_errors: bool = True
    """Units whose row records an infrastructure error run again on the next launch."""
    max_attempts: int = 3
    """Tries in all of a unit ending in an infrastructure error, within one launch (>= 1; 1 = no retry)."""
    backoff_s: float = 5.0
    """Wait after attempt n: backoff_s * 2^(n-1) seconds (or the server's Retry-After)."""
    backoff_max_s: float = 120.0
    """Longest wait between attempts."""

    def __post_init__(self):
        if int(self.max_attempts) < 1:
            raise ValueError(f"resume.max_attempts={self.max_attempts}: must be at least 1")
        if self.backoff_s < 0 or self.backoff_max_s < 0:
            raise ValueError(f"resume.backoff_s={self.backoff_s}, resume.backoff_max_s={self.backoff_max_s}: "
                             "must be 0 or more seconds")

    def delay(self, attempt: int, outcome: str | None, retry_after: float | None = None) -> float | None:
        """Seconds to wait before attempt ``attempt + 1`` of a unit whose attempt ``attempt``
        ended with ``outcome``; None when it must not run again (not an infrastructure error,
        or the bound is reached)."""
        if not retryable(outcome or "") or attempt >= self.max_attempts:
            return None
        wait = self.backoff_s * 2 ** (attempt - 1)
        if retry_after is not None and retry_after > wait:
            wait = retry_after
        return float(min(self.backoff_max_s, wait))
