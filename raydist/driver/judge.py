"""The ``judge`` node of the launch settings: who scores repository answers (SWE-QA)."""

from __future__ import annotations

from dataclasses import dataclass

from raydist._util.settings import keyless


@dataclass
class JudgeConfig:
    """``judge``: the LLM judge of repository answers (``benchmark=swe_qa``; SWE-QA's five
    dimensions, ``raydist.qa.judge``). Part of every question unit's key; unused by patch tasks."""

    model: str = "gemma3-270m"
    """Any litellm model name or a ``local_models`` entry (the embedded model by default)."""
    attempts: int = 3
    """Requests per answer until a reply gives the five scores (a local server's grammar makes the first do)."""
    max_tokens: int = 64
    """Completion tokens per judge request."""
    temperature: float = 0.0
    """Sampling temperature of the judge."""
    request_timeout_s: float = keyless(120.0)
    """Seconds one judge request may take (part of no key)."""
    prompts_dir: str = "conf/prompts"
    """Folder holding ``qa_judge.j2`` (a relative path is taken from the raydist package)."""
