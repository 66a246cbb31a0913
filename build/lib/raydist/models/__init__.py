"""Models: where completions come from (litellm endpoints, one-call completion with retries,
local model servers, prices, grammars).

Importing this package pins litellm to the cost map bundled with its pinned version: the
remote map is unreachable offline, and a moving price table would make costs irreproducible.
"""

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from raydist.models.completion import EmptyCompletion, LitellmCompletion, litellm_complete  # noqa: E402
from raydist.models.endpoint import MissingCredentials, ModelEndpoint, UnknownModel, check_model_name  # noqa: E402
from raydist.models.grammar import ACTION_REGEX, action_grammar, grammar_extra_body  # noqa: E402
from raydist.models.local import EMBEDDED_MODEL_NAME, embedded_model_path, llama_cpp_command  # noqa: E402
from raydist.models.pricing import UnknownPrice, completion_cost, register_local_model, register_price  # noqa: E402
from raydist.models.retry import TRANSIENT_ERRORS, ModelUnreachable  # noqa: E402

__all__ = [
    "ACTION_REGEX",
    "EMBEDDED_MODEL_NAME",
    "TRANSIENT_ERRORS",
    "EmptyCompletion",
    "LitellmCompletion",
    "MissingCredentials",
    "ModelEndpoint",
    "ModelUnreachable",
    "UnknownModel",
    "UnknownPrice",
    "action_grammar",
    "check_model_name",
    "completion_cost",
    "embedded_model_path",
    "grammar_extra_body",
    "litellm_complete",
    "llama_cpp_command",
    "register_local_model",
    "register_price",
]
