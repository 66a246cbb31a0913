"""What an agent run hands back, and how its trajectory is written without secrets."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from minisweagent.agents.default import DefaultAgent

from raydist.models.endpoint import LOCAL_PLACEHOLDER_KEY
from raydist.results.redact import redact, secret_values


@dataclass(frozen=True)
class AgentOutcome:
    """The end of one agent run.

    Attributes:
        exit_status: why it ended: mini-swe-agent's names (`Submitted`, `LimitsExceeded`,
            `TimeExceeded`, `RepeatedFormatError`) or the exception type of a failure
            (e.g. `ModelUnreachable`).
        steps: model calls made (scripted agents: commands run).
        input_tokens: prompt tokens over all calls, as the server reported them.
        output_tokens: completion tokens over all calls.
        cost: USD (0 for local models and scripted agents).
        trajectory: the saved trajectory (mini-swe-agent format, secrets redacted).
        error: a failure's message, None when the run ended normally.
    """

    exit_status: str
    steps: int
    input_tokens: int
    output_tokens: int
    cost: float
    trajectory: dict
    error: str | None = None


def save_trajectory(data: dict, path: str | os.PathLike | None) -> dict:
    """Redact API keys (environment values and the local placeholder) from `data` and write
    it as JSON to `path` (parent folders created). Returns the redacted copy."""
    clean = redact(data, [*secret_values(), LOCAL_PLACEHOLDER_KEY])
    if path:
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(target.name + ".tmp")
        tmp.write_text(json.dumps(clean, indent=2, default=str))
        os.replace(tmp, target)
    return clean


class RedactingAgent(DefaultAgent):
    """mini-swe-agent's DefaultAgent whose trajectory saves (after every step) go through
    `save_trajectory`, so no API key reaches the disk."""

    def save(self, path, *extra_dicts) -> dict:
        """Serialize, redact, and write to `path` when given; returns the redacted data."""
        return save_trajectory(self.serialize(*extra_dicts), path)
