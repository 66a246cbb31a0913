"""Repository views: the data a run sees instead of the canonical repository.

A view (SchrodingerRepo §III-A) is an evaluation-time presentation of one task that is
semantically equivalent to the canonical repository: its problem statement, the files
whose content differs from the original, and a translator between the agent's
coordinates and the original ones. Levels are pure functions that refine a view; they are
listed by name in ``raydist.views.levels`` and composed with ``+`` (``L1+L3``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Any, Protocol, runtime_checkable

from raydist._util.settings import keyless, keyless_fields

#: ``(path, text) -> text``: how one level presents a file whose original is ``text``.
FileRenderer = Callable[[str, str], str]


@runtime_checkable
class Translator(Protocol):
    """Maps between the agent's (view) coordinates and the original repository's.

    ``to_original`` rewrites a shell command written against the view so that it runs
    on the original repository; ``to_view`` rewrites command output back into the
    view (SchrodingerRepo §III-C, §III-F).
    """

    def to_original(self, command: str) -> str: ...

    def to_view(self, text: str) -> str: ...


class IdentityTranslator:
    """The translator of levels that keep every name and path (L0, L1, L3, L4)."""

    def to_original(self, command: str) -> str:
        """Return ``command`` unchanged."""
        return command

    def to_view(self, text: str) -> str:
        """Return ``text`` unchanged."""
        return text

    def __repr__(self) -> str:
        return "IDENTITY"


IDENTITY: Translator = IdentityTranslator()


class RepoFiles:
    """A read-only view of a repository tree on disk.

    Paths are relative POSIX paths (``pkg/mod.py``); text is decoded as UTF-8 with line
    endings kept exactly, so a file read and written back is byte-identical.
    """

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)
        if not self.root.is_dir():
            raise ValueError(f"RepoFiles: {self.root} is not a directory; pass the repository checkout root")

    def _resolve(self, path: str) -> Path:
        rel = PurePosixPath(path)
        if rel.is_absolute() or ".." in rel.parts or not rel.parts:
            raise ValueError(f"RepoFiles: path {path!r} must be relative to the repository root, without '..'")
        return self.root.joinpath(*rel.parts)

    def read(self, path: str) -> str | None:
        """Text of ``path`` (relative POSIX), or None when no such file exists.

        Raises ValueError when the path escapes the root or the file is not UTF-8.
        """
        full = self._resolve(path)
        if not full.is_file():
            return None
        try:
            return full.read_bytes().decode("utf-8")
        except UnicodeDecodeError as err:
            raise ValueError(f"RepoFiles: {path} is not UTF-8 text ({err.reason} at byte {err.start})") from err

    def python_files(self) -> list[str]:
        """Every ``*.py`` file under the root as sorted relative POSIX paths.

        Hidden directories (``.git``, ``.venv``...) and ``__pycache__`` are not searched.
        """
        found: list[str] = []
        for dirpath, dirnames, filenames in os.walk(self.root):
            dirnames[:] = [d for d in dirnames if not d.startswith(".") and d != "__pycache__"]
            rel_dir = Path(dirpath).relative_to(self.root)
            found.extend((rel_dir / name).as_posix() for name in filenames if name.endswith(".py"))
        return sorted(found)


@dataclass(frozen=True)
class ViewOptions:
    """Knobs of the view levels; the defaults are the paper's settings."""

    l3_files: str = "patched"
    """Files L3 reorders: ``patched`` (the .py files the gold patch touches) or ``all``."""
    l1_attempts: int = 2
    """L1: paraphrase attempts (each verified) before the canonical statement is used (§III-B)."""
    l1_max_tokens: int = 512
    """L1: completion tokens one paraphrase may use (a paraphrase is about as long as the statement)."""
    l4_llm_attempts: int = 1
    """L4: LLM rewrite attempts per function before the deterministic rewriter is used (§III-E)."""
    model: str = "gemma3-270m"
    """The LLM that writes L1 paraphrases and L4 rewrites: a ``local_models`` entry or a litellm name."""
    prompts_dir: str = "conf/prompts"
    """Folder of the L1 and L4 prompt templates (a relative path is taken from the raydist checkout)."""
    request_timeout_base_s: float = keyless(120.0)
    """Seconds a view-model request may take besides generating its answer (connecting,
    queueing, reading the prompt)."""
    request_min_tokens_per_s: float = keyless(4.0)
    """The slowest generation the view model is given time for: a request for ``max_tokens``
    may take ``request_timeout_base_s + max_tokens / request_min_tokens_per_s`` seconds (a
    1024-token L4 rewrite 376 s, a 96-token L1 verdict 144 s, with the defaults)."""

    def __post_init__(self) -> None:
        if self.l3_files not in ("patched", "all"):
            raise ValueError(f"ViewOptions.l3_files={self.l3_files!r}; use 'patched' or 'all'")
        for name, least in (("l1_attempts", 1), ("l1_max_tokens", 16), ("l4_llm_attempts", 0)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < least:
                raise ValueError(f"ViewOptions.{name}={value!r}; give a whole number of at least {least}")
        if not isinstance(self.model, str) or not self.model:
            raise ValueError(f"ViewOptions.model={self.model!r}; name a local_models entry or a litellm model")
        for name in TIMING_OPTIONS:
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"ViewOptions.{name}={value!r}; give a number of seconds or tokens above 0")


TIMING_OPTIONS = keyless_fields(ViewOptions)
"""``ViewOptions`` fields that bound how long a view-model call may wait, never what it
answers: they are part of no unit key (``raydist.cluster.unit_key.unit_config_hash``) and of no
preparation cache key (``raydist.cluster.prepare.task_key``), so changing them reruns nothing."""


@dataclass(frozen=True)
class Prepared:
    """What the LLM-backed levels computed before the view is built (SchrodingerRepo §III-B,
    §III-E); ``raydist.cluster.prepare`` computes it, caches it and hands it to ``build_view``.

    ``statement``: the L1 statement shown to the agent; ``statement_source`` is
    ``"paraphrase"`` (verified), ``"rule"`` (the seeded rule restatement: no paraphrase passed,
    or no model) or ``"canonical"`` (the statement itself), ``statement_attempts``
    the paraphrase attempts spent. ``rewrites``: L4's test-gated files (relative path -> text in
    original coordinates); ``rewrite_meta``: per-function provenance (``llm``,
    ``deterministic`` or ``unchanged`` and why).
    """

    statement: str | None = None
    statement_source: str | None = None
    statement_attempts: int = 0
    rewrites: Mapping[str, str] | None = None
    rewrite_meta: Mapping[str, Any] = field(default_factory=dict)


class MissingPreparation(ValueError):
    """A level needs inputs computed by an LLM or a test gate that were not given."""


@dataclass(frozen=True)
class View:
    """One task as the agent sees it.

    ``files`` maps relative paths to view content, holding only files whose view content
    differs from the original; ``meta`` records per-level facts (e.g. ``l3_skipped``);
    ``renderers`` are the per-file presentations of the applied levels, in order;
    ``identity`` is the original repository's ``raydist.views.audit.IdentitySet`` (the names the
    exposure audit searches what the agent is shown for), None for a view built by hand.
    """

    instance_id: str
    level: str
    seed: int
    problem_statement: str
    files: Mapping[str, str]
    translator: Translator = IDENTITY
    meta: dict[str, Any] = field(default_factory=dict)
    renderers: tuple[FileRenderer, ...] = field(default=(), repr=False, compare=False)
    identity: Any = field(default=None, repr=False, compare=False)

    def render_file(self, path: str, original_text: str) -> str:
        """The content the agent would see at ``path`` if its original were ``original_text``.

        Used by scripted agents that edit in original coordinates (e.g. the oracle applies
        the gold patch to the original file) and must write what the view would show.
        """
        text = original_text
        for render in self.renderers:
            text = render(path, text)
        return text

    def with_file_renderer(self, render: FileRenderer) -> View:
        """A copy with ``render`` appended to the per-file presentations."""
        return replace(self, renderers=(*self.renderers, render))
