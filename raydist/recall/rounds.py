"""The probe's rounds: what each one reveals of an instance to the model, as data (pure).

SchrodingerRepo §II: experts "revealed issue semantics round by round" while the model had no
repository files, gold patch or test information. Here each round is one fresh request showing
the fields it names (a later round normally repeats the earlier fields and adds some); what a
round reveals is recorded with its answer, and nothing revealed counts as evidence of leakage
(``raydist.recall.score``). The default rounds:

    statement       the problem statement only
    context         + the repository, its version and the issue discussion (``hints_text``)
    failing_tests   + the ids of the tests that fail before the fix (test names then recall
                    nothing beyond what was shown)
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT_ROUNDS", "REVEALABLE", "Round", "revealed_fields", "revealed_text", "rounds_from"]

REVEALABLE = ("problem_statement", "repo", "version", "created_at", "hints_text", "FAIL_TO_PASS")
"""Instance fields a round may show (the templates ``recall_round.j2`` lays them out); never the
patch, the test patch or PASS_TO_PASS."""


@dataclass(frozen=True)
class Round:
    """``name`` (unique, a file-name-safe word) and the ``reveals`` fields of ``REVEALABLE``."""

    name: str
    reveals: tuple[str, ...]


DEFAULT_ROUNDS = (
    Round("statement", ("problem_statement",)),
    Round("context", ("problem_statement", "repo", "version", "hints_text")),
    Round("failing_tests", ("problem_statement", "repo", "version", "hints_text", "FAIL_TO_PASS")),
)


def rounds_from(entries) -> tuple[Round, ...]:
    """Rounds from config data: a list of ``{name, reveals: [field, ...]}`` mappings, in order.

    Raises:
        ValueError: naming ``rounds`` for no rounds, a round without a name or a repeated or
            unsafe name, a field outside ``REVEALABLE``, or a round that hides the problem
            statement (every round shows the issue).
    """
    rounds = []
    for i, entry in enumerate(entries or ()):
        entry = dict(entry)
        name, reveals = str(entry.get("name") or ""), tuple(entry.get("reveals") or ())
        if not name.replace("_", "").replace("-", "").isalnum():
            raise ValueError(f"rounds[{i}].name={name!r}: give a word of letters, digits, _ or -")
        unknown = [f for f in reveals if f not in REVEALABLE]
        if unknown:
            raise ValueError(f"rounds[{i}].reveals: {', '.join(map(repr, unknown))} cannot be revealed; choose from "
                             f"{', '.join(REVEALABLE)}")
        if "problem_statement" not in reveals:
            raise ValueError(f"rounds[{i}].reveals={list(reveals)}: every round shows the problem_statement")
        rounds.append(Round(name, reveals))
    names = [r.name for r in rounds]
    if not rounds or len(set(names)) < len(names):
        raise ValueError(f"rounds: give at least one round, each with its own name (got {names})")
    return tuple(rounds)


def _field(instance, name: str) -> str:
    if name == "FAIL_TO_PASS":
        return "\n".join(instance.FAIL_TO_PASS)
    value = getattr(instance, name, None)
    if value is None:
        value = instance.extra.get(name)
    return "" if value is None else str(value).strip()


def revealed_fields(instance, round: Round) -> dict[str, str]:
    """``{field: text}`` of what ``round`` shows of ``instance`` (a ``raydist.tasks.Instance``),
    in the round's order; fields the instance has no value for are left out (a row without
    ``hints_text`` reveals none)."""
    fields = {name: _field(instance, name) for name in round.reveals}
    return {name: text for name, text in fields.items() if text}


def revealed_text(fields: dict[str, str]) -> str:
    """Everything a round showed, as one text: what scoring treats as known to the model."""
    return "\n".join(fields.values())
