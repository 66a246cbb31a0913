"""mini-swe-agent's text-based litellm model, reaching a `ModelEndpoint`.

Differences from `LitellmTextbasedModel`, each for one reason:
- transient failures (server down, overloaded, timed out) are retried a few times with short
  backoff and then end the run as `ModelUnreachable`, instead of mini-swe-agent's ten
  attempts with up to a minute between them;
- the local placeholder API key is added per call, so it never enters the serialized config;
- prompt and completion tokens are summed from `response.usage`, and each call's own
  counts are set in its message's `extra` (`input_tokens`, `output_tokens`) for the step
  records;
- cost comes from `raydist.models.pricing` (0 for local models, litellm's map otherwise).
"""

from __future__ import annotations

from functools import partial

from minisweagent.models.litellm_textbased_model import LitellmTextbasedModel

from raydist.models.endpoint import ModelEndpoint
from raydist.models.pricing import completion_cost
from raydist.models.retry import ModelUnreachable, call_with_retries

__all__ = ["EndpointModel", "ModelUnreachable"]


class EndpointModel(LitellmTextbasedModel):
    """`LitellmTextbasedModel` on `endpoint`; keyword arguments are its config fields.

    Attributes:
        input_tokens: prompt tokens summed over all responses (format errors included).
        output_tokens: completion tokens summed likewise.
        last_usage: `{"input_tokens", "output_tokens"}` of the latest response.
    """

    # Every failure that survives our own bounded retry in _query ends the run at once.
    abort_exceptions = [Exception]

    def __init__(self, endpoint: ModelEndpoint, *, retries: int = 3, **kwargs):
        self.endpoint = endpoint
        self.retries = retries
        self.input_tokens = 0
        self.output_tokens = 0
        self.last_usage = {"input_tokens": 0, "output_tokens": 0}
        super().__init__(model_name=endpoint.litellm_model, **kwargs)

    def _query(self, messages: list[dict[str, str]], **kwargs):
        call = partial(super()._query, messages, **(self.endpoint.secret_kwargs() | kwargs))
        return call_with_retries(call, endpoint=self.endpoint, retries=self.retries)

    def query(self, messages: list[dict], **kwargs) -> dict:
        """mini-swe-agent's query; the message's `extra` also holds this call's `input_tokens`
        and `output_tokens` (as the server reported them, 0 when it did not).

        Raises:
            ModelUnreachable: the endpoint did not answer within `retries` attempts.
            minisweagent.exceptions.FormatError: the answer holds no single action.
        """
        message = super().query(messages, **kwargs)
        message["extra"] |= self.last_usage
        return message

    def _calculate_cost(self, response) -> dict[str, float]:
        usage = getattr(response, "usage", None)
        self.last_usage = {"input_tokens": int(getattr(usage, "prompt_tokens", 0) or 0),
                           "output_tokens": int(getattr(usage, "completion_tokens", 0) or 0)}
        self.input_tokens += self.last_usage["input_tokens"]
        self.output_tokens += self.last_usage["output_tokens"]
        return {"cost": completion_cost(response, self.endpoint.litellm_model, local=self.endpoint.local)}

    def serialize(self) -> dict:
        """mini-swe-agent's model record plus token totals and the endpoint (no key)."""
        data = super().serialize()
        data["info"]["model_stats"] = {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens}
        data["info"]["config"]["endpoint"] = {
            "litellm_model": self.endpoint.litellm_model, "api_base": self.endpoint.api_base,
            "local": self.endpoint.local,
        }
        return data
