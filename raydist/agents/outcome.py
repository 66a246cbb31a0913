"""What an agent run hands back, and the DefaultAgent that records it: trajectories written
without secrets, each model call's tokens attached to the step it produced."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from minisweagent.agents.default import DefaultAgent

from raydist.agents.environment import exposure_log
from raydist.agents.taxonomy import PRIORITY
from raydist.models.endpoint import LOCAL_PLACEHOLDER_KEY
from raydist.results.redact import redact, secret_values
from raydist.results.store import atomic_write_text
from raydist.views.audit import IdentitySet, view_manifest

if TYPE_CHECKING:
    from raydist.views import View


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
        step_records: one dict per executed command, in order (`ViewEnvironment.steps`:
            step, command, executed, category, returncode, seconds, timed_out, input_tokens,
            output_tokens, leak_count, leaked_names, memorised_count, memorised_names); empty
            when the run failed before its first command.
        statement_leaks: identity tokens of the original repository in the problem statement
            as shown (`environment.leak_count`, §III-F).
        statement_names: those tokens, when the runner recorded them (`run_agent` does).
        submission: what the agent submitted (the output after the submit marker, in view
            coordinates, as the agent saw it); "" when it did not submit.
    """

    exit_status: str
    steps: int
    input_tokens: int
    output_tokens: int
    cost: float
    trajectory: dict
    error: str | None = None
    step_records: tuple[dict, ...] = ()
    statement_leaks: int = 0
    statement_names: tuple[str, ...] = ()
    submission: str = ""

    @property
    def leaked_names(self) -> list[str]:
        """Sorted distinct identity tokens shown to the agent: `statement_names` and every
        step's `leaked_names` (§III-F exposure audit)."""
        return sorted(set(self.statement_names).union(*(_names(r, "leaked_names") for r in self.step_records)))

    @property
    def leak_count(self) -> int:
        """The run's exposure audit (§III-F): distinct identity tokens shown, `len(leaked_names)`,
        or `statement_leaks` when the statement's tokens were not recorded and no step showed any."""
        return max(len(self.leaked_names), self.statement_leaks)

    @property
    def memorised_names(self) -> list[str]:
        """Sorted distinct hidden original names the agent typed before it was shown them."""
        return sorted(set().union(*(_names(r, "memorised_names") for r in self.step_records)))

    @property
    def action_counts(self) -> dict[str, int]:
        """Executed commands per taxonomy category (§IV RQ2); every category is a key."""
        counts = dict.fromkeys(PRIORITY, 0)
        for record in self.step_records:
            counts[record["category"]] += 1
        return counts


def _names(record: dict, key: str) -> set[str]:
    value = record.get(key) or "[]"
    return set(json.loads(value) if isinstance(value, str) else value)


def exposure_columns(view: View, step_records) -> dict:
    """The exposure-audit columns of one unit's row (``raydist.results.schema``), from the
    view and the run's step records (§III-F): ``leak_count``/``leaked_names`` (distinct
    identity tokens shown: the statement as shown plus every observation; JSON list),
    ``unmapped_names`` (identity tokens the view leaves visible, ``view_manifest``),
    ``memorised_count``/``memorised_names`` (distinct hidden names the agent typed before
    being shown them; JSON list) and ``audit`` (the manifest, for ``view_meta``).

    Raises ValueError when ``view`` carries no identity tokens (built by hand, not by
    ``raydist.views.build_view``): its counts would be 0 by construction, not measured."""
    identity = getattr(view, "identity", None)
    if not isinstance(identity, IdentitySet) or len(identity) == 0:
        raise ValueError(f"no exposure audit for view {getattr(view, 'instance_id', view)!r}: it carries no identity "
                         "tokens of the original repository, so every count would be 0 unmeasured; build the view "
                         "with raydist.views.build_view")
    log = exposure_log(view)
    manifest = view_manifest(view, log.identity)
    leaked = set(log.statement).union(*(_names(r, "leaked_names") for r in step_records))
    memorised = set().union(*(_names(r, "memorised_names") for r in step_records))
    return {"leak_count": len(leaked), "leaked_names": json.dumps(sorted(leaked)),
            "unmapped_names": len(manifest["unmapped"]), "memorised_count": len(memorised),
            "memorised_names": json.dumps(sorted(memorised)),
            "audit": {**manifest, "statement": log.statement}}


def save_trajectory(data: dict, path: str | os.PathLike | None) -> dict:
    """Redact API keys (environment values and the local placeholder) from `data` and write
    it as JSON to `path` (parent folders created). Returns the redacted copy."""
    clean = redact(data, [*secret_values(), LOCAL_PLACEHOLDER_KEY])
    if path:
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(target, json.dumps(clean, indent=2, default=str))
    return clean


class RecordingAgent(DefaultAgent):
    """mini-swe-agent's DefaultAgent with two additions:

    - trajectory saves (after every step) go through `save_trajectory`, so no API key
      reaches the disk;
    - the tokens of each model call (`input_tokens`, `output_tokens` in the message's
      `extra`, 0 when the model gives none) go to the environment with the call's first
      action only, so summing the step records counts every executed call once. Calls that
      produced no action (format errors) appear in the run's totals, not in any step.
    """

    def execute_actions(self, message: dict) -> list[dict]:
        """Execute the message's actions, the first one carrying the call's tokens; add and
        return the observation messages (as DefaultAgent does)."""
        extra = message.get("extra", {})
        usage = {key: int(extra.get(key) or 0) for key in ("input_tokens", "output_tokens")}
        actions = [action | usage if i == 0 else action for i, action in enumerate(extra.get("actions", []))]
        outputs = [self.env.execute(action) for action in actions]
        return self.add_messages(*self.model.format_observation_messages(message, outputs, self.get_template_vars()))

    def save(self, path, *extra_dicts) -> dict:
        """Serialize, redact, and write to `path` when given; returns the redacted data."""
        return save_trajectory(self.serialize(*extra_dicts), path)
