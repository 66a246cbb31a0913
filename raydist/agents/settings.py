"""Agent settings and prompt templates: the knobs of one agent run, as data."""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path

from raydist.prompts import DEFAULT_PROMPTS_DIR, read_templates

PROMPT_FILES = ("system", "instance", "observation", "format_error")


@dataclass(frozen=True)
class AgentSettings:
    """Limits and decoding settings of one agent run.

    Attributes:
        step_limit: most model calls (0 = none).
        cost_limit: stop once the cost in USD exceeds this (0 = none).
        wall_time_limit_s: stop after this many seconds, checked between steps (0 = none).
        command_timeout_s: each command is killed after this many seconds.
        output_limit_chars: each observation keeps at most this many characters (head and tail).
        grammar: constrain decoding to the action format (local servers only).
        temperature: sampling temperature.
        max_tokens: completion tokens per model call.
        prompts_dir: folder with system.j2, instance.j2, observation.j2, format_error.j2;
            relative paths are resolved against the raydist checkout.
        model_retries: attempts per model call when the server is unreachable or overloaded.
        request_timeout_s: seconds one model call may take before it counts as failed.
        cwd: the repository directory inside the sandbox.
    """

    step_limit: int = 6
    cost_limit: float = 3.0
    wall_time_limit_s: float = 600.0
    command_timeout_s: float = 60.0
    output_limit_chars: int = 2500
    grammar: bool = True
    temperature: float = 0.0
    max_tokens: int = 192
    prompts_dir: str = str(DEFAULT_PROMPTS_DIR)
    model_retries: int = 3
    request_timeout_s: float = 120.0
    cwd: str = "/testbed"

    def __post_init__(self):
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value < 0:
                raise ValueError(f"AgentSettings.{f.name} must be >= 0, got {value}")
        if self.command_timeout_s <= 0:
            raise ValueError(f"AgentSettings.command_timeout_s must be > 0, got {self.command_timeout_s}")
        if self.model_retries < 1:
            raise ValueError(f"AgentSettings.model_retries must be >= 1, got {self.model_retries}")


@dataclass(frozen=True)
class Prompts:
    """The Jinja templates of the text-based agent (mini-swe-agent's template variables)."""

    system: str
    instance: str
    observation: str
    format_error: str


def load_prompts(prompts_dir: str | Path) -> Prompts:
    """Read `<name>.j2` for each of system, instance, observation, format_error from
    `prompts_dir` (a relative path is taken from the raydist checkout, not the working directory).

    Raises:
        FileNotFoundError: a template (or the folder) is missing; names the file, the folder
            and the four files it must hold.
        jinja2.TemplateSyntaxError: a template does not parse.
    """
    return Prompts(**read_templates(prompts_dir, {name: name for name in PROMPT_FILES}, "agent"))
