"""The problem statement of an instance: written by a model from the failing tests' output.

The model sees the names of the failing tests and their pytest failure text (with the lines of
the mutated code taken out) and is told to describe the wrong behaviour without naming the fix
(``conf/prompts/fresh_statement.j2``). ``check_statement`` rejects an answer that leaks the fix
(the mutated lines before or after, a diff), is empty or is not prose; the model gets
``attempts`` tries with different seeds. When every try is rejected, the statement is the
failing tests and their assertion messages, and the instance records that no model wrote it
(``source="fallback_test_output"``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from raydist.models.completion import (
    EmptyCompletion,  # litellm: loaded only when a statement is written
)
from raydist.models.retry import ModelUnreachable
from raydist.prompts import DEFAULT_PROMPTS_DIR, read_templates, render
from raydist.tasks.fresh.mutations import Mutation, is_test_file

PROMPT_FILE = "fresh_statement"
MODEL, FALLBACK = "model", "fallback_test_output"
Complete = Callable[..., str]
"""``complete(messages, *, seed, max_tokens) -> str`` (``raydist.models.completion.litellm_complete``)."""

_SECTION = re.compile(r"^_{3,} (.+?) _{3,}$")
_HEADER = re.compile(r"^={5,}.*={5,}$")
_LOCATION = re.compile(r"^(\S+\.py):\d+: ?\S*$")
_MIN_CODE = 6  # shorter mutated lines (``else:``, ``x``) are words a report may use innocently


@dataclass(frozen=True)
class Statement:
    """``text``; ``source`` ``"model"`` or ``"fallback_test_output"``; the ``model`` that wrote
    it (None for the fallback); ``attempt``: the 1-based try that was accepted (0: fallback);
    ``rejected``: the reason of each rejected try, in order."""

    text: str
    source: str
    model: str | None
    attempt: int
    rejected: tuple[str, ...] = ()

    def record(self) -> dict:
        """The fields an instance records (``extra["statement"]``)."""
        return {"source": self.source, "model": self.model, "attempt": self.attempt, "rejected": list(self.rejected)}


def load_template(prompts_dir: str | Path = DEFAULT_PROMPTS_DIR) -> str:
    """The text of ``fresh_statement.j2`` from ``prompts_dir`` (checked to parse)."""
    return read_templates(prompts_dir, {"statement": PROMPT_FILE}, "fresh tasks")["statement"]


def fix_lines(mutation: Mutation) -> list[str]:
    """The mutated code a statement must not contain: each line of ``before`` and ``after``,
    whitespace collapsed, at least ``_MIN_CODE`` characters long."""
    lines = {" ".join(line.split()) for line in (mutation.before + mutation.after).splitlines()}
    return sorted(line for line in lines if len(line) >= _MIN_CODE)


def failure_excerpt(log: str, failing: Sequence[str], mutation: Mutation, *, sections: int = 2,
                    limit: int = 700) -> str:
    """The pytest failure text of up to ``sections`` failing tests (``failing`` ids), each cut to
    its last lines, at most ``limit`` characters, with every line holding mutated code removed."""
    hidden = fix_lines(mutation)
    names = {t.split("::")[-1] for t in failing}
    blocks, current, inside = [], None, False
    for line in log.splitlines():
        if _HEADER.match(line):
            inside = "FAILURES" in line
            current = None
            continue
        title = _SECTION.match(line) if inside else None
        if title:
            current = [] if title[1].split(".")[-1] in names or title[1] in names else None
            if current is not None:
                blocks.append((title[1], current))
        elif current is not None and not any(h in " ".join(line.split()) for h in hidden):
            current.append(line)
    per_block = limit // max(1, min(sections, len(blocks)))
    parts = [f"{name}\n" + "\n".join(frames_of_tests(lines))[-per_block:] for name, lines in blocks[:sections]]
    return "\n\n".join(parts)[:limit] or "\n".join(sorted(failing))


def frames_of_tests(lines: list[str]) -> list[str]:
    """One failure's traceback (pytest's long format: each frame's code, then its ``path:line:``)
    with the frames of library code reduced to their ``E`` lines: the report may quote the tests
    and the error, not the code around the bug."""
    kept, frame = [], []
    for line in lines:
        frame.append(line)
        where = _LOCATION.match(line)
        if where:
            kept.extend(frame if is_test_file(where[1]) else [x for x in frame if x.startswith("E ")])
            frame = []
    return kept + frame


def check_statement(text: str, mutation: Mutation, patch: str, prompt: str = "") -> str | None:
    """Why ``text`` cannot be the statement, or None: ``empty``, ``echoes_prompt`` (most of it
    copied from ``prompt``: ``copied_share`` over 0.6), ``diff``,
    ``names_fix`` (a line of the mutated code), ``garbage`` (not prose, or one line looping)."""
    flat = " ".join(text.split())
    if len(flat) < 40:
        return "empty"
    if copied_share(text, prompt) > 0.6:
        return "echoes_prompt"
    changed = {line[1:].strip() for line in patch.splitlines() if line[:1] in "+-" and line[:3] not in ("+++", "---")}
    if "diff --git" in text or "@@ -" in text or re.search(r"^(\+\+\+|---) [ab]/", text, re.MULTILINE) or any(
            line[:1] in "+-" and line[1:].strip() in changed for line in text.splitlines() if line[1:].strip()):
        return "diff"
    if any(line in flat for line in fix_lines(mutation)):
        return "names_fix"
    letters = sum(c.isalpha() for c in flat)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if letters < 0.5 * len(flat) or (len(lines) >= 6 and len(set(lines)) < len(lines) / 2):
        return "garbage"
    return None


def copied_share(text: str, prompt: str, n: int = 4) -> float:
    """The share of ``text``'s word ``n``-grams (lower case) that occur in ``prompt``: near 1 for
    an answer that parrots the prompt or pastes the test output back, low for a report in its
    own words that quotes a few values."""
    grams = _ngrams(text, n)
    return len(grams & _ngrams(prompt, n)) / len(grams) if grams else 0.0


def _ngrams(text: str, n: int) -> set[tuple[str, ...]]:
    words = re.findall(r"\w+", text.lower())
    return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}


def write_statement(complete: Complete | None, *, model: str | None, template: str, library: str, version: str,
                    failing: Sequence[str], excerpt: str, mutation: Mutation, patch: str, seed: int,
                    attempts: int = 2, max_tokens: int = 96) -> Statement:
    """The statement of one instance: the first of ``attempts`` model answers (request seeds
    ``seed``, ``seed + 1``, ...) that ``check_statement`` accepts, else ``fallback_statement``.
    ``complete`` None (no model configured) goes straight to the fallback. A try whose request
    fails (``ModelUnreachable``: the server did not answer in time) is rejected as
    ``model_error``; any other error of the model call (a bad request, credentials) raises."""
    prompt = render(template, {"library": library, "version": version, "n_failing": len(failing),
                               "failing_tests": list(failing)[:10], "failures": excerpt})
    rejected: list[str] = []
    for attempt in range(1, attempts + 1 if complete is not None else 1):
        try:
            answer = complete([{"role": "user", "content": prompt}], seed=seed + attempt - 1, max_tokens=max_tokens)
        except EmptyCompletion:
            rejected.append("empty")
            continue
        except ModelUnreachable:  # a server too slow or gone: the try is spent, the row says so
            rejected.append("model_error")
            continue
        text = answer.strip()
        reason = check_statement(text, mutation, patch, prompt)
        if reason is None:
            return Statement(text + "\n", MODEL, model, attempt, tuple(rejected))
        rejected.append(reason)
    return Statement(fallback_statement(library, version, failing, excerpt), FALLBACK, None, 0, tuple(rejected))


def fallback_statement(library: str, version: str, failing: Sequence[str], excerpt: str) -> str:
    """Not written by a model: the failing tests and the assertion messages (``E`` lines) of their output."""
    errors = [line.strip()[1:].strip() for line in excerpt.splitlines() if line.startswith("E ")]
    shown = "\n".join(f"- {t}" for t in list(failing)[:10])
    more = f"\n(and {len(failing) - 10} more)" if len(failing) > 10 else ""
    messages = "\n".join(f"    {e}" for e in dict.fromkeys(errors[:8]))
    return (f"These tests of {library} {version} fail:\n{shown}{more}\n\n"
            + (f"They report:\n{messages}\n\n" if messages else "")
            + "They should pass.\n")
