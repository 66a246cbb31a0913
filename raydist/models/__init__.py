"""Models: where completions come from (litellm endpoints, one-call completion with retries,
local model servers, prices, grammars).

A local server is a child process (``process``) kept answering by a ``supervisor``; under Ray
the ``ModelServer`` actor (``server``) owns both. ``ModelServer``, ``current_server`` and
``follow_server`` import Ray, so they are loaded on first use.

Importing this package pins litellm to the cost map bundled with its pinned version: the
remote map is unreachable offline, and a moving price table would make costs irreproducible.
"""

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from raydist.models.grammar import ACTION_REGEX, action_grammar, grammar_extra_body  # noqa: E402
from raydist.models.local import embedded_model_path  # noqa: E402
from raydist.models.process import ModelServerError, ServerProcess, free_port, port_is_free  # noqa: E402
from raydist.models.supervisor import Supervisor, SupervisorPolicy  # noqa: E402

# Imported on first use (PEP 562): the Ray-backed names of ``server``, and those of the modules
# that import litellm (seconds), which a process that only plans or reads settings never needs.
_LAZY = {"ModelServer": "server", "current_server": "server", "follow_server": "server",
         "EmptyCompletion": "completion", "LitellmCompletion": "completion", "litellm_complete": "completion",
         "MissingCredentials": "endpoint", "ModelEndpoint": "endpoint", "UnknownModel": "endpoint",
         "check_model_name": "endpoint", "UnknownPrice": "pricing", "completion_cost": "pricing",
         "register_local_model": "pricing", "register_price": "pricing", "TRANSIENT_ERRORS": "retry",
         "ModelUnreachable": "retry"}


def __getattr__(name: str):
    """The names of ``_LAZY``, imported from their module on first use (PEP 562)."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"raydist.models.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'raydist.models' has no attribute {name!r}")


__all__ = [
    "ACTION_REGEX",
    "TRANSIENT_ERRORS",
    "EmptyCompletion",
    "LitellmCompletion",
    "MissingCredentials",
    "ModelEndpoint",
    "ModelServer",
    "ModelServerError",
    "ModelUnreachable",
    "ServerProcess",
    "Supervisor",
    "SupervisorPolicy",
    "UnknownModel",
    "UnknownPrice",
    "action_grammar",
    "check_model_name",
    "completion_cost",
    "current_server",
    "follow_server",
    "free_port",
    "embedded_model_path",
    "grammar_extra_body",
    "litellm_complete",
    "port_is_free",
    "register_local_model",
    "register_price",
]
