"""Agents: the mini-swe-agent loop on a model endpoint, its view-aware environment, and the
scripted `oracle` and `null` agents.

    run_agent(view=, sandbox=, endpoint=, settings=, trajectory_path=) -> AgentOutcome
    oracle(view=, sandbox=, instance=, read_original=, settings=, trajectory_path=) -> AgentOutcome
    null(view=, sandbox=, settings=, trajectory_path=) -> AgentOutcome
"""

import os

# Before mini-swe-agent and litellm are imported: no start-up banner, and litellm's bundled
# cost map instead of a download (offline, and prices fixed by the pinned version).
os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from raydist.agents.settings import AgentSettings, Prompts, load_prompts  # noqa: E402

# The loop, the model and the scripted agents import mini-swe-agent and litellm (seconds): a
# process that only plans, reports or reads settings never needs them, so they load on first use.
_LAZY = {"ViewEnvironment": "environment", "truncate_middle": "environment", "run_agent": "loop",
         "EndpointModel": "model", "ModelUnreachable": "model", "AgentOutcome": "outcome",
         "save_trajectory": "outcome", "null": "scripted", "oracle": "scripted"}


def __getattr__(name: str):
    """The names of the modules that import mini-swe-agent or litellm, imported on first use (PEP 562)."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"raydist.agents.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'raydist.agents' has no attribute {name!r}")

__all__ = [
    "AgentOutcome",
    "AgentSettings",
    "EndpointModel",
    "ModelUnreachable",
    "Prompts",
    "ViewEnvironment",
    "load_prompts",
    "null",
    "oracle",
    "run_agent",
    "save_trajectory",
    "truncate_middle",
]
