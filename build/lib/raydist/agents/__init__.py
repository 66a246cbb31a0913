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

from raydist.agents.environment import ViewEnvironment, truncate_middle  # noqa: E402
from raydist.agents.loop import run_agent  # noqa: E402
from raydist.agents.model import EndpointModel, ModelUnreachable  # noqa: E402
from raydist.agents.outcome import AgentOutcome, save_trajectory  # noqa: E402
from raydist.agents.scripted import null, oracle  # noqa: E402
from raydist.agents.settings import AgentSettings, Prompts, load_prompts  # noqa: E402

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
