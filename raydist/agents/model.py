"""mini-swe-agent's text-based litellm model, reaching a `ModelEndpoint`.

Differences from `LitellmTextbasedModel`, each for one reason:
- transient failures (server down, overloaded, timed out) are retried a few times with short
  backoff, instead of mini-swe-agent's ten attempts with up to a minute between them; when
  the endpoint's server is supervised (`ModelEndpoint.server_name`), each call first asks the
  supervisor for the current address (waiting while it restarts the server, which may move
  it to another port), and a call that stays unreachable gets another round of attempts
  (at most `reconnects`) when the supervisor, checking at once, restarted the server
  meanwhile; then the run ends with `ModelUnreachable`, also when the supervisor says the
  server failed for good: the machine failed the unit, not the model (the outcome taxonomy
  makes it `InfrastructureError(cause="model_unreachable")`; its exit status
  `ModelUnreachable` is an infrastructure error, never the agent's own end); a replicated
  model's calls go through litellm's Router over its replicas (`raydist.models.router`),
  which follows their restarts itself;
- the local placeholder API key is added per call, so it never enters the serialized config;
- prompt and completion tokens are summed from `response.usage`, and each call's own
  counts are set in its message's `extra` (`input_tokens`, `output_tokens`) for the step
  records;
- cost comes from `raydist.models.pricing` (0 for local models, litellm's map otherwise).
"""

from __future__ import annotations

from functools import partial

from minisweagent.models.litellm_textbased_model import LitellmTextbasedModel

from raydist.models.endpoint import RESTART_WAIT_S, ModelEndpoint
from raydist.models.pricing import completion_cost
from raydist.models.retry import ModelUnreachable, call_with_retries
from raydist.models.router import completion_function

__all__ = ["EndpointModel", "ModelUnreachable"]  # ModelUnreachable: raised by call_with_retries


class EndpointModel(LitellmTextbasedModel):
    """`LitellmTextbasedModel` on `endpoint`; keyword arguments are its config fields.

    Args:
        endpoint: where the model is reached.
        retries: attempts per call on transient failures (`call_with_retries`).
        reconnects: further rounds of `retries` attempts, each after the endpoint's
            supervisor restarted the server (only for a supervised endpoint).
        restart_wait_s: longest wait for a restarting server per round, seconds.

    Attributes:
        input_tokens: prompt tokens summed over all responses (format errors included).
        output_tokens: completion tokens summed likewise.
        last_usage: `{"input_tokens", "output_tokens"}` of the latest response.
    """

    # Every failure that survives our own bounded retry in _query ends the run at once.
    abort_exceptions = [Exception]

    def __init__(self, endpoint: ModelEndpoint, *, retries: int = 3, reconnects: int = 2,
                 restart_wait_s: float = RESTART_WAIT_S, **kwargs):
        self.endpoint = endpoint
        self.retries = retries
        self.reconnects = reconnects
        self.restart_wait_s = restart_wait_s
        self.input_tokens = 0
        self.output_tokens = 0
        self.last_usage = {"input_tokens": 0, "output_tokens": 0}
        super().__init__(model_name=endpoint.litellm_model, **kwargs)

    def _query(self, messages: list[dict[str, str]], **kwargs):
        if self.endpoint.replica_names:  # litellm's Router over the replicas follows them itself
            call = partial(completion_function(self.endpoint), model=self.endpoint.litellm_model, messages=messages,
                           **(self.config.model_kwargs | self.endpoint.secret_kwargs() | kwargs))
            return call_with_retries(call, endpoint=self.endpoint, retries=self.retries)
        self._follow_server(recheck=False)
        for round_ in range(1 + (self.reconnects if self.endpoint.server_name else 0)):
            call = partial(super()._query, messages,
                           **(self.endpoint.secret_kwargs() | kwargs | self._address_kwargs()))
            try:
                return call_with_retries(call, endpoint=self.endpoint, retries=self.retries)
            except ModelUnreachable as exc:
                failure = exc
            if not self.endpoint.server_name or round_ == self.reconnects:
                break
            # Another round only for a server that was restarted (or moved) meanwhile: the same
            # process not answering would not answer the next attempts either.
            before = (self.endpoint.api_base, self.endpoint.server_generation)
            self._follow_server(recheck=True)
            if (self.endpoint.api_base, self.endpoint.server_generation) == before:
                break
        if not self.endpoint.server_name:
            raise failure
        raise ModelUnreachable(f"{failure} (server restarted {self.endpoint.server_generation} time(s) so far)") \
            from failure.__cause__

    def _address_kwargs(self) -> dict:
        return {"api_base": self.endpoint.api_base} if self.endpoint.api_base else {}

    def _follow_server(self, recheck: bool) -> None:
        """Take the address the endpoint's supervisor reports (waiting while it restarts;
        `recheck`: calls just failed, so the supervisor checks the server at once)."""
        if self.endpoint.server_name is None:
            return
        from raydist.models.server import ModelServerError, follow_server  # deferred: ray (only when supervised)

        try:
            endpoint = follow_server(self.endpoint, self.restart_wait_s, recheck)
        except ModelServerError as exc:
            raise ModelUnreachable(f"model {self.endpoint.litellm_model!r}: {exc}") from exc
        if endpoint.api_base != self.endpoint.api_base:
            self.config.model_kwargs["api_base"] = endpoint.api_base  # what serialize() records
        self.endpoint = endpoint

    def query(self, messages: list[dict], **kwargs) -> dict:
        """mini-swe-agent's query; the message's `extra` also holds this call's `input_tokens`
        and `output_tokens` (as the server reported them, 0 when it did not).

        Raises:
            ModelUnreachable: the endpoint did not answer (within `retries` attempts, per
                reconnection round), or its supervisor reports that the server failed for
                good, is gone or still restarting after `restart_wait_s`.
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
