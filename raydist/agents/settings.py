"""Agent settings and prompt templates: the knobs of one agent run, as data."""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path

from raydist._util.settings import keyless
from raydist.prompts import read_templates

PROMPT_FILES = ("system", "instance", "observation", "format_error")


@dataclass(frozen=True)
class AgentSettings:
    """Limits and decoding settings of one agent run: the one place their defaults live.

    The defaults suit the embedded 270M model on a 2-core machine (the default main job runs
    in minutes); for a capable hosted model raise the limits, e.g. agents.miniswe.step_limit=100.
    ``default_agents`` writes the fields an agent kind uses into its
    ``agents`` entry, and the unit key hashes that entry as JSON: 600 and 600.0 hash apart, so
    a whole-number default stays written as a whole number.
    """

    step_limit: int = 6
    """Most model calls (0 = none)."""
    cost_limit: float = 3.0
    """Stop once the cost in USD exceeds this (0 = none)."""
    wall_time_limit_s: float = 600
    """Stop after this many seconds, checked between steps (0 = none)."""
    command_timeout_s: float = 60
    """Each command is killed after this many seconds."""
    output_limit_chars: int = 2500
    """Each observation keeps at most this many characters (head and tail)."""
    grammar: bool = True
    """Constrain local decoding to the action format (llama.cpp grammar / vLLM guided decoding);
    hosted models ignore it."""
    temperature: float = 0.0
    """Sampling temperature."""
    max_tokens: int = 192
    """Completion tokens per model call."""
    prompts_dir: str = "conf/prompts"
    """Folder with system.j2, instance.j2, observation.j2, format_error.j2; a relative path is
    taken from the raydist package folder (``raydist.prompts.resolve_prompts_dir``)."""
    model_retries: int = keyless(3)
    """Attempts per model call when the server is unreachable or overloaded (part of no key)."""
    request_timeout_s: float = keyless(120.0)
    """Seconds one model call may take before it counts as failed (part of no key)."""
    cwd: str = "/testbed"
    """The repository directory inside the sandbox."""

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


def load_prompts(prompts_dir: str | Path, task: str = "patch") -> Prompts:
    """Read `<name>.j2` for each of system, instance, observation, format_error from
    `prompts_dir` (a relative path is taken from the raydist checkout, not the working directory);
    for `task="qa"` (a repository question) the instance template is `qa_instance.j2`.

    Raises:
        FileNotFoundError: a template (or the folder) is missing; names the file, the folder
            and the four files it must hold.
        jinja2.TemplateSyntaxError: a template does not parse.
    """
    stems = {name: "qa_instance" if task == "qa" and name == "instance" else name for name in PROMPT_FILES}
    return Prompts(**read_templates(prompts_dir, stems, "agent"))


AGENT_KINDS = ("llm", "oracle", "null")

#: The ``AgentSettings`` fields an agent entry of each kind writes out. The unit key hashes the
#: entry as composed (``raydist.cluster.unit_key.unit_config_hash``), so these names (not their
#: values, which are ``AgentSettings``' defaults) decide the keys of the default agents.
ENTRY_FIELDS = {
    "llm": ("step_limit", "cost_limit", "wall_time_limit_s", "command_timeout_s", "output_limit_chars",
            "temperature", "max_tokens", "grammar", "prompts_dir"),
    "oracle": ("command_timeout_s",),
    "null": ("command_timeout_s",),
}

#: The agents every launch knows, by name: their kind.
DEFAULT_AGENTS = {"miniswe": "llm", "oracle": "oracle", "null": "null"}


def default_agents() -> dict:
    """``agents`` of the schema: each of ``DEFAULT_AGENTS`` as ``kind`` plus the
    ``ENTRY_FIELDS`` of its kind at ``AgentSettings``' defaults."""
    settings = AgentSettings()
    return {name: {"kind": kind, **{f: getattr(settings, f) for f in ENTRY_FIELDS[kind]}}
            for name, kind in DEFAULT_AGENTS.items()}
