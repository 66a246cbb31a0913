"""Bounded retries of one model call: which litellm errors are transient, and the error
raised when a model stays unreachable."""

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
    stop_after_attempt,
    wait_exponential,
)

from raydist.models.endpoint import ModelEndpoint

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


class ModelUnreachable(RuntimeError):
    """The model did not answer after the allowed attempts."""


def call_with_retries(call: Callable[[], T], *, endpoint: ModelEndpoint, retries: int) -> T:
    """``call()``, retried on ``TRANSIENT_ERRORS`` with short exponential backoff (0.5 s to 4 s).

    Args:
        call: one model request.
        endpoint: the model the request goes to (named in the error).
        retries: attempts in all (>= 1).

    Returns:
        What ``call`` returned.

    Raises:
        ModelUnreachable: every attempt failed transiently; names the model, its api_base,
            the attempts and the last error.
        Exception: any non-transient error of ``call``, at once.
    """
    attempts = Retrying(
        stop=stop_after_attempt(retries),
        wait=wait_exponential(multiplier=0.5, min=0.5, max=4),
        retry=retry_if_exception_type(TRANSIENT_ERRORS),
        before_sleep=before_sleep_log(logger, logging.WARNING),
    )
    try:
        for attempt in attempts:
            with attempt:
                return call()
    except RetryError as exc:
        cause = exc.last_attempt.exception()
        where = endpoint.api_base or "its provider"
        raise ModelUnreachable(
            f"model {endpoint.litellm_model!r} at {where} did not answer after {retries} "
            f"attempt(s): {type(cause).__name__}: {cause}"
        ) from cause
