"""Where one model is reached: a litellm model name, an optional server URL, request extras.

API keys come from the environment only (litellm reads the provider's variable). A local
server needs no key, but the OpenAI client insists on one, so a placeholder is passed at call
time and never stored in a config, trajectory or result.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import litellm

litellm.suppress_debug_info = True  # otherwise litellm prints a provider banner on every bad name

LOCAL_PLACEHOLDER_KEY = "raydist-local-no-key"

RESTART_WAIT_S = 300.0
"""How long a model call waits for its restarting server before the unit fails (seconds)."""

_NAMING_HELP = (
    "name a model as litellm does, '<provider>/<model>' (e.g. 'openai/gpt-4o-mini', "
    "'anthropic/claude-sonnet-4-5'); a local OpenAI-compatible server is 'openai/<served name>' "
    "with local=True and its api_base"
)


class UnknownModel(ValueError):
    """litellm cannot tell which provider serves the model name."""


class MissingCredentials(UnknownModel):
    """A hosted model's API key variables are not set in the environment."""


@dataclass(frozen=True)
class ModelEndpoint:
    """One model as litellm reaches it.

    Attributes:
        litellm_model: litellm model name, `<provider>/<model>`.
        api_base: server URL (`http://127.0.0.1:8080/v1`), None for the provider's default.
        local: True for a server raydist runs itself: zero cost, placeholder API key.
        extra_body: extra JSON fields of each request (e.g. a grammar).
        completion_kwargs: extra keyword arguments of `litellm.completion` (e.g. `timeout`).
        grammar_server: which request field carries a grammar: "llama_cpp" or "vllm".
        server_name: Ray name of the `ModelServer` actor that supervises the server (it may
            move `api_base` when it restarts it); None when nobody restarts it.
        server_namespace: that actor's Ray namespace.
        server_generation: restarts of that server when `api_base` was read from it.
        replica_names: Ray names of the `ModelServer` actors of a replicated model
            (`local_models.<name>.replicas` > 1; `server_name` is then None): calls go through
            litellm's Router over them (`raydist.models.router.completion_function`), and
            `api_base` is only the first replica's address at start.
        admission: the launch's ledger and this model's limiter of calls in flight
            (`raydist.models.admission.AdmissionRef`), None: calls are neither limited nor booked.
    """

    litellm_model: str
    api_base: str | None = None
    local: bool = False
    extra_body: Mapping[str, Any] = field(default_factory=dict)
    completion_kwargs: Mapping[str, Any] = field(default_factory=dict)
    grammar_server: str = "llama_cpp"
    server_name: str | None = None
    server_namespace: str | None = None
    server_generation: int = 0
    replica_names: tuple[str, ...] = ()
    admission: Any = None

    def __post_init__(self):
        if not isinstance(self.litellm_model, str) or not self.litellm_model.strip():
            raise UnknownModel(f"model name must be a non-empty string, got {self.litellm_model!r}; {_NAMING_HELP}")
        if self.local and not self.api_base:
            raise ValueError(f"local model {self.litellm_model!r} needs an api_base (its server's /v1 URL)")
        if "api_key" in self.completion_kwargs:
            raise ValueError(
                f"completion_kwargs of {self.litellm_model!r} hold an api_key; "
                "set the provider's key variable in the environment instead"
            )

    def request_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for `litellm.completion`, without any API key (safe to log)."""
        kwargs = dict(self.completion_kwargs)
        if self.api_base:
            kwargs["api_base"] = self.api_base
        if self.extra_body:
            kwargs["extra_body"] = dict(self.extra_body)
        return kwargs

    def secret_kwargs(self) -> dict[str, str]:
        """The API key to add at call time: the placeholder for local servers, else nothing."""
        return {"api_key": LOCAL_PLACEHOLDER_KEY} if self.local else {}


def check_model_name(name: str, *, local: bool = False) -> str:
    """Check that litellm can route `name` and, for hosted models, that its key is set.

    Args:
        name: litellm model name, e.g. `openai/gpt-4o-mini`.
        local: the model is served by raydist itself, so no key is needed.

    Returns:
        The provider litellm resolved (e.g. "openai").

    Raises:
        UnknownModel: no provider could be resolved; the message names the model and how to
            name one.
        MissingCredentials: hosted model whose key variables are unset; names the variables,
            never their values.
    """
    if not isinstance(name, str) or not name.strip():
        raise UnknownModel(f"model name must be a non-empty string, got {name!r}; {_NAMING_HELP}")
    try:
        provider = litellm.get_llm_provider(name)[1]
    except Exception as exc:
        raise UnknownModel(f"unknown model {name!r}: litellm cannot resolve its provider; {_NAMING_HELP}") from exc
    if not local:
        missing = litellm.validate_environment(model=name).get("missing_keys") or []
        if missing:
            raise MissingCredentials(
                f"model {name!r} ({provider}) needs the environment variable(s) {', '.join(missing)}; "
                "export them before starting raydist"
            )
    return provider
