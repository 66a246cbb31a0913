"""Prices per token. Models served locally cost 0 and are registered with litellm as such, so
cost tracking never fails on them; hosted models are priced by litellm's own cost map."""

from __future__ import annotations

import litellm


class UnknownPrice(LookupError):
    """litellm has no price for a hosted model, so a cost limit could not be enforced."""


def register_price(litellm_model: str, *, input_per_token: float, output_per_token: float,
                   context_tokens: int | None = None) -> None:
    """Register a price (USD per token) for `litellm_model` with litellm.

    Args:
        litellm_model: the name passed to litellm, e.g. `openai/gemma-3-270m`.
        input_per_token: USD per prompt token (>= 0).
        output_per_token: USD per completion token (>= 0).
        context_tokens: context window, if known.

    Raises:
        ValueError: a negative price.
    """
    if input_per_token < 0 or output_per_token < 0:
        raise ValueError(f"prices for {litellm_model!r} must be >= 0, got {input_per_token}, {output_per_token}")
    provider = litellm.get_llm_provider(litellm_model)[1]
    info = {
        "input_cost_per_token": float(input_per_token),
        "output_cost_per_token": float(output_per_token),
        # set explicitly so litellm does not warn that cache prices default to 0
        "cache_creation_input_token_cost": 0.0,
        "cache_read_input_token_cost": 0.0,
        "litellm_provider": provider,
        "mode": "chat",
    }
    if context_tokens:
        info |= {"max_input_tokens": context_tokens, "max_tokens": context_tokens}
    litellm.register_model({litellm_model: info})


def register_local_model(litellm_model: str, *, context_tokens: int | None = None) -> None:
    """Register a locally served model at zero cost (idempotent)."""
    register_price(litellm_model, input_per_token=0.0, output_per_token=0.0, context_tokens=context_tokens)


def price_per_token(litellm_model: str) -> tuple[float, float]:
    """(input, output) USD per token of `litellm_model`.

    Raises:
        UnknownPrice: litellm does not know the model; the message says how to register one.
    """
    try:
        info = litellm.get_model_info(litellm_model)
    except Exception as exc:
        raise UnknownPrice(
            f"no price for model {litellm_model!r} in litellm's cost map; register one with "
            "raydist.models.pricing.register_price(model, input_per_token=..., output_per_token=...) "
            "or mark the model as local (cost 0)"
        ) from exc
    return float(info.get("input_cost_per_token") or 0.0), float(info.get("output_cost_per_token") or 0.0)


def completion_cost(response, litellm_model: str, *, local: bool) -> float:
    """Cost in USD of one litellm completion `response`; 0.0 for local models.

    Raises:
        UnknownPrice: a hosted model litellm cannot price.
    """
    if local:
        return 0.0
    try:
        return float(litellm.completion_cost(response, model=litellm_model))
    except Exception as exc:
        raise UnknownPrice(f"litellm could not price a response of {litellm_model!r}: {exc}") from exc
