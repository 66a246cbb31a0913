"""Bounded retries of one model call: which litellm errors are transient (retried), which are
the model's own refusal (never retried), and the error raised when a model stays unreachable."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

import litellm
from tenacity import (
    RetryError,
    Retrying,
    before_sleep_log,
    retry_if_exception_type,
    wait_exponential,
)

from raydist.models.admission import record_usage, slot
from raydist.models.endpoint import ModelEndpoint
from raydist.outcomes import InfrastructureError

logger = logging.getLogger("raydist.models.retry")
T = TypeVar("T")

TRANSIENT_ERRORS = (
    litellm.exceptions.APIConnectionError,
    litellm.exceptions.Timeout,
    litellm.exceptions.ServiceUnavailableError,
    litellm.exceptions.RateLimitError,
    litellm.exceptions.InternalServerError,
)
"""Failures worth another attempt: server down, overloaded, rate limited or timed out."""

NON_TRANSIENT_ERRORS = (
    litellm.exceptions.BadRequestError,  # also ContextWindowExceededError, ContentPolicyViolationError,
    litellm.exceptions.UnprocessableEntityError,  # UnsupportedParamsError: the request itself is refused
)
"""The model server's answer to this very request (HTTP 400/422: context too long, content
policy, a parameter it refuses): asking again gets the same answer, so the agent's run ends
with ``agent_exit=model_error`` (``raydist.outcomes``) and the unit is never retried."""

MAX_RETRY_AFTER_S = 60.0
"""The longest ``Retry-After`` one model call honours before its next attempt."""

MAX_THROTTLED_S = 300.0
"""The longest one model call waits in all on refusals that carry ``Retry-After``: such a
refusal (429 rate limited, 503 overloaded) is the server pacing its clients, so it does not
use up one of the call's attempts; a server still refusing past this bound makes the call
``ModelUnreachable``."""

THROTTLING_ERRORS = (litellm.exceptions.RateLimitError, litellm.exceptions.ServiceUnavailableError)
"""HTTP 429 and 503: the model is there but takes fewer calls; the model's limiter of calls in
flight (``raydist.models.admission``) halves on each."""


class ModelUnreachable(InfrastructureError):
    """The model did not answer after the allowed attempts (infrastructure: cause
    ``model_unreachable``; ``retry_after`` is the server's last ``Retry-After``, if any)."""

    default_cause = "model_unreachable"


def is_model_refusal(exc: BaseException) -> bool:
    """True for a non-transient model error (``NON_TRANSIENT_ERRORS``): the agent's run ends
    as ``model_error``. Transient ones (``TRANSIENT_ERRORS``) are not refusals."""
    return isinstance(exc, NON_TRANSIENT_ERRORS) and not isinstance(exc, TRANSIENT_ERRORS)


def retry_after_s(exc: BaseException | None) -> float | None:
    """Seconds from the ``Retry-After`` header of the HTTP response behind ``exc`` (a litellm
    or openai error), None when it has none or it is not a number of seconds (RFC 9110 §10.2.3
    also allows a date, which no model server raydist knows sends)."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None) or {}
    try:
        value = headers.get("retry-after") or headers.get("Retry-After")
    except AttributeError:
        return None
    try:
        return max(0.0, float(value)) if value is not None else None
    except (TypeError, ValueError):
        return None


def _wait(state) -> float:
    """Exponential backoff 0.5 s to 4 s, or the server's Retry-After when longer (at most
    ``MAX_RETRY_AFTER_S``)."""
    backoff = wait_exponential(multiplier=0.5, min=0.5, max=4)(state)
    asked = retry_after_s(state.outcome.exception() if state.outcome else None)
    return min(MAX_RETRY_AFTER_S, max(backoff, asked or 0.0))


def is_paced(exc: BaseException | None) -> bool:
    """True for a 429 or 503 that says when to come back (``Retry-After``): the server is
    pacing its clients, not failing."""
    return isinstance(exc, THROTTLING_ERRORS) and retry_after_s(exc) is not None


def _stop(retries: int):
    """Tenacity's stop rule: after ``retries`` failed attempts, not counting paced refusals
    (``is_paced``); those stop the call once its waits on them would pass ``MAX_THROTTLED_S``."""
    failed = 0
    paced_s = 0.0

    def stop(state) -> bool:
        nonlocal failed, paced_s
        exc = state.outcome.exception() if state.outcome else None
        if is_paced(exc):
            paced_s += _wait(state)
            return paced_s > MAX_THROTTLED_S
        failed += 1
        return failed >= retries

    return stop


def call_with_retries(call: Callable[[], T], *, endpoint: ModelEndpoint, retries: int) -> T:
    """``call()``, retried on ``TRANSIENT_ERRORS`` with short exponential backoff (0.5 s to 4 s,
    longer when the server sends ``Retry-After``, up to ``MAX_RETRY_AFTER_S``). A 429/503 with
    ``Retry-After`` is waited out and does not count as an attempt (``MAX_THROTTLED_S`` bounds
    those waits), so a rate-limited model slows the unit down instead of failing it.

    With ``endpoint.admission`` set (``raydist.models.admission.AdmissionRef``), each attempt
    first takes one of the model's slots (waiting while the limit of calls in flight is
    reached; a 429/503 halves that limit) and every response's usage is booked in the
    launch's ledger.

    Args:
        call: one model request.
        endpoint: the model the request goes to (named in the error).
        retries: attempts in all (>= 1).

    Returns:
        What ``call`` returned.

    Raises:
        ModelUnreachable: every attempt failed transiently; names the model, its api_base,
            the attempts and the last error.
        Exception: any non-transient error of ``call`` (e.g. ``NON_TRANSIENT_ERRORS``), at once.
    """
    if retries < 1:
        raise ValueError(f"retries must be at least 1, got {retries}")
    admission = getattr(endpoint, "admission", None)
    attempts = Retrying(
        stop=_stop(retries),
        wait=_wait,
        retry=retry_if_exception_type(TRANSIENT_ERRORS),
        before_sleep=before_sleep_log(logger, logging.WARNING),
    )
    try:
        for attempt in attempts:
            with attempt:
                with slot(admission, THROTTLING_ERRORS):
                    response = call()
                record_usage(admission, response, endpoint)
                return response
    except RetryError as exc:
        cause = exc.last_attempt.exception()
        where = endpoint.api_base or "its provider"
        tries = exc.last_attempt.attempt_number
        raise ModelUnreachable(
            f"model {endpoint.litellm_model!r} at {where} did not answer after {tries} "
            f"attempt(s): {type(cause).__name__}: {cause}", retry_after=retry_after_s(cause)
        ) from cause
