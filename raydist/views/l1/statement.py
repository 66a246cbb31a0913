"""Level 1: problem statement reconstruction (SchrodingerRepo §III-B).

A generator paraphrases and reorders the statement; a verifier checks that the bug
description, the requirements and the success criteria survived, and a rejected paraphrase
is refined with the verifier's feedback. One attempt is:

1. ask: the paraphrase prompt on attempt 1 and after an attempt that left nothing to refine
   (the call failed or the answer was empty); otherwise the refine prompt, which shows the
   previous candidate, the spans it lost and the verifier's verdicts and reason;
2. clean the answer (``clean_candidate``): strip it, drop a first line that only announces
   the answer ("Here is the rewritten statement:") and unwrap a fence around the whole answer;
3. check it without a model: reject it when empty, identical to the statement (compared
   line-normalised) or missing a protected span (``missing_spans``); the verifier is not asked;
4. ask the verifier: BUG, REQUIREMENTS and SUCCESS, each YES or NO, and a one-line REASON;
   accept only when all three are YES.

When no attempt is accepted, or there is no model, the statement is restated by fixed seeded
rules (``raydist.views.l1.rules.rule_paraphrase``: scaffolding dropped, discourse phrases
rewritten, lists renumbered, independent paragraphs reordered, every protected span kept and
checked). The verifier still judges it when there is a model, and its verdict is recorded (a
NO marks the restatement ``disputed``), but it does not replace it: what the rules change is
fixed and checked, while a small verifier's NO is noise (the embedded Gemma 3 270M said NO to 9
of 12 built-in restatements, with reasons about neither text). The only way to a
model is the injected ``complete`` callable, so this module stays pure.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from raydist._util.protocols import Complete
from raydist.prompts import read_templates, render
from raydist.views.l1._spans import missing_spans, normalise, protected_spans
from raydist.views.l1.rules import rule_paraphrase

__all__ = [
    "ASPECTS",
    "VERIFIER_GRAMMAR",
    "Complete",
    "L1Prompts",
    "StatementResult",
    "clean_candidate",
    "load_l1_prompts",
    "missing_spans",
    "paraphrase_budget",
    "parse_verdict",
    "protected_spans",
    "reconstruct_statement",
    "rule_paraphrase",
]

ASPECTS = ("BUG", "REQUIREMENTS", "SUCCESS")
"""What the verifier judges, in answer order: bug description, requirements, success criteria."""

REASON_MAX_CHARS = 200
VERIFIER_GRAMMAR = (
    'root ::= "BUG: " verdict "\\nREQUIREMENTS: " verdict "\\nSUCCESS: " verdict "\\nREASON: " reason\n'
    'verdict ::= "YES" | "NO"\n'
    f"reason ::= [^\\n ] [^\\n]{{0,{REASON_MAX_CHARS - 1}}}\n"
)
"""GBNF (llama.cpp grammar) of the verifier's answer, exactly what ``parse_verdict`` reads::

    BUG: YES|NO
    REQUIREMENTS: YES|NO
    SUCCESS: YES|NO
    REASON: <1 to 200 characters, no newline>
"""

VERIFY_MAX_TOKENS = 96  # three verdict lines (~15 tokens) and an English reason of up to 200 characters
MAX_ATTEMPTS = 999  # request seeds are seed * 1000 + attempt, so attempts must stay below 1000
PROMPT_FILES = ("l1_paraphrase", "l1_refine", "l1_verify")
SYSTEM_LINE = "You are a precise technical editor of software issue reports. Follow the instructions exactly."




@dataclass(frozen=True)
class L1Prompts:
    """The Jinja2 templates of Level 1; each renders one user message.

    Attributes:
        paraphrase: variables ``statement``.
        refine: variables ``statement``, ``candidate``, ``missing`` (list of spans),
            ``verdicts`` (aspect -> "YES" / "NO" / None, empty when the verifier was not
            asked), ``reason`` (the verifier's, "" when none), ``unchanged`` (bool: the
            candidate repeated the statement).
        verify: variables ``statement``, ``candidate``.
        system: the system message sent before every user message.
    """

    paraphrase: str
    refine: str
    verify: str
    system: str = SYSTEM_LINE

    def messages(self, name: str, **variables: Any) -> list[dict]:
        """``[system, user]`` chat messages with template ``name`` rendered from ``variables``.

        Raises:
            jinja2.UndefinedError: the template uses a variable that was not given.
        """
        user = render(getattr(self, name), variables).strip()
        return [{"role": "system", "content": self.system}, {"role": "user", "content": user}]


def load_l1_prompts(prompts_dir: str | Path) -> L1Prompts:
    """Read ``l1_paraphrase.j2``, ``l1_refine.j2`` and ``l1_verify.j2`` from ``prompts_dir``
    (a relative path is taken from the raydist checkout, not the working directory).

    Raises:
        FileNotFoundError: a template is missing; the message names the file, the folder and
            the three files it must hold.
        jinja2.TemplateSyntaxError: a template does not parse.
    """
    return L1Prompts(**read_templates(prompts_dir, {n.removeprefix("l1_"): n for n in PROMPT_FILES}, "L1"))


SOURCES = ("paraphrase", "rule", "canonical")
"""Where an L1 statement came from: a verified LLM paraphrase, the rule restatement, the statement itself."""


@dataclass(frozen=True)
class StatementResult:
    """What Level 1 shows the agent, and how it got there.

    Attributes:
        text: the statement the agent is shown.
        source: "paraphrase" (a verified paraphrase), "rule" (no paraphrase passed, or no
            model: the seeded rule restatement) or "canonical" (the statement itself: a record
            made before the rule restatement existed, or a level without L1).
        attempts: model paraphrase attempts spent (0 without a model).
        history: one dict per attempt, in order, with keys
            ``attempt`` (1-based), ``prompt`` ("paraphrase" or "refine"), ``request_seed``,
            ``candidate`` (cleaned answer, None when the call failed), ``missing`` (list of
            lost spans), ``verdicts`` (aspect -> "YES" / "NO" / None for unparsable; empty
            when the verifier was not asked), ``reason`` (the verifier's, None when not
            asked), ``error`` ("<ExceptionType>: <message>" of a failed model call, else
            None), ``rejected`` (None when accepted, else "error", "empty", "unchanged",
            "form" (see ``form_problem``; ``reason`` says which), "missing_spans" or "verifier").
            The rule restatement's entry, last, has ``prompt`` "rule", ``rejected`` None and
            ``disputed``: whether the verifier said NO to one of ``ASPECTS`` for it (an ``error``
            there means the verifier could not be asked).
    """

    text: str
    source: str
    attempts: int
    history: tuple[dict, ...] = field(default=())

    def __post_init__(self):
        if self.source not in SOURCES:
            raise ValueError(f"StatementResult.source must be one of {', '.join(SOURCES)}, got {self.source!r}")

    def to_json(self) -> str:
        """This result as one JSON object (``history`` as a list)."""
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> StatementResult:
        """The result ``to_json`` wrote.

        Raises:
            ValueError: not JSON, or a field is missing or unknown.
        """
        data = json.loads(text)
        try:
            return cls(text=data.pop("text"), source=data.pop("source"), attempts=data.pop("attempts"),
                       history=tuple(data.pop("history")), **data)
        except (KeyError, TypeError) as exc:
            raise ValueError(f"not a StatementResult JSON object: {exc}") from exc


def paraphrase_budget(statement: str, cap: int = 2048) -> int:
    """Completion tokens for one paraphrase: about 1.5x the statement, counting a token as 3
    characters (code and paths tokenise densely), plus 32, at most ``cap``."""
    return min(cap, math.ceil(len(statement) / 2) + 32)


_ANNOUNCEMENT_START = re.compile(
    r"[#*\s]*(?:here|sure|certainly|okay|ok|below|the following|rewritten|paraphrased|restated|new)\b", re.IGNORECASE)
_ANNOUNCEMENT_NOUN = re.compile(r"rewrit|paraphras|restat|statement|report|version|issue", re.IGNORECASE)
_WRAPPING_FENCE = re.compile(r"```(?:markdown|md|text)?\n(.*)\n```", re.DOTALL)


def clean_candidate(answer: str) -> str:
    """The statement inside a generator's ``answer``.

    Line-normalises and strips the answer; drops its first line when that line only
    announces the answer: it starts with here, sure, below, rewritten, ..., names the
    rewrite (rewritten, paraphrase, statement, report, version, issue) and ends with a
    colon ("Here is the rewritten statement:", "**Paraphrased report:**"); then removes a
    ```` ``` ````/```` ```markdown ```` fence around the whole answer when no other fence is
    inside. Returns "" for an answer with nothing else.
    """
    text = normalise(answer).strip()
    first, _, rest = text.partition("\n")
    if (_ANNOUNCEMENT_START.match(first) and _ANNOUNCEMENT_NOUN.search(first)
            and first.rstrip("* ").endswith(":")):
        text = rest.strip()
    wrapped = _WRAPPING_FENCE.fullmatch(text)
    if wrapped and "```" not in wrapped.group(1):
        text = wrapped.group(1).strip()
    return text


_VERDICT = re.compile(r"^[\s*#-]*(BUG|REQUIREMENTS|SUCCESS)[\s*]*[:=-][\s*]*(YES|NO)\b", re.IGNORECASE | re.MULTILINE)
_REASON = re.compile(r"^[\s*#-]*REASON[\s*]*:[\s*]*(.*)$", re.IGNORECASE | re.MULTILINE)


def parse_verdict(answer: str) -> tuple[dict[str, str | None], str]:
    """Read the verifier's ``answer`` (``VERIFIER_GRAMMAR`` format, parsed leniently: any
    case, Markdown bold or bullets, ``:``/``=``/``-``, lines in any order, the first line of
    an aspect wins).

    Returns:
        ``({aspect: "YES" | "NO" | None}, reason)`` for every aspect in ``ASPECTS`` (None when
        the answer has no line for it) and the stripped REASON text ("" when absent).
    """
    verdicts: dict[str, str | None] = dict.fromkeys(ASPECTS)
    for match in _VERDICT.finditer(answer):
        aspect = match.group(1).upper()
        if verdicts[aspect] is None:
            verdicts[aspect] = match.group(2).upper()
    reason = _REASON.search(answer)
    return verdicts, reason.group(1).strip() if reason else ""


def reconstruct_statement(statement: str, complete: Complete | None, *, attempts: int = 3, seed: int = 0,
                          prompts: L1Prompts, max_tokens: int | None = None,
                          verify_max_tokens: int = VERIFY_MAX_TOKENS) -> StatementResult:
    """Paraphrase ``statement``, verify and refine it (SchrodingerRepo §III-B); without an
    accepted paraphrase, restate it by rules.

    Args:
        statement: the canonical problem statement.
        complete: ``complete(messages, *, seed, max_tokens, grammar) -> str``; the only model
            access, or None (no view model: the rule restatement, unjudged). An exception it
            raises fails that attempt and is recorded in its history entry; it is never raised
            from here.
        attempts: model attempts allowed, 1..999.
        seed: the run's seed. Attempt ``a`` sends request seed ``seed * 1000 + a`` to the
            generator and to the verifier, so equal inputs give equal requests and different
            seeds different ones; the rule restatement is ``rule_paraphrase(statement, seed)``,
            judged with request seed ``seed * 1000 + attempts + 1``.
        prompts: the Level 1 templates (``load_l1_prompts``).
        max_tokens: completion tokens per paraphrase; None for ``paraphrase_budget(statement)``.
        verify_max_tokens: completion tokens per verdict.

    Returns:
        The first accepted paraphrase (``source="paraphrase"``); else the rule restatement
        (``source="rule"``), the verifier's verdict on it in the last history entry.

    Raises:
        ValueError: ``attempts`` outside 1..999.
        jinja2.UndefinedError: a template uses a variable Level 1 does not provide.
    """
    if not 1 <= attempts <= MAX_ATTEMPTS:
        raise ValueError(f"attempts must be between 1 and {MAX_ATTEMPTS}, got {attempts}")
    budget = paraphrase_budget(statement) if max_tokens is None else max_tokens
    history: list[dict] = []
    for attempt in range(1, attempts + 1 if complete is not None else 1):
        assert complete is not None
        entry = _attempt(statement, complete, prompts, attempt=attempt, request_seed=seed * 1000 + attempt,
                         previous=history[-1] if history else None, max_tokens=budget,
                         verify_max_tokens=verify_max_tokens)
        history.append(entry)
        if entry["rejected"] is None:
            return StatementResult(text=entry["candidate"], source="paraphrase", attempts=attempt,
                                   history=tuple(history))
    spent = len(history)
    rule = _rule_entry(statement, complete, prompts, attempt=spent + 1, request_seed=seed * 1000 + spent + 1,
                       seed=seed, verify_max_tokens=verify_max_tokens)
    history.append(rule)
    return StatementResult(text=rule["candidate"], source="rule", attempts=spent, history=tuple(history))


def _rule_entry(statement: str, complete: Complete | None, prompts: L1Prompts, *, attempt: int, request_seed: int,
                seed: int, verify_max_tokens: int) -> dict:
    """The history entry of the rule restatement, judged by the verifier when there is a model."""
    candidate = rule_paraphrase(statement, seed)
    entry: dict[str, Any] = {"attempt": attempt, "prompt": "rule", "request_seed": request_seed,
                             "candidate": candidate, "missing": [], "verdicts": {},  # rule_paraphrase checked it
                             "reason": None, "error": None, "rejected": None, "disputed": False}
    if complete is None:
        return entry
    try:
        verdict = complete(prompts.messages("verify", statement=statement, candidate=candidate),
                           seed=request_seed, max_tokens=verify_max_tokens, grammar=VERIFIER_GRAMMAR)
    except Exception as exc:  # noqa: BLE001 - the verifier could not judge it: the checked rule stands
        return entry | {"error": f"{type(exc).__name__}: {exc}"}
    verdicts, reason = parse_verdict(verdict)
    return entry | {"verdicts": verdicts, "reason": reason,
                    "disputed": any(verdicts[aspect] == "NO" for aspect in ASPECTS)}


#: A paraphrase this close to the statement (difflib ratio) restates nothing.
MAX_SIMILARITY = 0.92
#: Bounds of a paraphrase's length relative to the statement's.
LENGTH_RANGE = (0.4, 2.5)


def form_problem(statement: str, candidate: str, messages: list[dict], previous: str | None = None) -> str | None:
    """Why ``candidate`` cannot be a restatement of ``statement`` whatever a verifier says, or
    None. Checked before the verifier, because a small model copies its instructions or the
    statement itself back and a small verifier then agrees (§III-B asks for a paraphrase that
    preserves the content, not a copy or a transcript of the request):

    * it repeats a line of the request that is neither a line of the statement nor of the
      ``previous`` candidate being refined (the instructions, the ``<<<``/``>>>`` fences);
    * it contains the whole statement, or is at least ``MAX_SIMILARITY`` similar to it;
    * its length is outside ``LENGTH_RANGE`` times the statement's.
    """
    own = {line.strip() for text in (statement, previous or "") for line in text.splitlines() if line.strip()}
    request = {line.strip() for m in messages for line in str(m.get("content", "")).splitlines()}
    scaffold = {line for line in request - own if len(line) >= 3}
    copied = [line.strip() for line in candidate.splitlines() if line.strip() in scaffold]
    if copied:
        return f"repeats the request instead of restating the issue: {copied[0][:80]!r}"
    if normalise(statement).strip() in normalise(candidate):
        return "contains the original statement verbatim"
    similarity = difflib.SequenceMatcher(None, statement, candidate, autojunk=False).ratio()
    if similarity >= MAX_SIMILARITY:
        return f"too close to the original statement (similarity {similarity:.2f})"
    low, high = LENGTH_RANGE
    if not low * len(statement) <= len(candidate) <= high * len(statement):
        return f"length {len(candidate)} is outside {low}-{high} times the statement's {len(statement)}"
    return None


def _attempt(statement: str, complete: Complete, prompts: L1Prompts, *, attempt: int, request_seed: int,
             previous: dict | None, max_tokens: int, verify_max_tokens: int) -> dict:
    """One generate-check-verify round; returns its history entry."""
    refinable = previous is not None and previous["rejected"] not in ("error", "empty")
    entry: dict[str, Any] = {
        "attempt": attempt, "prompt": "refine" if refinable else "paraphrase", "request_seed": request_seed,
        "candidate": None, "missing": [], "verdicts": {}, "reason": None, "error": None, "rejected": None}
    if previous is not None and refinable:
        messages = prompts.messages(
            "refine", statement=statement, candidate=previous["candidate"], missing=previous["missing"],
            verdicts=previous["verdicts"], reason=previous["reason"] or "",
            unchanged=previous["rejected"] == "unchanged",
        )
    else:
        messages = prompts.messages("paraphrase", statement=statement)
    try:
        answer = complete(messages, seed=request_seed, max_tokens=max_tokens, grammar=None)
    except Exception as exc:  # noqa: BLE001 - a failed call is this attempt's outcome, kept in history
        return entry | {"error": f"{type(exc).__name__}: {exc}", "rejected": "error"}
    candidate = clean_candidate(answer)
    entry["candidate"] = candidate
    if not candidate:
        return entry | {"rejected": "empty"}
    if normalise(candidate).strip() == normalise(statement).strip():
        return entry | {"rejected": "unchanged"}
    problem = form_problem(statement, candidate, messages,
                           previous["candidate"] if previous is not None and refinable else None)
    if problem:
        return entry | {"rejected": "form", "reason": problem}
    entry["missing"] = missing_spans(statement, candidate)
    if entry["missing"]:
        return entry | {"rejected": "missing_spans"}
    try:
        verdict = complete(prompts.messages("verify", statement=statement, candidate=candidate),
                           seed=request_seed, max_tokens=verify_max_tokens, grammar=VERIFIER_GRAMMAR)
    except Exception as exc:  # noqa: BLE001 - as above
        return entry | {"error": f"{type(exc).__name__}: {exc}", "rejected": "error"}
    verdicts, reason = parse_verdict(verdict)
    entry |= {"verdicts": verdicts, "reason": reason}
    if any(verdicts[aspect] != "YES" for aspect in ASPECTS):
        entry["rejected"] = "verifier"
    return entry
