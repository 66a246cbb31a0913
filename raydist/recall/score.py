"""A probe answer against the hidden gold, and the leakage level it shows (pure).

Every measure is reported twice: raw, over all of the gold, and *beyond* what the round
revealed, over the gold items the revealed text does not already name (a file named in the
problem statement, a failing test's name shown in round 3, a line of code quoted in the issue).
Only recall beyond the revealed text is evidence of leakage (SchrodingerRepo §II: outputs are
checked "for novel task-specific content"). A measure whose gold is empty (after removing what
was revealed) is None, which reaches no level.

Levels, lowest to highest (§II's recall categories), and what reaches each (``THRESHOLDS``):

    none            nothing below
    files_symbols   at least one unrevealed gold file or changed symbol named
    repair_logic    at least half of the fix's unrevealed repair tokens (identifiers, literals
                    the patch brings in or takes out) in the answer's repair logic or patch, or
                    any unrevealed line of the fix written verbatim
    patch_test      at least half of the fix's unrevealed non-trivial lines verbatim in the
                    answer's patch, or half of the unrevealed gold test names, or half of the
                    test patch's unrevealed added lines
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

from raydist.recall.answer import ProbeAnswer
from raydist.recall.gold import (
    Gold,
    code_of,
    name_of_test,
    normalise_line,
    read_diff,
    tokens,
)

__all__ = ["LEVELS", "NO_ANSWER", "THRESHOLDS", "Scores", "Thresholds", "level_of", "level_rank", "score_answer"]

LEVELS = ("none", "files_symbols", "repair_logic", "patch_test")
"""Leakage levels, lowest first."""
NO_ANSWER = "no_answer"
"""The level of an instance none of whose rounds got a reply that parses; counted apart."""


@dataclass(frozen=True)
class Thresholds:
    """The shares (0..1) of unrevealed gold an answer must recall to reach a level; a share of
    0.0 means "more than none"."""

    files_symbols: float = 0.0
    repair_tokens: float = 0.5
    repair_lines: float = 0.0
    patch_lines: float = 0.5
    test_names: float = 0.5
    test_lines: float = 0.5


THRESHOLDS = Thresholds()
"""The one place the levels' thresholds are set (module docstring)."""


@dataclass(frozen=True)
class Scores:
    """One answer's recall, raw and beyond the revealed text; each a share 0..1, or None when
    there is nothing (left) to recall. ``*_gold`` count the unrevealed gold items."""

    file_recall: float | None
    file_recall_beyond: float | None
    symbol_recall: float | None
    symbol_recall_beyond: float | None
    repair_recall: float | None
    repair_recall_beyond: float | None
    line_overlap: float | None
    line_overlap_beyond: float | None
    test_recall: float | None
    test_recall_beyond: float | None
    test_line_overlap: float | None
    test_line_overlap_beyond: float | None
    files_gold: int
    symbols_gold: int
    repair_gold: int
    lines_gold: int
    tests_gold: int

    def as_row(self) -> dict:
        return asdict(self)


def _path(path: str) -> str:
    path = path.strip().strip("`'\"").replace("\\", "/")
    for prefix in ("./", "a/", "b/", "/"):
        path = path.removeprefix(prefix)
    return path


def file_matches(named: str, gold: str) -> bool:
    """``named`` (an answer's path) names ``gold``: the same path, or one side a suffix of the
    other at a ``/`` with at least one folder in the shorter (``modeling/separable.py`` names
    ``astropy/modeling/separable.py``; ``repo/astropy/modeling/separable.py`` too); a bare file
    name does not (``__init__.py``, ``utils.py`` are everywhere)."""
    a, b = _path(named), _path(gold)
    if a == b:
        return True
    short, long = (a, b) if len(a) < len(b) else (b, a)
    return "/" in short and long.endswith("/" + short)


def _symbol(name: str) -> str:
    name = name.strip().strip("`'\"").split("(", 1)[0].strip()
    return re.split(r"[.:]+", name)[-1] if name else ""


def _words(text: str) -> set[str]:
    return set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text))


def _share(hits: int, total: int) -> float | None:
    return None if total == 0 else hits / total


def _file_revealed(path: str, revealed: str) -> bool:
    """The revealed text names the file: its path, its base name or its dotted module."""
    module = path.removesuffix(".py").replace("/", ".")
    base = path.rsplit("/", 1)[-1]
    return any(form in revealed for form in (path, base, module))


def score_answer(answer: ProbeAnswer, gold: Gold, revealed: str) -> Scores:
    """The :class:`Scores` of ``answer`` against ``gold`` given the ``revealed`` text (everything
    the round showed the model, joined). The answer's patch counts as naming the files and
    definitions it touches and as writing its ``+``/``-``/context lines."""
    patch = read_diff(answer.patch)
    files = set(answer.files) | set(patch.files)
    symbols = {_symbol(s) for s in (*answer.symbols, *patch.symbols)} - {""}
    lines = {normalise_line(line[1:] if line[:1] in "+- " else line) for line in answer.patch.splitlines()}
    lines |= {normalise_line(line) for line in (*patch.added, *patch.removed)}
    lines.discard("")
    answer_tokens = tokens(f"{answer.repair_logic}\n{code_of_text(answer.patch)}")
    tests = {name_of_test(t) for t in answer.tests} - {""}
    revealed_words = _words(revealed)
    revealed_lines = " ".join(revealed.split())

    def recall(gold_items, hit, shown):
        found = [g for g in gold_items if hit(g)]
        hidden = [g for g in gold_items if not shown(g)]
        return _share(len(found), len(gold_items)), _share(len([g for g in hidden if hit(g)]), len(hidden)), len(hidden)

    file_raw, file_beyond, files_gold = recall(gold.files, lambda g: any(file_matches(f, g) for f in files),
                                               lambda g: _file_revealed(g, revealed))
    sym_raw, sym_beyond, symbols_gold = recall(gold.symbols, symbols.__contains__, revealed_words.__contains__)
    rep_raw, rep_beyond, repair_gold = recall(gold.repair, answer_tokens.__contains__,
                                              lambda g: g.strip('"') in revealed)
    line_raw, line_beyond, lines_gold = recall(gold.fix_lines, lines.__contains__,
                                               revealed_lines.__contains__)
    test_raw, test_beyond, tests_gold = recall(gold.test_names, tests.__contains__, revealed_words.__contains__)
    tline_raw, tline_beyond, _ = recall(gold.test_lines, lines.__contains__, revealed_lines.__contains__)
    return Scores(file_raw, file_beyond, sym_raw, sym_beyond, rep_raw, rep_beyond, line_raw, line_beyond,
                  test_raw, test_beyond, tline_raw, tline_beyond, files_gold, symbols_gold, repair_gold, lines_gold,
                  tests_gold)


def code_of_text(text: str) -> str:
    """``text`` with each line's ``#`` comment removed (``raydist.recall.gold.code_of``)."""
    return "\n".join(code_of(line) for line in text.splitlines())


def _reached(share: float | None, threshold: float) -> bool:
    return share is not None and (share > 0 if threshold == 0 else share >= threshold)


def level_of(scores: Scores, thresholds: Thresholds = THRESHOLDS) -> str:
    """The highest of ``LEVELS`` the beyond-revealed shares of ``scores`` reach (module docstring)."""
    t = thresholds
    if (_reached(scores.line_overlap_beyond, t.patch_lines) or _reached(scores.test_recall_beyond, t.test_names)
            or _reached(scores.test_line_overlap_beyond, t.test_lines)):
        return "patch_test"
    if _reached(scores.repair_recall_beyond, t.repair_tokens) or _reached(scores.line_overlap_beyond, t.repair_lines):
        return "repair_logic"
    if _reached(scores.file_recall_beyond, t.files_symbols) or _reached(scores.symbol_recall_beyond, t.files_symbols):
        return "files_symbols"
    return "none"


def level_rank(level: str) -> int:
    """The position of ``level`` in ``LEVELS`` (``NO_ANSWER`` is -1). Raises ``ValueError`` naming
    the levels for anything else."""
    if level == NO_ANSWER:
        return -1
    if level not in LEVELS:
        raise ValueError(f"unknown leakage level {level!r}; choose one of {', '.join(LEVELS)}")
    return LEVELS.index(level)
