"""A probe answer: what the model expects the fix to touch, as the JSON object the prompt asks
for, its parser and the GBNF grammar that keeps a local model to that shape (pure).

    {"files": [...], "symbols": [...], "tests": [...], "repair_logic": "...", "patch": "..."}

A reply that is no such object is *no answer* (``parse_answer`` returns None): the round is
counted apart, never scored as a model that recalls nothing.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

__all__ = ["LIST_FIELDS", "MAX_NAMES", "ProbeAnswer", "answer_grammar", "parse_answer"]

LIST_FIELDS = ("files", "symbols", "tests")
TEXT_FIELDS = ("repair_logic", "patch")
MAX_NAMES = 10
"""Only the first names of each list count: a model listing every file of the repository must
not reach file recall 1 by enumeration."""

_FENCE = re.compile(r"^```[a-zA-Z]*\s*\n(.*?)\n```\s*$", re.DOTALL)


@dataclass(frozen=True)
class ProbeAnswer:
    """One parsed reply: up to ``MAX_NAMES`` ``files``, ``symbols`` and ``tests`` (strings,
    stripped, empty ones dropped), the ``repair_logic`` prose and the ``patch`` text ("" when
    the reply left a field out)."""

    files: tuple[str, ...] = ()
    symbols: tuple[str, ...] = ()
    tests: tuple[str, ...] = ()
    repair_logic: str = ""
    patch: str = ""


def _json_object(text: str) -> dict | None:
    text = text.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1).strip()
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        value = json.loads(text[start:end + 1])
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def _names(value) -> tuple[str, ...] | None:
    if isinstance(value, str):
        value = [value]
    if value is None:
        return ()
    if not isinstance(value, list):
        return None
    names = [str(v).strip() for v in value if isinstance(v, (str, int, float)) and str(v).strip()]
    return tuple(names[:MAX_NAMES])


def parse_answer(reply: str) -> ProbeAnswer | None:
    """The :class:`ProbeAnswer` in ``reply``: the first ``{`` to the last ``}`` (a Markdown
    fence around it is allowed: hosted models get no grammar), read as JSON. A single string
    where a list belongs counts as a list of one; a missing field as empty. None when there is
    no JSON object, when it has none of the five fields, or a field of the wrong kind (a list
    of names as ``patch``, a mapping as ``files``)."""
    data = _json_object(reply or "")
    if data is None or not any(k in data for k in (*LIST_FIELDS, *TEXT_FIELDS)):
        return None
    lists = {k: _names(data.get(k)) for k in LIST_FIELDS}
    texts = {k: data.get(k) or "" for k in TEXT_FIELDS}
    if any(v is None for v in lists.values()) or not all(isinstance(v, str) for v in texts.values()):
        return None
    return ProbeAnswer(**lists, **texts)


def answer_grammar(*, max_items: int = 5, max_name_chars: int = 100, max_text_chars: int = 400,
                   max_patch_chars: int = 1500) -> str:
    """GBNF for the answer object with its five fields in a fixed order (lists first, the patch
    last), each list of at most ``max_items`` strings of at most ``max_name_chars`` characters,
    ``repair_logic`` at most ``max_text_chars`` and ``patch`` at most ``max_patch_chars`` (JSON
    escapes count as one each). The bounds keep a reply within a small token budget, so it is
    whole JSON rather than cut off mid-string.

    Raises:
        ValueError: a bound below 1.
    """
    bounds = {"max_items": max_items, "max_name_chars": max_name_chars, "max_text_chars": max_text_chars,
              "max_patch_chars": max_patch_chars}
    for name, value in bounds.items():
        if value < 1:
            raise ValueError(f"{name} must be at least 1, got {value}")
    return (
        'root ::= "{" ws "\\"files\\": " names "," ws "\\"symbols\\": " names "," ws "\\"tests\\": " names "," ws '
        '"\\"repair_logic\\": " text "," ws "\\"patch\\": " patch ws "}"\n'
        f'names ::= "[" ( name ( ", " name ){{0,{max_items - 1}}} )? "]"\n'
        f'name ::= "\\"" char{{1,{max_name_chars}}} "\\""\n'
        f'text ::= "\\"" char{{0,{max_text_chars}}} "\\""\n'
        f'patch ::= "\\"" char{{0,{max_patch_chars}}} "\\""\n'
        'char ::= [^"\\\\\\x00-\\x1f] | "\\\\" ["\\\\/nt]\n'
        'ws ::= [ \\n]?\n'
    )
