"""mini-swe-agent's Environment protocol on a raydist Sandbox, seen through a repository view.

The agent writes commands in view coordinates; each runs in original coordinates
(`translator.to_original`) and its output is shown back in view coordinates
(`translator.to_view`), SchrodingerRepo §III-C/§III-F. Every step is recorded with its
action category (§IV RQ2), the exposure audit of the observation shown and the hidden names
the agent typed without having been shown them (`raydist.views.audit`, §III-F).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from minisweagent.exceptions import Submitted
from pydantic import BaseModel

from raydist.agents.taxonomy import classify
from raydist.views.audit import ExposureLog, IdentitySet, find_exposures, hidden_names

if TYPE_CHECKING:
    from raydist.sandbox import ExecResult, Sandbox
    from raydist.views import View

SUBMIT_MARKER = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
DEFAULT_ENV = {"PAGER": "cat", "MANPAGER": "cat", "LESS": "-R", "PIP_PROGRESS_BAR": "off", "TQDM_DISABLE": "1"}


class ViewEnvironmentConfig(BaseModel):
    """Settings of a ViewEnvironment (serialized into the trajectory)."""

    cwd: str = "/testbed"
    """Directory in which commands run."""
    timeout: float = 60.0
    """Seconds before a command is killed."""
    env: dict[str, str] = dict(DEFAULT_ENV)
    """Environment variables of every command."""
    output_limit_chars: int = 4000
    """Observations longer than this keep their head and tail only."""


def truncate_middle(text: str, limit: int) -> str:
    """`text` if it has at most `limit` characters, else its first and last `limit // 2`
    characters around a line saying how many were elided. `limit` 0 means no limit."""
    if limit <= 0 or len(text) <= limit:
        return text
    head, tail = limit // 2, limit - limit // 2
    return f"{text[:head]}\n[... {len(text) - head - tail} characters elided ...]\n{text[len(text) - tail:]}"


def leak_count(view: View, text: str) -> int:
    """Identity tokens of the original repository that `text` names (`raydist.views.audit`,
    §III-F), for a `view` built by `build_view` (it carries `view.identity`).

    Raises ValueError when `view` carries no identity tokens (no `IdentitySet`, or an empty
    one: a bare translator, a view built by hand): there is nothing to search for, and a
    count of 0 would hold by construction instead of by audit."""
    identity = getattr(view, "identity", None)
    if not isinstance(identity, IdentitySet) or len(identity) == 0:
        kind = "an empty IdentitySet" if isinstance(identity, IdentitySet) else f"identity={identity!r}"
        raise ValueError(f"cannot count leaks for view {getattr(view, 'instance_id', view)!r}: it carries {kind}, "
                         "no identity tokens of the original repository to search for; build it with "
                         "raydist.views.build_view")
    return len(find_exposures(text, identity))


def exposure_log(view: View) -> ExposureLog:
    """The run's `ExposureLog`: `view.identity`, the tokens the view hides, its statement as
    shown. A view without an identity (built by hand) gets an empty one: every count is 0."""
    identity = getattr(view, "identity", None)
    if not isinstance(identity, IdentitySet):
        identity = IdentitySet(origins={})
    return ExposureLog(identity, hidden_names(view, identity), view.problem_statement)


class ViewEnvironment:
    """Runs the agent's bash commands in `sandbox`, translated through `view.translator`.

    Args:
        sandbox: a `raydist.sandbox.Sandbox` (anything with its `exec`).
        view: a `raydist.views.View`; its `translator` maps commands and outputs.
        timeout: seconds per command.
        env: environment variables added to `DEFAULT_ENV`.
        cwd: directory of every command.
        output_limit_chars: characters kept of each output (head and tail).

    Each executed command is recorded in `steps` as a dict:
        step: 1-based position in the run.
        command: as the agent wrote it (view coordinates); executed: as run (original).
        category: `taxonomy.classify(command)`, one of navigate/search/read/probe/edit/test/
            submit/other (§IV RQ2).
        returncode, seconds (wall time of the command), timed_out.
        input_tokens, output_tokens: the tokens of the model call that produced the command,
            taken from the action's own `input_tokens`/`output_tokens` keys (0 when absent);
            the agent sets them on the first action of each response only (`RecordingAgent`).
        leak_count, leaked_names: the identity tokens of the original repository named in the
            observation as shown, after translation and truncation (count, JSON list;
            `raydist.views.audit.find_exposures`, §III-F).
        memorised_count, memorised_names: hidden original names the command names that the
            agent had not been shown before this step (count, JSON list; `ExposureLog`).

    `exposure` is the run's `ExposureLog` (statement audit, every name seen, every name memorised).
    """

    def __init__(self, sandbox: Sandbox, view: View, timeout: float = 60.0, env: Mapping[str, str] | None = None, *,
                 cwd: str = "/testbed", output_limit_chars: int = 4000):
        self.sandbox = sandbox
        self.view = view
        self.config = ViewEnvironmentConfig(cwd=cwd, timeout=timeout, env=DEFAULT_ENV | dict(env or {}),
                                            output_limit_chars=output_limit_chars)
        self.steps: list[dict[str, Any]] = []
        self.exposure = exposure_log(view)

    def execute(self, action: dict, cwd: str = "", *, timeout: float | None = None) -> dict[str, Any]:
        """Run `action["command"]` (view coordinates) and return mini-swe-agent's output dict
        `{"output", "returncode", "exception_info", "extra"}` with the output in view
        coordinates, truncated to `output_limit_chars`; `extra` is the step's record.
        `action` may carry the producing call's `input_tokens` and `output_tokens` (ints).
        `exception_info` (the observation's error line) says when the command was killed: at
        its time limit, or by the kernel's OOM killer (`ExecResult.oom_killed`); the sandbox
        survives the latter and the run goes on.

        Raises:
            Submitted: the output's first line is COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT and the
                command succeeded; the rest of the output is the submission.
            ValueError: `action` has no string `command`.
        """
        command = action.get("command") if isinstance(action, dict) else None
        if not isinstance(command, str):
            raise ValueError(f"action must be a dict with a string 'command', got {action!r}")
        memorised = self.exposure.memorised(command)
        executed = self.view.translator.to_original(command)
        limit = timeout or self.config.timeout
        result = self.sandbox.exec(executed, timeout=limit, cwd=cwd or self.config.cwd, env=self.config.env)
        seen = self.view.translator.to_view(result.output)
        shown = truncate_middle(seen, self.config.output_limit_chars)
        # Audited after truncation: a cut can shorten a virtual name into an original one.
        leaked = self.exposure.shown(shown)
        record = {
            "step": len(self.steps) + 1, "command": command, "executed": executed, "category": classify(command),
            "returncode": result.returncode, "seconds": round(result.seconds, 3), "timed_out": result.timed_out,
            "input_tokens": int(action.get("input_tokens", 0)), "output_tokens": int(action.get("output_tokens", 0)),
            "leak_count": len(leaked), "leaked_names": json.dumps(leaked),
            "memorised_count": len(memorised), "memorised_names": json.dumps(memorised),
        }
        self.steps.append(record)
        _check_submitted(seen, result.returncode)
        return {"output": shown, "returncode": result.returncode, "exception_info": self._killed(result, limit),
                "extra": record}

    def _killed(self, result: ExecResult, limit: float) -> str:
        """Why the command was killed, for the observation's error line ("" when it was not)."""
        if result.timed_out:
            return f"the command was killed after {limit:g} s"
        if getattr(result, "oom_killed", False):
            memory = getattr(self.sandbox, "memory", None)
            within = f" of {memory}" if memory else ""
            return (f"the command was killed by the kernel: it ran out of memory (the sandbox's limit{within}); "
                    "the sandbox is still running")
        return ""

    def get_template_vars(self, **kwargs) -> dict[str, Any]:
        """The config fields plus the view's level and seed, for the prompt templates."""
        return self.config.model_dump() | {"level": self.view.level, "seed": self.view.seed} | kwargs

    def serialize(self) -> dict:
        """Config, view identity and per-step command records, for the trajectory."""
        return {
            "info": {
                "config": {
                    "environment": self.config.model_dump(mode="json"),
                    "environment_type": f"{self.__class__.__module__}.{self.__class__.__name__}",
                },
                "view": {"instance": self.view.instance_id, "level": self.view.level, "seed": self.view.seed},
                "commands": list(self.steps),
            }
        }


def _check_submitted(output: str, returncode: int) -> None:
    # Same rule as mini-swe-agent's DockerEnvironment, so every agent submits the same way.
    lines = output.lstrip().splitlines(keepends=True)
    if lines and lines[0].strip() == SUBMIT_MARKER and returncode == 0:
        submission = "".join(lines[1:])
        raise Submitted(
            {"role": "exit", "content": submission, "extra": {"exit_status": "Submitted", "submission": submission}}
        )
