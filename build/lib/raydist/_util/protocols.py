"""The one way to a model, as a protocol: every LLM caller (L1 and L4 view building, DyCodeEval's
agents) takes a ``Complete`` and never a client."""

from __future__ import annotations

from typing import Protocol

__all__ = ["Complete"]


class Complete(Protocol):
    """``complete(messages, *, seed, max_tokens, grammar=None) -> str``: chat ``messages``
    (``[{"role", "content"}]``) in, the answer's text out; raises on failure.

    ``raydist.models.litellm_complete`` builds one (retrying transient errors itself); it may
    carry ``.usage`` (running ``input_tokens`` / ``output_tokens`` totals) and ``.temperature``.
    ``grammar`` is a GBNF grammar a local server honours (llama.cpp), or None.
    """

    def __call__(self, messages: list[dict], *, seed: int, max_tokens: int, grammar: str | None = None) -> str: ...
