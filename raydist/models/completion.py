"""One chat completion as a plain function: the model access of pure logic that needs an LLM
(e.g. Level 1's paraphrase and verifier, `raydist.views.l1.statement`).

A supervised server (`ModelEndpoint.server_name`) may be restarted on another port while a
preparation runs: each call first asks its supervisor for the current address (waiting while
it restarts), and a call that stays unreachable is tried once more when the supervisor,
checking at once, restarted or moved the server meanwhile."""

from __future__ import annotations

from functools import partial

from raydist.models.endpoint import RESTART_WAIT_S, ModelEndpoint
from raydist.models.grammar import grammar_extra_body
from raydist.models.retry import ModelUnreachable, call_with_retries
from raydist.models.router import completion_function


class EmptyCompletion(RuntimeError):
    """The model answered with no text."""


def request_timeout(max_tokens: int, base_s: float, min_tokens_per_s: float | None = None) -> float:
    """Seconds one request for at most ``max_tokens`` completion tokens may take: ``base_s``
    (connecting, queueing, reading the prompt) plus ``max_tokens / min_tokens_per_s``, the time
    to generate the whole budget at the slowest rate that still counts as working. With
    ``min_tokens_per_s`` None, ``base_s`` whatever the budget.

    A fixed timeout fails every long request on a slow server: a 1024-token answer at the
    5-8 tokens/s of a small model on a loaded 2-core CPU needs 128-205 s.

    Raises:
        ValueError: ``base_s`` or ``min_tokens_per_s`` not > 0, or ``max_tokens`` < 0.
    """
    if base_s <= 0 or (min_tokens_per_s is not None and min_tokens_per_s <= 0) or max_tokens < 0:
        raise ValueError(f"request_timeout needs base_s > 0, min_tokens_per_s > 0 and max_tokens >= 0, "
                         f"got {base_s}, {min_tokens_per_s} and {max_tokens}")
    return base_s if min_tokens_per_s is None else base_s + max_tokens / min_tokens_per_s


class LitellmCompletion:
    """``complete(messages, *, seed, max_tokens, grammar=None) -> str`` on one endpoint.

    Attributes:
        endpoint: where the model is reached.
        timeout: seconds a request may take (``min_tokens_per_s`` None), else the base of
            ``request_timeout``.
        min_tokens_per_s: None, or the slowest generation rate a request is given time for.
        usage: running totals over every response received, ``{"input_tokens": prompt
            tokens, "output_tokens": completion tokens, "calls": responses}`` (failed
            requests are not counted; empty answers are).
        restart_wait_s: seconds a call waits for its supervised server to come back.
    """

    restart_wait_s: float = RESTART_WAIT_S

    def __init__(self, endpoint: ModelEndpoint, *, temperature: float, timeout: float, retries: int,
                 min_tokens_per_s: float | None = None):
        if retries < 1:
            raise ValueError(f"retries must be at least 1, got {retries}")
        request_timeout(0, timeout, min_tokens_per_s)  # refuses a timeout or rate that is not > 0
        self.endpoint = endpoint
        self.temperature = temperature
        self.timeout = timeout
        self.min_tokens_per_s = min_tokens_per_s
        self.retries = retries
        self.usage = {"input_tokens": 0, "output_tokens": 0, "calls": 0}

    def __call__(self, messages: list[dict], *, seed: int, max_tokens: int, grammar: str | None = None) -> str:
        """The text of the model's answer to ``messages``.

        Args:
            messages: chat messages (``{"role", "content"}`` dicts).
            seed: request seed (servers that honour it make the answer repeatable).
            max_tokens: completion tokens at most; with ``min_tokens_per_s`` it also sets how
                long the request may take (``request_timeout``).
            grammar: GBNF constraining the answer; sent to local servers only (a hosted
                model gets none, so callers must parse its answer leniently).

        Raises:
            ModelUnreachable: transient failures (connection, timeout, overload) outlasted
                ``retries`` attempts (twice when its supervisor moved the server meanwhile);
                names the model and its api_base; also when the supervisor says the server
                failed for good, is gone or still restarting after ``restart_wait_s``.
            EmptyCompletion: the answer had no text; names the model and its api_base.
            Exception: litellm's error for any other failure (bad request, authentication), at once.
        """
        self._follow_server(recheck=False)
        try:
            response = self._request(messages, seed, max_tokens, grammar)
        except ModelUnreachable:
            before = (self.endpoint.api_base, self.endpoint.server_generation)
            self._follow_server(recheck=True)
            if (self.endpoint.api_base, self.endpoint.server_generation) == before:
                raise
            response = self._request(messages, seed, max_tokens, grammar)
        usage = getattr(response, "usage", None)
        self.usage["input_tokens"] += int(getattr(usage, "prompt_tokens", 0) or 0)
        self.usage["output_tokens"] += int(getattr(usage, "completion_tokens", 0) or 0)
        self.usage["calls"] += 1
        choice = response.choices[0] if response.choices else None
        content = getattr(getattr(choice, "message", None), "content", None)
        if not content or not content.strip():
            where = self.endpoint.api_base or "its provider"
            raise EmptyCompletion(f"model {self.endpoint.litellm_model!r} at {where} returned an empty answer "
                                  f"(finish_reason {getattr(choice, 'finish_reason', None)!r})")
        return content

    def _follow_server(self, recheck: bool) -> None:
        """Take the address the endpoint's supervisor reports (``recheck``: calls just failed,
        so it checks the server at once); nothing for an endpoint nobody supervises."""
        if self.endpoint.server_name is None:
            return
        from raydist.models.server import ModelServerError, follow_server  # deferred: ray (only when supervised)

        try:
            self.endpoint = follow_server(self.endpoint, self.restart_wait_s, recheck)
        except ModelServerError as exc:
            raise ModelUnreachable(f"model {self.endpoint.litellm_model!r}: {exc}") from exc

    def _request(self, messages: list[dict], seed: int, max_tokens: int, grammar: str | None):
        kwargs = self.endpoint.request_kwargs() | {
            "temperature": self.temperature, "max_tokens": max_tokens, "seed": seed,
            "timeout": request_timeout(max_tokens, self.timeout, self.min_tokens_per_s),
            "max_retries": 0, "drop_params": True,
        }
        if grammar is not None and self.endpoint.local:
            body = grammar_extra_body(self.endpoint.grammar_server, grammar)
            kwargs["extra_body"] = kwargs.get("extra_body", {}) | body
        call = partial(completion_function(self.endpoint), model=self.endpoint.litellm_model, messages=messages,
                       **kwargs, **self.endpoint.secret_kwargs())
        return call_with_retries(call, endpoint=self.endpoint, retries=self.retries)


def litellm_complete(endpoint: ModelEndpoint, *, temperature: float = 0.7, timeout: float = 120,
                     retries: int = 3, min_tokens_per_s: float | None = None) -> LitellmCompletion:
    """A ``complete(messages, *, seed, max_tokens, grammar=None) -> str`` callable on ``endpoint``.

    Each call is one ``litellm.completion`` with the endpoint's request arguments, its API key
    placeholder when local, and for a local server the grammar in ``extra_body``. The returned
    object keeps token totals in ``.usage`` (see ``LitellmCompletion``).

    Args:
        endpoint: where the model is reached.
        temperature: sampling temperature of every call.
        timeout: seconds one request may take before it counts as a transient failure; with
            ``min_tokens_per_s``, the base to which each request's generation time is added.
        retries: attempts per call (>= 1) when the model is unreachable or overloaded.
        min_tokens_per_s: None for a fixed ``timeout``; else a request for ``max_tokens`` may
            take ``timeout + max_tokens / min_tokens_per_s`` seconds (``request_timeout``).

    Raises:
        ValueError: ``retries`` < 1, or ``timeout`` or ``min_tokens_per_s`` not > 0.
    """
    return LitellmCompletion(endpoint, temperature=temperature, timeout=timeout, retries=retries,
                             min_tokens_per_s=min_tokens_per_s)
