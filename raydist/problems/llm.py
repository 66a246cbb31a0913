"""The one way DyCodeEval's agents (§3.2) reach a model: an injected ``complete`` callable,
wrapped so that every call is cached on disk and recorded.

Generating a benchmark costs many calls to a large model (§6 names the cost as a limitation),
so an answer is stored under the hash of everything that determines it and a repeated request
is answered from the cache: a folder (``<cache_dir>/problems/llm`` on the driver, or
``<storage>/_cache/problems/llm``) that Ray tasks reach through the driver-side
``raydist.cluster.cache_host.HostedCache``, so an answer given on one node is found on every
other. Every call, answered, cached or failed, is appended to ``calls``; a failed call raises
:class:`LLMCallFailed` after it is recorded, so the caller can record the failed variant instead
of dropping it.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Protocol

from raydist._util.hashing import stable_hash
from raydist._util.protocols import Complete
from raydist._util.storage import JsonCache
from raydist.models.completion import EmptyCompletion

__all__ = ["LLM", "Complete", "LLMCallFailed", "RecordedLLM"]

REQUEST_HASH_CHARS = 24


class LLM(Protocol):
    """What the agents call: one chat request under a role name, answered as text; ``model``
    names the model that answers."""

    model: str

    def __call__(self, role: str, messages: list[dict], *, seed: int, max_tokens: int,
                 grammar: str | None = None, problem_id: str | None = None) -> str: ...


class LLMCallFailed(RuntimeError):
    """A model call failed (after ``complete``'s own retries); ``str()`` is ``"role: Type: message"``.

    Attributes:
        role: the agent role that called (``"context"``, ``"rewrite"``...).
        problem_id: the seed problem the call was for, None for problem-independent calls.
        cause: the exception ``complete`` raised.
    """

    def __init__(self, role: str, problem_id: str | None, cause: BaseException):
        self.role, self.problem_id, self.cause = role, problem_id, cause
        super().__init__(f"{role}: {type(cause).__name__}: {cause}")


class RecordedLLM:
    """A cached, recorded :class:`LLM` over an injected :class:`Complete`.

    Args:
        complete: the model access; its failures become :class:`LLMCallFailed`.
        model: the generator model's name; part of every request hash.
        cache_dir: folder of the cached answers on this machine, one ``<request hash>.json``
            per request (created when missing); or
        cache: the cache itself: anything with ``get(key) -> dict | None`` and
            ``put(key, dict)`` over such files (``raydist._util.storage.JsonCache``,
            ``raydist.cluster.cache_host.HostedCache``). Give one of the two.
        log: list to append the call records to (shared between several wrappers); a new
            list when None. It is also ``self.calls``.

    Attributes:
        calls: one dict per call, in call order: ``role``, ``problem_id``, ``request_hash``,
            ``cached`` (answered from disk), ``ok``, ``error`` (``"Type: message"`` or None),
            ``input_tokens`` / ``output_tokens`` (0 when cached, None when ``complete`` keeps
            no ``.usage``) and ``seconds`` (wall time of the call).
    """

    def __init__(self, complete: Complete, *, model: str, cache_dir: str | Path | None = None, cache=None,
                 log: list | None = None):
        if (cache is None) == (cache_dir is None):
            raise TypeError("RecordedLLM: give cache_dir or cache, not both or neither")
        self.complete = complete
        self.model = model
        self.cache_dir = None if cache_dir is None else Path(cache_dir)
        if self.cache_dir is not None:
            self.cache_dir.mkdir(parents=True, exist_ok=True)
            cache = JsonCache(self.cache_dir)
        self.cache = cache
        self.calls: list[dict] = log if log is not None else []

    def request(self, role: str, messages: list[dict], *, seed: int, max_tokens: int,
                grammar: str | None) -> dict[str, Any]:
        """The request as cached: model, role, messages, seed, max_tokens, grammar and the
        temperature of ``complete`` (None when it has no ``.temperature``)."""
        return {"model": self.model, "role": role, "messages": messages, "seed": seed, "max_tokens": max_tokens,
                "grammar": grammar, "temperature": getattr(self.complete, "temperature", None)}

    def __call__(self, role: str, messages: list[dict], *, seed: int, max_tokens: int,
                 grammar: str | None = None, problem_id: str | None = None) -> str:
        """The answer to ``messages``, from the cache when this exact request was answered before.

        Raises:
            LLMCallFailed: ``complete`` raised; the call is in ``calls`` with ``ok`` False and
                nothing is cached, so a later run asks again. An empty answer
                (``raydist.models.completion.EmptyCompletion``) is no failure: it returns "".
        """
        request = self.request(role, messages, seed=seed, max_tokens=max_tokens, grammar=grammar)
        key = stable_hash(request, REQUEST_HASH_CHARS)
        record = {"role": role, "problem_id": problem_id, "request_hash": key, "cached": False, "ok": True,
                  "error": None, "input_tokens": None, "output_tokens": None, "seconds": 0.0}
        started = time.monotonic()
        answer = _cached_answer(self.cache.get(key), request)
        if answer is not None:
            self.calls.append(record | {"cached": True, "input_tokens": 0, "output_tokens": 0,
                                        "seconds": time.monotonic() - started})
            return answer
        before = _usage(self.complete)
        try:
            answer = self.complete(messages, seed=seed, max_tokens=max_tokens, grammar=grammar)
        except EmptyCompletion:
            # The model answered, with nothing: an answer like any other (a parser refuses it, a
            # solution fails its tests), cached so a resumed run does not ask again.
            answer = ""
        except Exception as exc:  # noqa: BLE001 - any failure of the model call is recorded, then re-raised
            self.calls.append(record | _spent(before, self.complete) | {
                "ok": False, "error": f"{type(exc).__name__}: {exc}", "seconds": time.monotonic() - started})
            raise LLMCallFailed(role, problem_id, exc) from exc
        self.calls.append(record | _spent(before, self.complete) | {"seconds": time.monotonic() - started})
        # Several generators may share a cache folder: a reader sees the whole file or none.
        self.cache.put(key, {"request": request, "answer": answer})
        return answer


def _usage(complete: Complete) -> dict | None:
    usage = getattr(complete, "usage", None)
    return dict(usage) if isinstance(usage, dict) else None


def _spent(before: dict | None, complete: Complete) -> dict:
    after = _usage(complete)
    if before is None or after is None:
        return {}
    return {name: after.get(name, 0) - before.get(name, 0) for name in ("input_tokens", "output_tokens")}


def _cached_answer(data: dict | None, request: dict) -> str | None:
    """The cached answer of ``request`` in the stored record ``data``; None when absent,
    unreadable or stored for another request."""
    if not isinstance(data, dict) or data.get("request") != request or not isinstance(data.get("answer"), str):
        return None
    return data["answer"]

